#!/usr/bin/env python3
"""Generates the autograd plugin's kernels from autograd/derivatives.yaml and core/ops.yaml.

Output: <out>/autograd_kernels.cpp with, per differentiable operator, a backward Node (what
the formulas need saved, and apply() evaluating them) and an Autograd kernel for the operator
and each of its in-place / out= variants; plus register_generated_kernels().
"""
import argparse
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "core", "codegen"))
from gen_ops import Schema, derive_variants, write_if_changed  # noqa: E402


def camel(name):
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[._]", name) if p)


def uses(formula_texts, token):
    pat = re.compile(r"(?<![\w.])" + re.escape(token) + r"(?!\w)")
    return any(pat.search(f) for f in formula_texts)


# How a non-tensor argument is saved and read back.
def saved_scalar(arg):
    b, opt = arg.base, arg.optional
    if arg.is_list:
        if b in ("int", "SymInt"):
            return ("std::optional<IntList>", "optional_int_list_arg") if opt else ("IntList", "int_list_arg")
        if b == "float":
            return ("std::vector<double>", "double_list_arg")
        return None
    table = {
        "int": ("int64_t", "int_arg"), "SymInt": ("int64_t", "int_arg"), "float": ("double", "double_arg"),
        "bool": ("bool", "bool_arg"), "Scalar": ("sdk::Scalar", "scalar_arg"), "str": ("std::string", "string_arg"),
        "ScalarType": ("int32_t", "dtype_arg"),
    }
    if b not in table:
        return None
    t, fn = table[b]
    if opt:
        return (f"std::optional<{t}>", "optional_" + fn)
    return (t, fn)


class Entry:
    def __init__(self, schema, spec):
        self.schema = schema
        self.spec = spec
        self.nondiff = bool(spec.get("nondifferentiable"))
        self.formulas = []  # (list of input names, formula)
        for k, v in spec.items():
            if k in ("name", "output_differentiability", "nondifferentiable"):
                continue
            names = [n.strip() for n in k.split(",")]
            self.formulas.append((names, str(v)))
        n_out = len([r for r in schema.returns if r != "()"])
        self.out_diff = spec.get("output_differentiability", [True] * n_out)
        self.node = camel(schema.full_name) + "Backward"
        texts = [f for _, f in self.formulas]
        self.texts = texts
        args = {a.name: a for a in schema.args}
        self.diff_inputs = [a for a in schema.args if a.base == "Tensor" and any(a.name in ns for ns, _ in self.formulas)]
        for ns, _ in self.formulas:
            for n in ns:
                if n not in args:
                    sys.exit(f"gen_autograd.py: {schema.full_name}: formula for unknown input '{n}'")
        self.saved = []  # (field, type, init expression from the stack, unpack kind)
        for i, a in enumerate(schema.args):
            if a.base == "Tensor":
                if a.is_list:
                    if uses(texts, a.name):
                        self.saved.append((a, "list", i))
                    if uses(texts, a.name + "_sizes"):
                        self.saved.append((a, "list_sizes", i))
                else:
                    if uses(texts, a.name):
                        self.saved.append((a, "tensor", i))
                    if uses(texts, a.name + "_sizes"):
                        self.saved.append((a, "sizes", i))
                    if uses(texts, a.name + "_dtype"):
                        self.saved.append((a, "dtype", i))
            elif uses(texts, a.name):
                st = saved_scalar(a)
                if st is None:
                    sys.exit(f"gen_autograd.py: {schema.full_name}: cannot save argument {a.name} ({a.type_text})")
                self.saved.append((a, "scalar", i))
        self.results = [j for j in range(n_out) if uses(texts, f"result{j}") or (j == 0 and uses(texts, "result"))]


