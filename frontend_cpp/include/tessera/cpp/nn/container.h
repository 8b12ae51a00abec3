#pragma once
// nn::Sequential: runs its children in order, each on the previous one's output. nn::ModuleList:
// holds modules (registered, so their parameters are the list's) without a forward of its own.
// Children are named "0", "1", ... (so their parameters are "0.weight", ...), as in torch.
//
//   nn::Sequential model(nn::Linear(4, 16), nn::ReLU(), nn::Linear(16, 1));
//   nn::ModuleList blocks(nn::Linear(4, 4), nn::Linear(4, 4));
//   for (auto& block : blocks) x = (*block)(x);
#include <tessera/cpp/nn/module.h>

#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera::nn {

// What Sequential and ModuleList share: an ordered list of registered children.
class ModuleSequence : public Module {
 public:
  void push_back(std::shared_ptr<Module> m);
  // A module (copied: it shares its parameters with the argument) or a shared_ptr to one.
  template <class M, std::enable_if_t<std::is_base_of_v<Module, std::decay_t<M>>, int> = 0>
  void push_back(M&& m) {
    push_back(std::shared_ptr<Module>(std::make_shared<std::decay_t<M>>(std::forward<M>(m))));
  }
  template <class M, std::enable_if_t<std::is_base_of_v<Module, M>, int> = 0>
  void push_back(std::shared_ptr<M> m) {
    push_back(std::shared_ptr<Module>(std::move(m)));
  }

  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  // The i-th module; raises IndexError when out of range.
  std::shared_ptr<Module> operator[](size_t i) const;
  // The i-th module as M; raises TypeError when it is not one.
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[i]);
    if (!m) bad_cast(i);
    return m;
  }
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

 protected:
  explicit ModuleSequence(std::string name) : Module(std::move(name)) {}
  template <class... Ms>
  void push_all(Ms&&... ms) {
    (push_back(std::forward<Ms>(ms)), ...);
  }

 private:
  [[noreturn]] void bad_cast(size_t i) const;
  std::vector<std::shared_ptr<Module>> modules_;  // the children, in order, for iteration
};

class Sequential : public ModuleSequence {
 public:
  Sequential() : ModuleSequence("Sequential") {}
  template <class M0, class... Ms, std::enable_if_t<!std::is_same_v<std::decay_t<M0>, Sequential>, int> = 0>
  explicit Sequential(M0&& first, Ms&&... rest) : ModuleSequence("Sequential") {
    push_all(std::forward<M0>(first), std::forward<Ms>(rest)...);
  }
  Tensor forward(const Tensor& input) override;
};

class ModuleList : public ModuleSequence {
 public:
  ModuleList() : ModuleSequence("ModuleList") {}
  template <class M0, class... Ms, std::enable_if_t<!std::is_same_v<std::decay_t<M0>, ModuleList>, int> = 0>
  explicit ModuleList(M0&& first, Ms&&... rest) : ModuleSequence("ModuleList") {
    push_all(std::forward<M0>(first), std::forward<Ms>(rest)...);
  }
  // Appends every module of `other` (shared, not copied).
  void extend(const ModuleList& other);
  // Raises NotImplementedError: a ModuleList is iterated, not called.
  Tensor forward(const Tensor& input) override;
};

}  // namespace tessera::nn
