// nn::Module: registration, traversal, state_dict, modes and conversions.
#include <tessera/cpp/autograd.h>
#include <tessera/cpp/nn/module.h>
#include <tessera/ops.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace tessera::nn {

Tensor Module::forward(const Tensor&) {
  raise<NotImplementedError>("{}: forward is not implemented (override Module::forward)", name_);
}

void Module::check_name(const std::string& kind, const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos)
    raise<ValueError>("{}: {} name must be non-empty and contain no '.', got '{}'", name_, kind, name);
  auto taken = [&](const auto& v) { return std::any_of(v.begin(), v.end(), [&](const auto& s) { return s.name == name; }); };
  bool child = std::any_of(children_.begin(), children_.end(), [&](const auto& c) { return c.first == name; });
  if (taken(params_) || taken(buffers_) || child)
    raise<ValueError>("{}: attribute '{}' is registered already", name_, name);
}

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name("parameter", name);
  if (t.defined()) {
    if (!t.is_leaf()) raise<ValueError>("{}: parameter '{}' must be a leaf tensor (detach() it)", name_, name);
    if (requires_grad && is_floating_point(t.dtype())) t.requires_grad_(true);
  }
  params_.push_back({name, std::move(t), true});
  return params_.back().tensor;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_name("buffer", name);
  buffers_.push_back({name, std::move(t), persistent});
  return buffers_.back().tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name("module", name);
  if (!m) raise<ValueError>("{}: module '{}' is null", name_, name);
  children_.emplace_back(name, std::move(m));
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  for (const auto& [n, m] : children_)
    if (n == name) return m;
  return nullptr;
}

Tensor& Module::param(const std::string& name) { return const_cast<Tensor&>(std::as_const(*this).param(name)); }
const Tensor& Module::param(const std::string& name) const {
  for (const Slot& s : params_)
    if (s.name == name) return s.tensor;
  raise<ValueError>("{} has no parameter '{}'", name_, name);
}
Tensor& Module::buffer(const std::string& name) { return const_cast<Tensor&>(std::as_const(*this).buffer(name)); }
const Tensor& Module::buffer(const std::string& name) const {
  for (const Slot& s : buffers_)
    if (s.name == name) return s.tensor;
  raise<ValueError>("{} has no buffer '{}'", name_, name);
}

void Module::collect(NamedTensors& out, const std::string& prefix, bool params, bool recurse, bool persistent_only) const {
  for (const Slot& s : params ? params_ : buffers_)
    if (s.tensor.defined() && (!persistent_only || s.persistent)) out.emplace_back(prefix + s.name, s.tensor);
  if (recurse)
    for (const auto& [n, m] : children_) m->collect(out, prefix + n + ".", params, recurse, persistent_only);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect(out, "", true, recurse, false);
  // A tensor shared by two modules (tied weights) is listed once, as torch does.
  std::set<TensorImpl*> seen;
  std::erase_if(out, [&](const auto& p) { return !seen.insert(p.second.impl()).second; });
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect(out, "", false, recurse, false);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  collect(out, "", true, true, false);
  collect(out, "", false, true, true);
  for (auto& [n, t] : out) t = t.detach();
  return out;
}

void Module::load_state_dict(const NamedTensors& state_dict, bool strict) {
  NamedTensors own;
  collect(own, "", true, true, false);
  collect(own, "", false, true, true);
  std::vector<std::string> missing, unexpected;
  for (const auto& [name, t] : own)
    if (std::none_of(state_dict.begin(), state_dict.end(), [&](const auto& e) { return e.first == name; }))
      missing.push_back(name);
  for (const auto& [name, t] : state_dict)
    if (std::none_of(own.begin(), own.end(), [&](const auto& e) { return e.first == name; }))
      unexpected.push_back(name);
  if (strict && (!missing.empty() || !unexpected.empty()))
    raise<ValueError>("Error(s) in loading state_dict for {}: missing keys [{}], unexpected keys [{}]", name_,
                      fmt::join(missing, ", "), fmt::join(unexpected, ", "));
  // Check every shape before copying anything, so a bad dict leaves the module as it was.
  for (const auto& [name, src] : state_dict) {
    auto it = std::find_if(own.begin(), own.end(), [&](const auto& e) { return e.first == name; });
    if (it == own.end()) continue;
    if (!src.defined()) raise<ValueError>("load_state_dict: entry '{}' is an undefined tensor", name);
    if (src.shape() != it->second.shape())
      raise<ValueError>("Error(s) in loading state_dict for {}: size mismatch for {}: copying a param with shape [{}], "
                        "the shape in the current model is [{}]", name_, name, fmt::join(src.shape(), ", "),
                        fmt::join(it->second.shape(), ", "));
  }
  autograd::NoGradGuard no_grad;
  for (const auto& [name, src] : state_dict) {
    auto it = std::find_if(own.begin(), own.end(), [&](const auto& e) { return e.first == name; });
    if (it != own.end()) it->second.copy_(src.to(it->second.device()));
  }
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
  return *this;
}

template <class F>
void Module::apply_to_tensors(F&& fn) {
  for (Slot& s : params_) {
    if (!s.tensor.defined()) continue;
    bool requires_grad = s.tensor.requires_grad();
    Tensor converted;
    {
      autograd::NoGradGuard no_grad;
      converted = fn(s.tensor);
    }
    if (converted.impl() == s.tensor.impl()) continue;
    s.tensor = converted.detach();
    if (requires_grad) s.tensor.requires_grad_(true);
  }
  for (Slot& s : buffers_)
    if (s.tensor.defined()) s.tensor = fn(s.tensor);
  for (auto& [n, m] : children_) m->apply_to_tensors(fn);
}

Module& Module::to(ScalarType dtype) {
  if (!is_floating_point(dtype)) raise<TypeError>("{}.to: only floating dtypes are supported, got {}", name_, tessera::name(dtype));
  apply_to_tensors([&](const Tensor& t) { return is_floating_point(t.dtype()) && t.dtype() != dtype ? t.to(dtype) : t; });
  return *this;
}

Module& Module::to(Device device) {
  apply_to_tensors([&](const Tensor& t) { return t.to(device); });
  return *this;
}

Module& Module::requires_grad_(bool requires_grad) {
  for (Tensor& p : parameters()) p.requires_grad_(requires_grad);
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  for (const Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) p.set_grad(Tensor());
    else g.fill_(0);
  }
}

std::string Module::repr() const {
  std::string extra = extra_repr();
  if (children_.empty()) return fmt::format("{}({})", name_, extra);
  std::string out = fmt::format("{}({}\n", name_, extra);
  for (const auto& [n, m] : children_) {
    std::string child = m->repr();
    std::string indented;
    for (char c : child) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
    out += fmt::format("  ({}): {}\n", n, indented);
  }
  return out + ")";
}

}  // namespace tessera::nn