def node_struct(e):
    s = e.schema
    lines = [f"struct {e.node} final : Node {{",
             f'  const char* name() const override {{ return "{e.node}"; }}',
             f'  const char* op_name() const override {{ return "{s.full_name}"; }}']
    release = []
    for a, kind, _ in e.saved:
        if kind == "tensor":
            lines.append(f"  SavedTensor {a.name}_;")
            release.append(f"{a.name}_.reset();")
        elif kind == "list":
            lines.append(f"  std::vector<SavedTensor> {a.name}_;")
            release.append(f"for (auto& t : {a.name}_) t.reset();")
        elif kind == "sizes":
            lines.append(f"  IntList {a.name}_sizes;")
        elif kind == "list_sizes":
            lines.append(f"  std::vector<IntList> {a.name}_sizes;")
        elif kind == "dtype":
            lines.append(f"  int32_t {a.name}_dtype = TS_FLOAT32;")
        else:
            lines.append(f"  {saved_scalar(a)[0]} {a.name}{{}};")
    for j in e.results:
        lines.append(f"  SavedTensor result{j}_;")
        release.append(f"result{j}_.reset();")
    # Edge slots of the differentiable inputs.
    for a in e.diff_inputs:
        lines.append(f"  size_t {a.name}_edge = 0;" + (f" size_t {a.name}_count = 0;" if a.is_list else ""))
    lines.append("  void release_saved() override { " + " ".join(release) + " }")
    lines.append("  GradList apply(GradList&& grads) override {")
    lines.append("    const TensorRef& grad = grads[0];")
    lines.append("    (void)grad;")
    lines.append("    GradList out_(next_edges.size());")
    inline_unpack = {}  # saved tensors are unpacked where a formula uses them (a branch may not)
    for a, kind, _ in e.saved:
        if kind == "tensor":
            inline_unpack[a.name] = f'{a.name}_.unpack(this, "{a.name}")'
        elif kind == "list":
            lines.append(f'    std::vector<TensorRef> {a.name} = unpack_list({a.name}_, this, "{a.name}");')
    for j in e.results:
        lines.append(f'    TensorRef result{j} = result{j}_.unpack(this, "result{j}");')
        if j == 0:
            lines.append("    const TensorRef& result = result0; (void)result;")
    by_name = {a.name: a for a in e.diff_inputs}
    for names, f in e.formulas:
        for name, expr in inline_unpack.items():
            f = re.sub(r"(?<![\w.])" + re.escape(name) + r"(?!\w)", "(" + expr + ")", f)
        if len(names) == 1:
            a = by_name[names[0]]
            if a.is_list:
                lines.append(f"    if (std::any_of(next_edges.begin() + {a.name}_edge, next_edges.begin() + {a.name}_edge + {a.name}_count, [](const Edge& e) {{ return e.valid(); }})) {{")
                lines.append(f"      std::vector<TensorRef> g_ = {f};")
                lines.append(f"      for (size_t k = 0; k < {a.name}_count && k < g_.size(); ++k) out_[{a.name}_edge + k] = std::move(g_[k]);")
                lines.append("    }")
            else:
                lines.append(f"    if (should_compute({a.name}_edge)) out_[{a.name}_edge] = {f};")
        else:
            conds = " || ".join(f"should_compute({n}_edge)" for n in names)
            lines.append(f"    if ({conds}) {{")
            lines.append(f"      auto g_ = {f};")
            for k, n in enumerate(names):
                lines.append(f"      if (should_compute({n}_edge)) out_[{n}_edge] = std::get<{k}>(g_);")
            lines.append("    }")
    lines.append("    return out_;")
    lines.append("  }")
    lines.append("};")
    return "\n".join(lines)


def kernel(e, variant_schema, kind, kid):
    """kind: functional | inplace | out"""
    s = variant_schema
    fname = f"k{kid}_{re.sub(r'[^0-9a-zA-Z]', '_', s.full_name)}"
    lines = [f"ts_status {fname}(void*, ts_call call, ts_keyset, ts_stack* stack) noexcept {{",
             "  return run_guarded(call, [&] {",
             f'    static const ts_operator op = sdk::detail::resolve("{s.full_name}");',
             "    ts_value* v = stack->values;"]
    tensor_args = [(i, a) for i, a in enumerate(s.args) if a.base == "Tensor" and a.name != "out"]
    for i, a in tensor_args:
        if a.is_list:
            lines.append(f"    std::vector<ts_tensor> t_{a.name} = tensor_list_arg(v[{i}]);")
        else:
            lines.append(f"    ts_tensor t_{a.name} = tensor_arg(v[{i}]);")
    diff_names = [a.name for a in e.diff_inputs] if not e.nondiff else []
    singles = [f"t_{n}" for n in diff_names if not next(a for a in s.args if a.name == n).is_list]
    lists = [f"t_{n}" for n in diff_names if next(a for a in s.args if a.name == n).is_list]
    need = []
    if singles:
        need.append("any_requires_grad({" + ", ".join(singles) + "})")
    need += [f"any_requires_grad({l})" for l in lists]
    need_expr = " || ".join(need) if need else "false"
    lines.append(f"    bool need = {need_expr};")
    if kind == "out":
        lines.append(f'    if (need) raise_out_requires_grad("{s.full_name}");')
        lines.append("    redispatch_below(op, stack);")
        lines.append("  });\n}")
        return fname, "\n".join(lines)
    if kind == "inplace":
        lines.append(f'    if (need || requires_grad(t_self)) check_inplace(t_self, "{s.full_name}");')
    lines.append("    if (!need) { redispatch_below(op, stack); return; }")
    lines.append(f"    auto node = std::make_shared<{e.node}>();")
    # Edges.
    lines.append("    std::vector<Edge> edges;")
    for a in e.diff_inputs:
        if a.is_list:
            lines.append(f"    node->{a.name}_edge = edges.size(); node->{a.name}_count = t_{a.name}.size();")
            lines.append(f"    for (ts_tensor t : t_{a.name}) edges.push_back(gradient_edge(t));")
        else:
            lines.append(f"    node->{a.name}_edge = edges.size(); edges.push_back(gradient_edge(t_{a.name}));")
    lines.append("    node->next_edges = std::move(edges);")
    # Saved inputs (before the operator runs: in-place changes self).
    for a, k, i in e.saved:
        if k == "tensor":
            if kind == "inplace" and a.name == "self":
                lines.append("    { sdk::ExcludeKeysGuard below(all_autograd_keys());")
                lines.append("      node->self_ = SavedTensor(sdk::ops::clone(TensorRef::borrow(t_self)), false); }")
            else:
                lines.append(f"    node->{a.name}_ = SavedTensor(t_{a.name} ? TensorRef::borrow(t_{a.name}) : TensorRef(), false);")
        elif k == "list":
            lines.append(f"    for (ts_tensor t : t_{a.name}) node->{a.name}_.emplace_back(t ? TensorRef::borrow(t) : TensorRef(), false);")
        elif k == "sizes":
            lines.append(f"    node->{a.name}_sizes = sizes_of(t_{a.name});")
        elif k == "list_sizes":
            lines.append(f"    for (ts_tensor t : t_{a.name}) node->{a.name}_sizes.push_back(sizes_of(t));")
        elif k == "dtype":
            lines.append(f"    node->{a.name}_dtype = dtype_of(t_{a.name});")
        else:
            lines.append(f"    node->{a.name} = {saved_scalar(a)[1]}(v[{i}]);")
    lines.append("    redispatch_below(op, stack);")
    n_out = len([r for r in s.returns if r != "()"])
    is_view = any("(a)" in r for r in s.returns) and not any("!" in r for r in s.returns)
    inputs = "{" + ", ".join(singles) + "}"
    if kind == "inplace":
        self_edge = "int64_t(node->self_edge)" if any(a.name == "self" and not a.is_list for a in e.diff_inputs) else "-1"
        lines.append(f"    set_inplace_history(TensorRef::borrow(t_self), node, {self_edge});")
    else:
        for j in range(n_out):
            if j < len(e.out_diff) and e.out_diff[j]:
                lines.append(f"    record_output(tensor_arg(v[{j}]), node, {j}, {inputs}, {str(is_view).lower()});")
    for j in e.results:
        src = "t_self" if kind == "inplace" else f"tensor_arg(v[{j}])"
        lines.append(f"    node->result{j}_ = SavedTensor(TensorRef::borrow({src}), true);")
    lines.append("  });\n}")
    return fname, "\n".join(lines)


