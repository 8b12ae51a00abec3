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

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  // Each argument: a module (copied: it shares its parameters with the argument) or a shared_ptr to one.
  template <class M0, class... Ms, std::enable_if_t<!std::is_same_v<std::decay_t<M0>, ModuleList>, int> = 0>
  explicit ModuleList(M0&& first, Ms&&... rest) : Module("ModuleList") {
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
  // Appends every module of `other` (shared, not copied).
  void extend(const ModuleList& other);

  // Raises NotImplementedError: a ModuleList is iterated, not called.
  Tensor forward(const Tensor& input) override;
  size_t size() const { return named_children().size(); }
  bool empty() const { return size() == 0; }
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

 private:
  [[noreturn]] void bad_cast(size_t i) const;
  std::vector<std::shared_ptr<Module>> modules_;  // the children, in order, for iteration
};

}  // namespace tessera::nn
