#pragma once
// nn::Module: the base of every layer, with torch.nn.Module's semantics: named parameters and
// buffers, child modules, state_dict / load_state_dict, train / eval, to(dtype | device).
//
// A module holds its tensors by handle, so copying a module shares its parameters (and its
// children, held by shared_ptr); subclasses reach their tensors by name (Linear::weight()).
#include <tessera/safetensors.h>
#include <tessera/tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera::nn {

class Module {
 public:
  explicit Module(std::string name = "Module") : name_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = default;
  Module& operator=(const Module&) = default;

  // The layer's computation; the base raises NotImplementedError.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  const std::string& name() const { return name_; }

  // Parameters ("weight", "0.bias" for a child's) in registration order, children after their parent's own.
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  std::shared_ptr<Module> child(const std::string& name) const;  // nullptr when none

  // Parameters and persistent buffers, detached from the graph (they share the module's data).
  NamedTensors state_dict() const;
  // Copies each entry into the tensor of that name (converting dtype). strict: every key must be
  // present and no other; raises ValueError naming missing / unexpected keys or a shape mismatch.
  void load_state_dict(const NamedTensors& state_dict, bool strict = true);

  // Training mode (dropout drops, batch norm uses batch statistics), recursively.
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // Converts floating parameters and buffers to `dtype`, or every tensor to `device`.
  Module& to(ScalarType dtype);
  Module& to(Device device);
  Module& requires_grad_(bool requires_grad = true);
  // Clears (set_to_none) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);

  // "Linear(in_features=2, out_features=3, bias=true)", nested for containers.
  std::string repr() const;
  virtual std::string extra_repr() const { return ""; }

 protected:
  // A parameter is a leaf that requires grad (an undefined t registers "no such parameter", e.g. bias=false).
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  // A buffer is state that is not trained (running statistics); non-persistent ones stay out of state_dict.
  Tensor& register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  // The registered tensor of that name; raises ValueError when there is none.
  Tensor& param(const std::string& name);
  const Tensor& param(const std::string& name) const;
  Tensor& buffer(const std::string& name);
  const Tensor& buffer(const std::string& name) const;

 private:
  struct Slot {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  void check_name(const std::string& kind, const std::string& name) const;
  template <class F>
  void apply_to_tensors(F&& fn);
  void collect(NamedTensors& out, const std::string& prefix, bool params, bool recurse, bool persistent_only) const;

  std::string name_;
  bool training_ = true;
  std::vector<Slot> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace tessera::nn
