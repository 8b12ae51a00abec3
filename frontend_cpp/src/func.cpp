// tessera::func: vmap, grad and jvp over the vmap plugin's (vmap::*) and the autograd plugin's
// (autograd::*) operators, following tessera/_functorch in the Python frontend.
#include "autograd_calls.h"

#include <tessera/cpp/autograd.h>
#include <tessera/cpp/func.h>
#include <tessera/ops.h>
#include <tessera/runtime.h>

namespace tessera::func {
namespace {
using cpp_detail::autograd_op;
using cpp_detail::BoxedCall;

OperatorHandle vmap_op(std::string_view name) {
  autograd::ensure_loaded();  // first: vmap registers rules for autograd's operators when it loads
  if (!is_plugin_loaded("vmap")) {
    require_lazy_loading("vmap", "vmap (tessera::func)");
    load_named_plugin("vmap");
  }
  if (!is_plugin_loaded("vmap"))
    raise<RuntimeError>("vmap is not available: libtessera_vmap.so is not on the plugin search path [{}]",
                        plugin_search_path_text());
  return Dispatcher::instance().find_or_throw(fmt::format("vmap::{}", name));
}

// Pops the level however the function leaves (an exception included).
class LevelScope {
 public:
  LevelScope(int64_t batch_size, const std::string& randomness)
      : level_(detail::unbox<int64_t>(BoxedCall().arg(batch_size).arg(randomness).call(vmap_op("push_level")).ret(0))) {}
  ~LevelScope() {
    try {
      BoxedCall().arg(level_).call(vmap_op("pop_level"));
    } catch (...) {  // a destructor must not throw; the level is popped unless the plugin is gone
    }
  }
  LevelScope(const LevelScope&) = delete;
  LevelScope& operator=(const LevelScope&) = delete;
  int64_t level() const { return level_; }

 private:
  int64_t level_;
};

int64_t wrap_in_dim(int64_t dim, const Tensor& t, size_t input) {
  const int64_t rank = t.dim();
  if (dim < -rank || dim >= rank)
    raise<ValueError>("vmap: Got in_dim={} for input {}, but that input is a Tensor of dimensionality {} so expected "
                      "in_dim to satisfy -{} <= in_dim < {}.", dim, input, rank, rank, rank);
  return dim < 0 ? dim + rank : dim;
}

std::vector<Tensor> call_vmapped(const Function& f, const VmapOptions& options, const std::vector<Tensor>& inputs) {
  if (!options.in_dims.empty() && options.in_dims.size() != inputs.size())
    raise<ValueError>("vmap: in_dims has {} entries but the function got {} inputs", options.in_dims.size(),
                      inputs.size());
  std::vector<std::optional<int64_t>> dims(inputs.size(), std::optional<int64_t>(0));
  if (!options.in_dims.empty()) dims = options.in_dims;
  int64_t batch_size = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!dims[i]) continue;
    if (!inputs[i].defined()) raise<ValueError>("vmap: input {} is an undefined tensor but has in_dim {}", i, *dims[i]);
    dims[i] = wrap_in_dim(*dims[i], inputs[i], i);
    const int64_t size = inputs[i].size(*dims[i]);
    if (batch_size >= 0 && size != batch_size)
      raise<ValueError>("vmap: Expected all tensors to have the same size in the mapped dimension, got sizes {} and "
                        "{} for the mapped dimension", batch_size, size);
    batch_size = size;
  }
  if (batch_size < 0)
    raise<ValueError>("vmap: at least one input must be batched (every in_dim is nullopt), got {} inputs",
                      inputs.size());
  if (options.randomness != "error" && options.randomness != "different" && options.randomness != "same")
    raise<ValueError>("vmap: randomness must be 'error', 'different' or 'same', got '{}'", options.randomness);

  std::vector<Tensor> outputs;
  LevelScope scope(batch_size, options.randomness);
  {
    std::vector<Tensor> batched;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!dims[i]) {
        batched.push_back(inputs[i]);
        continue;
      }
      batched.push_back(BoxedCall().arg(inputs[i]).arg(*dims[i]).arg(scope.level()).call(vmap_op("add_batch_dim")).tensor(0));
    }
    outputs = f(batched);
  }
  if (!options.out_dims.empty() && options.out_dims.size() != outputs.size())
    raise<ValueError>("vmap: out_dims has {} entries but the function returned {} outputs", options.out_dims.size(),
                      outputs.size());
  std::vector<Tensor> result;
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (!outputs[j].defined()) raise<ValueError>("vmap: output {} is an undefined tensor", j);
    const int64_t out_dim = options.out_dims.empty() ? 0 : options.out_dims[j];
    result.push_back(BoxedCall()
                         .arg(outputs[j])
                         .arg(scope.level())
                         .arg(batch_size)
                         .arg(out_dim)
                         .call(vmap_op("remove_batch_dim"))
                         .tensor(0));
  }
  return result;
}