def nondiff_kernel(s, kid):
    fname = f"k{kid}_{re.sub(r'[^0-9a-zA-Z]', '_', s.full_name)}"
    return fname, "\n".join([
        f"ts_status {fname}(void*, ts_call call, ts_keyset, ts_stack* stack) noexcept {{",
        "  return run_guarded(call, [&] {",
        f'    static const ts_operator op = sdk::detail::resolve("{s.full_name}");',
        "    redispatch_below(op, stack);",
        "  });\n}"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", required=True)
    ap.add_argument("--derivatives", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.ops) as f:
        op_entries = yaml.safe_load(f)
    with open(args.derivatives) as f:
        specs = {d["name"]: d for d in yaml.safe_load(f)}
    # Base schema -> its variants (inplace, out), from ops.yaml.
    families = {}
    for entry in op_entries:
        texts = [t for t, _ in derive_variants(entry)]
        base = Schema(texts[0])
        families[base.full_name] = [Schema(t) for t in texts]
    missing = [n for n in specs if n not in families]
    if missing:
        sys.exit(f"gen_autograd.py: derivatives.yaml names operators not in ops.yaml: {missing}")

    structs, kernels, regs = [], [], []
    kid = 0
    for name, spec in specs.items():
        variants = families[name]
        base = variants[0]
        e = Entry(base, spec)
        if not e.nondiff:
            structs.append(node_struct(e))
        for vs in variants:
            kid += 1
            if vs.overload == "out" or vs.overload.endswith("_out"):
                kind = "out"
            elif vs is base and not any("!" in a.type_text for a in vs.args if a.name == "self"):
                kind = "functional"  # other written arguments (batch norm's running statistics) are buffers
            else:
                kind = "inplace"
            if e.nondiff:
                fname, text = nondiff_kernel(vs, kid)
            else:
                fname, text = kernel(e, vs, kind, kid)
            kernels.append(text)
            regs.append(f'  for (ts_dispatch_key k : keys) reg.boxed_kernel("{vs.full_name}", k, {fname}, nullptr);')

    out = ["// Generated by autograd/codegen/gen_autograd.py from autograd/derivatives.yaml. Do not edit.",
           '#include "formulas.h"', '#include "kernel_support.h"', '#include "view_inplace.h"', "", "#include <algorithm>", "",
           "namespace tessera::autograd {", "namespace {", "using namespace formulas;", ""]
    out += structs + [""] + kernels
    out += ["", "}  // namespace", "",
            "void register_generated_kernels(sdk::Registrar& reg, const std::vector<ts_dispatch_key>& keys) {"]
    out += regs + ["}", "", "}  // namespace tessera::autograd", ""]
    os.makedirs(args.out, exist_ok=True)
    write_if_changed(os.path.join(args.out, "autograd_kernels.cpp"), "\n".join(out))


if __name__ == "__main__":
    main()
