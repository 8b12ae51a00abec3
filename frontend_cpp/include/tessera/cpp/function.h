#pragma once
// Custom differentiable functions, as torch::autograd::Function<T> in PyTorch's C++ API:
//
//   struct Exp : tessera::autograd::Function<Exp> {
//     static Tensor forward(AutogradContext* ctx, const Tensor& x) {
//       Tensor y = x.exp();
//       ctx->save_for_backward({y});
//       return y;
//     }
//     static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
//       return {grads[0] * ctx->get_saved_variables()[0]};  // one per argument of forward
//     }
//   };
//   Tensor y = Exp::apply(x);
//
// forward runs without recording; backward becomes a host callback that the autograd plugin's
// node calls (autograd::attach_function). forward returns a Tensor or a std::vector<Tensor>.
#include <tessera/cpp/autograd.h>

#include <any>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessera::autograd {

class AutogradContext {
 public:
  void save_for_backward(std::vector<Tensor> tensors) { saved_ = std::move(tensors); }
  const std::vector<Tensor>& get_saved_variables() const { return saved_; }
  // Whether argument i of forward is a tensor that requires grad.
  bool needs_input_grad(size_t i) const { return i < needs_input_grad_.size() && needs_input_grad_[i]; }
  // When true (the default), undefined output gradients reach backward as zeros.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }
  // Anything else backward needs (sizes, flags...).
  std::unordered_map<std::string, std::any> saved_data;

 private:
  friend struct FunctionSupport;
  std::vector<Tensor> saved_;
  std::vector<bool> needs_input_grad_;
  bool materialize_grads_ = true;
};

using BackwardFn = std::function<std::vector<Tensor>(AutogradContext*, std::vector<Tensor>)>;

// The non-template half of Function<T>::apply, in libtessera-cpp.
struct FunctionSupport {
  static void set_needs_input_grad(AutogradContext& ctx, std::vector<bool> needs) { ctx.needs_input_grad_ = std::move(needs); }
  // Records the call in the graph: `outputs` (those returned as-is from the inputs become views)
  // get a node whose backward calls `backward`; args: number of forward arguments,
  // positions: where the tensor ones are.
  static void attach(const std::shared_ptr<AutogradContext>& ctx, const std::vector<Tensor>& inputs,
                     const std::vector<size_t>& positions, size_t args, std::vector<Tensor>& outputs,
                     std::string name, BackwardFn backward);
  static std::string demangle(const char* name);
};

template <class Derived>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    auto ctx = std::make_shared<AutogradContext>();
    std::vector<Tensor> inputs;
    std::vector<size_t> positions;
    std::vector<bool> needs;
    size_t i = 0;
    auto collect = [&](const auto& a) {
      if constexpr (std::is_convertible_v<decltype(a), const Tensor&>) {
        const Tensor& t = a;
        inputs.push_back(t);
        positions.push_back(i);
        needs.push_back(t.defined() && t.requires_grad());
      } else {
        needs.push_back(false);
      }
      ++i;
    };
    (collect(args), ...);
    bool any = false;
    for (bool n : needs) any = any || n;
    FunctionSupport::set_needs_input_grad(*ctx, needs);

    using Out = std::decay_t<decltype(Derived::forward(ctx.get(), std::forward<Args>(args)...))>;
    static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, std::vector<Tensor>>,
                  "Function::forward must return a Tensor or a std::vector<Tensor>");
    Out out = [&] {
      NoGradGuard no_grad;
      return Derived::forward(ctx.get(), std::forward<Args>(args)...);
    }();
    if (!any || !is_grad_enabled()) return out;
    std::vector<Tensor> outputs;
    if constexpr (std::is_same_v<Out, Tensor>) outputs = {out};
    else outputs = out;
    FunctionSupport::attach(ctx, inputs, positions, sizeof...(Args), outputs,
                            FunctionSupport::demangle(typeid(Derived).name()) + "Backward",
                            [](AutogradContext* c, std::vector<Tensor> g) { return Derived::backward(c, std::move(g)); });
    if constexpr (std::is_same_v<Out, Tensor>) return outputs[0];
    else return outputs;
  }
};

}  // namespace tessera::autograd
