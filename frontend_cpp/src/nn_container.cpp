// nn::ModuleList.
#include <tessera/cpp/nn/container.h>
#include <tessera/error.h>

namespace tessera::nn {

void ModuleList::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(size()), m);
  modules_.push_back(std::move(m));
}

void ModuleList::extend(const ModuleList& other) {
  if (&other == this) {
    auto copy = modules_;
    for (auto& m : copy) push_back(m);
    return;
  }
  for (const auto& m : other) push_back(m);
}

Tensor ModuleList::forward(const Tensor&) {
  raise<NotImplementedError>("ModuleList: has no forward; iterate over its modules and call each");
}

std::shared_ptr<Module> ModuleList::operator[](size_t i) const {
  if (i >= size()) raise<IndexError>("ModuleList: index {} is out of range for {} modules", i, size());
  return modules_[i];
}

void ModuleList::bad_cast(size_t i) const {
  raise<TypeError>("ModuleList: module {} is a {}, not the type asked for", i, modules_[i]->name());
}

}  // namespace tessera::nn
