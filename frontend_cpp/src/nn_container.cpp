// nn::Sequential and nn::ModuleList (over nn::ModuleSequence).
#include <tessera/cpp/nn/container.h>
#include <tessera/error.h>

namespace tessera::nn {

void ModuleSequence::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(size()), m);
  modules_.push_back(std::move(m));
}

std::shared_ptr<Module> ModuleSequence::operator[](size_t i) const {
  if (i >= size()) raise<IndexError>("{}: index {} is out of range for {} modules", name(), i, size());
  return modules_[i];
}

void ModuleSequence::bad_cast(size_t i) const {
  raise<TypeError>("{}: module {} is a {}, not the type asked for", name(), i, modules_[i]->name());
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& m : *this) x = m->forward(x);
  return x;
}

void ModuleList::extend(const ModuleList& other) {
  const auto modules = std::vector<std::shared_ptr<Module>>(other.begin(), other.end());  // other may be *this
  for (const auto& m : modules) push_back(m);
}

Tensor ModuleList::forward(const Tensor&) {
  raise<NotImplementedError>("ModuleList: has no forward; iterate over its modules and call each");
}

}  // namespace tessera::nn