// An input to differentiate with respect to, batched at every open vmap level, so that grad under
// vmap gives per-sample gradients for a shared input too (as tessera.func's grad).
Tensor promote_to_open_levels(Tensor x) {
  if (!is_plugin_loaded("vmap")) return x;
  BoxedCall levels;
  levels.call(vmap_op("levels"));
  const ts_value& ids = levels.ret(0);
  std::vector<int64_t> open(ids.u.ints.data, ids.u.ints.data + ids.u.ints.size);
  for (int64_t level : open) {
    const int64_t at = detail::unbox<int64_t>(BoxedCall().arg(x).call(vmap_op("level")).ret(0));
    if (at < level) x = BoxedCall().arg(x).arg(level).call(vmap_op("promote")).tensor(0);
  }
  return x;
}

}  // namespace

Function vmap(Function f, VmapOptions options) {
  if (!f) raise<ValueError>("vmap: expected a function, got an empty std::function");
  return [f = std::move(f), options = std::move(options)](const std::vector<Tensor>& inputs) {
    return call_vmapped(f, options, inputs);
  };
}

std::function<Tensor(const Tensor&)> vmap(std::function<Tensor(const Tensor&)> f, int64_t in_dim, int64_t out_dim) {
  if (!f) raise<ValueError>("vmap: expected a function, got an empty std::function");
  Function mapped = vmap([f = std::move(f)](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0])}; },
                         VmapOptions{{in_dim}, {out_dim}, "error"});
  return [mapped](const Tensor& x) { return mapped({x})[0]; };
}

Function grad(std::function<Tensor(const std::vector<Tensor>&)> f, std::vector<int64_t> argnums) {
  if (!f) raise<ValueError>("grad: expected a function, got an empty std::function");
  return [f = std::move(f), argnums = std::move(argnums)](const std::vector<Tensor>& inputs) {
    std::vector<Tensor> args = inputs;
    std::vector<Tensor> wrt;
    bool create_graph = false;
    {
      autograd::EnableGradGuard enable;
      for (int64_t a : argnums) {
        if (a < 0 || a >= int64_t(args.size()))
          raise<IndexError>("grad: argnums {} is out of range for a function of {} inputs", a, args.size());
        const Tensor x = promote_to_open_levels(args[size_t(a)]);
        if (!is_floating_point(x.dtype()) && !is_complex(x.dtype()))
          raise<RuntimeError>("grad: only Tensors of floating point or complex dtype can require gradients, got "
                              "input {} of dtype {}", a, name(x.dtype()));
        // An input already in a graph (grad of grad) keeps it: a view joins that graph.
        create_graph = create_graph || x.requires_grad();
        args[size_t(a)] = x.requires_grad() ? x.view_as(x) : x.detach().requires_grad_(true);
        wrt.push_back(args[size_t(a)]);
      }
      Tensor out = f(args);
      if (!out.defined() || out.dim() != 0)
        raise<RuntimeError>("grad: Expected f(inputs) to return a scalar Tensor, got a tensor with {} dims. Maybe you "
                            "wanted to use vjp or jacrev instead?", out.defined() ? out.dim() : -1);
      std::vector<Tensor> grads;
      if (out.requires_grad()) grads = autograd::grad({out}, wrt, {}, true, create_graph, true);
      else grads.resize(wrt.size());
      for (size_t i = 0; i < grads.size(); ++i) {
        if (!grads[i].defined()) grads[i] = full_like(wrt[i], 0.0);
        if (!create_graph) grads[i] = grads[i].detach();
      }
      return grads;
    }
  };
}

std::pair<std::vector<Tensor>, std::vector<Tensor>> jvp(const Function& f, const std::vector<Tensor>& primals,
                                                        const std::vector<Tensor>& tangents) {
  if (primals.size() != tangents.size())
    raise<ValueError>("jvp: Expected primals and tangents to have the same length, got {} and {}", primals.size(),
                      tangents.size());
  const int64_t level =
      detail::unbox<int64_t>(BoxedCall().call(autograd_op("enter_dual_level")).ret(0));
  struct ExitLevel {
    int64_t level;
    ~ExitLevel() {
      try {
        BoxedCall().arg(level).call(autograd_op("exit_dual_level"));
      } catch (...) {
      }
    }
  } exit_level{level};
  std::vector<Tensor> duals;
  for (size_t i = 0; i < primals.size(); ++i)
    duals.push_back(BoxedCall().arg(primals[i]).arg(tangents[i]).arg(level).call(autograd_op("make_dual")).tensor(0));
  std::vector<Tensor> outputs = f(duals);
  std::pair<std::vector<Tensor>, std::vector<Tensor>> result;
  for (const Tensor& o : outputs) {
    Tensor tangent = BoxedCall().arg(o).arg(level).call(autograd_op("tangent_of")).tensor(0);
    result.first.push_back(tangent.defined() ? BoxedCall().arg(o).call(autograd_op("primal_of")).tensor(0) : o);
    result.second.push_back(tangent.defined() ? tangent : full_like(o, 0.0));
  }
  return result;
}

}  // namespace tessera::func
