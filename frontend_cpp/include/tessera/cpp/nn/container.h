#pragma once
// nn::Sequential: runs its children in order, each on the previous one's output. Children are
// named "0", "1", ... (so their parameters are "0.weight", ...), as in torch.
//
//   nn::Sequential model(nn::Linear(4, 16), nn::ReLU(), nn::Linear(16, 1));
#include <tessera/cpp/nn/module.h>

#include <memory>
#include <type_traits>
#include <utility>

namespace tessera::nn {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  // Each argument: a module (copied: it shares its parameters with the argument) or a shared_ptr to one.
  template <class M0, class... Ms, std::enable_if_t<!std::is_same_v<std::decay_t<M0>, Sequential>, int> = 0>
  explicit Sequential(M0&& first, Ms&&... rest) : Module("Sequential") {
    push_back(std::forward<M0>(first));
    (push_back(std::forward<Ms>(rest)), ...);
  }

  void push_back(std::shared_ptr<Module> m);
  template <class M, std::enable_if_t<std::is_base_of_v<Module, std::decay_t<M>>, int> = 0>
  void push_back(M&& m) {
    push_back(std::shared_ptr<Module>(std::make_shared<std::decay_t<M>>(std::forward<M>(m))));
  }
  template <class M, std::enable_if_t<std::is_base_of_v<Module, M>, int> = 0>
  void push_back(std::shared_ptr<M> m) {
    push_back(std::shared_ptr<Module>(std::move(m)));
  }

  Tensor forward(const Tensor& input) override;
  size_t size() const { return named_children().size(); }
  // The i-th module; raises IndexError when out of range.
  std::shared_ptr<Module> operator[](size_t i) const;
};

}  // namespace tessera::nn
