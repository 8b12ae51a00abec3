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
        # Forward mode: auto_linear, auto_element_wise or a formula for output 0 (`result`), or a
        # formula returning every output's tangent (`results`: a std::vector<TensorRef>).
        self.jvp = spec.get("result", spec.get("results"))
        self.jvp_all_outputs = "results" in spec
        for k, v in spec.items():
            if k in ("name", "output_differentiability", "nondifferentiable", "result", "results"):
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
    # A slice's backward (zeros of the input's shape, the gradient written into its region) can
    # add the gradient into a buffer the engine owns instead (Node::add_into_region).
    region = [f for names, f in e.formulas if names == ["self"] and f.startswith("slice_grad(grad, self_sizes, ")]
    if region and len(e.diff_inputs) == 1:
        rest = region[0][len("slice_grad(grad, self_sizes, "):]
        lines.append("  bool region_gradient() const override { return true; }")
        lines.append("  void add_into_region(const TensorRef& grad, TensorRef& into) override { "
                     f"add_slice_grad_into(into, grad, {rest}; }}")
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
    fw_singles = singles
    fw_need = []
    if fw_singles:
        fw_need.append("any_has_tangent({" + ", ".join(fw_singles) + "})")
    fw_need += [f"any_has_tangent({l})" for l in lists]
    fw_expr = f"forward_ad_active() && ({' || '.join(fw_need)})" if fw_need else "false"
    lines.append(f"    const bool need_fw = {fw_expr};")
    if kind == "out":
        lines.append(f'    if (need) raise_out_requires_grad("{s.full_name}");')
        lines.append(f'    if (need_fw) raise_no_jvp("{s.full_name} (out=)");')
        lines.append("    redispatch_below(op, stack);")
        lines.append("  });\n}")
        return fname, "\n".join(lines)
    if e.jvp is None:
        lines.append(f'    if (need_fw) raise_no_jvp("{s.full_name}");')
    if kind == "inplace":
        lines.append(f'    if (need || requires_grad(t_self)) check_inplace(t_self, "{s.full_name}");')
    # A view made while a dual level is open remembers its base, so its tangent is read through
    # the base's (forward_ad.h); reverse mode records its views itself.
    n_out = len([r for r in s.returns if r != "()"])
    is_view = any("(a)" in r for r in s.returns) and not any("!" in r for r in s.returns)
    fw_view = is_view and kind != "inplace" and e.jvp is not None and n_out == 1 and "[]" not in s.returns[0] \
        and singles[:1] == ["t_self"]
    record_fw_view = "record_forward_view(tensor_arg(v[0]), t_self); " if fw_view else ""
    lines.append(f"    if (!need && !need_fw) {{ redispatch_below(op, stack); {record_fw_view}return; }}")
    # Forward mode: the arguments as the caller gave them (the stack is overwritten by the returns),
    # and the old value of self for in-place formulas that read it.
    lines.append("    std::vector<ts_value> fw_args;")
    lines.append("    if (need_fw) fw_args.assign(v, v + stack->size);")
    # (Also when it reads another argument that may be self itself: x.mul_(x).)
    jvp_texts = e.texts if e.jvp == "auto_element_wise" else [str(e.jvp)]
    jvp_uses_self = e.jvp not in (None, "auto_linear") and any(
        uses(jvp_texts, a.name) for a in e.schema.args if a.base == "Tensor" and not a.is_list)
    if kind == "inplace" and jvp_uses_self:
        lines.append("    TensorRef fw_self_before;")
        lines.append("    if (need_fw) { sdk::ExcludeKeysGuard below(all_autograd_keys());")
        lines.append("      fw_self_before = sdk::ops::clone(TensorRef::borrow(t_self)); }")
    lines.append(f"    std::shared_ptr<{e.node}> node;")
    lines.append("    if (need) {")
    lines.append(f"    node = std::make_shared<{e.node}>();")
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
    lines.append("    }")
    lines.append("    redispatch_below(op, stack);")
    # Tangents first: the node saves its outputs with their tangents (forward over reverse).
    if e.jvp is not None:
        lines.append("    if (need_fw) {")
        lines += ["      " + l for l in jvp_block(e, s, kind)]
        lines.append("    }")
    inputs = "{" + ", ".join(singles) + "}"
    if fw_view:
        lines.append("    if (!node) record_forward_view(tensor_arg(v[0]), t_self);")
    lines.append("    if (node) {")
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
    lines.append("    }")
    lines.append("  });\n}")
    return fname, "\n".join(lines)


def strip_sum_to(f):
    """sum_to(X, name_sizes) -> X: a jvp keeps each input's broadcast share at the result's shape."""
    m = re.fullmatch(r"\s*sum_to\((.*),\s*\w+_sizes\)\s*", f, re.S)
    return m.group(1) if m else f


def jvp_block(e, s, kind):
    """C++ statements computing the tangent of output 0 from the inputs' tangents, then setting it."""
    base = e.schema
    out = []
    result_src = "t_self" if kind == "inplace" else "tensor_arg(v[0])"
    setter = "set_inplace_tangent" if kind == "inplace" else "set_tangent"
    out.append(f"ts_tensor fw_result = {result_src};")
    if e.jvp == "auto_linear":
        # The operator is linear in its differentiable inputs: the same operator on their tangents
        # (zeros where an input has none), the other arguments as they were.
        out.append(f'static const ts_operator fw_op = sdk::detail::resolve("{base.full_name}");')
        out.append("std::vector<TensorRef> fw_keep;")
        out.append("std::vector<std::vector<ts_tensor>> fw_lists;")
        out.append("fw_lists.reserve(4);")
        out.append(f"std::vector<ts_value> fw_v(fw_args.begin(), fw_args.begin() + {len(base.args)});")
        diff = {a.name for a in e.diff_inputs}
        for i, a in enumerate(base.args):
            if a.name not in diff:
                continue
            if a.is_list:
                out.append(f"{{ auto ts_ = tangents_or_zeros(t_{a.name}); fw_lists.emplace_back();")
                out.append(f"  for (auto& t : ts_) {{ fw_lists.back().push_back(t.handle()); fw_keep.push_back(t); }}")
                out.append(f"  fw_v[{i}].u.tensors.data = fw_lists.back().data(); }}")
            else:
                out.append(f"if (t_{a.name}) {{ fw_keep.push_back(tangent_or_zeros(t_{a.name})); fw_v[{i}].u.tensor = fw_keep.back().handle(); }}")
        out.append("fw_v.resize(std::max<size_t>(fw_v.size(), 8), sdk::none());")
        out.append(f"ts_stack fw_s{{sizeof(ts_stack), fw_v.data(), {len(base.args)}, int32_t(fw_v.size())}};")
        out.append("TensorRef fw_t;")
        out.append("{ HideTangents fw_hide;")
        out.append("  sdk::check_host(sdk::host().call_operator(sdk::current_call(), fw_op, &fw_s));")
        out.append("  fw_t = TensorRef::adopt(fw_v[0].u.tensor);")
        out.append("  for (int32_t k = 1; k < fw_s.size; ++k) if (fw_v[k].tag == TS_VALUE_TENSOR && fw_v[k].u.tensor) sdk::host().tensor_release(fw_v[k].u.tensor);")
        out.append("  fw_t = match_result(fw_t, fw_result); }")
        out.append(f'{setter}(fw_result, fw_t, "{s.full_name}");')
        return out
    # Formulas: locals for what they name.
    if e.jvp == "auto_element_wise":
        texts = []
        for names, f in e.formulas:
            if len(names) != 1:
                sys.exit(f"gen_autograd.py: {base.full_name}: auto_element_wise needs one formula per input")
            # The backward multiplies by conj(f'), the tangent by f' (the same for real inputs).
            text = re.sub(r"(?<![\w.])conj\(", "(", strip_sum_to(f))
            texts.append((names[0], re.sub(r"(?<![\w.])grad(?![\w\[])", f"{names[0]}_t", text)))
        all_text = [t for _, t in texts] + [f"{name}_t" for name, _ in texts]  # each term tests its tangent
    else:
        all_text = [str(e.jvp)]
    for i, a in enumerate(base.args):
        if a.base == "Tensor":
            if uses(all_text, a.name):
                if kind == "inplace" and a.name == "self":
                    out.append("const TensorRef& self = fw_self_before;")
                elif a.is_list:
                    out.append(f"std::vector<TensorRef> {a.name}; for (ts_tensor t : t_{a.name}) {a.name}.push_back(TensorRef::borrow(t));")
                elif kind == "inplace":
                    out.append(f"TensorRef {a.name} = t_{a.name} == t_self ? fw_self_before : t_{a.name} ? TensorRef::borrow(t_{a.name}) : TensorRef();")
                else:
                    out.append(f"TensorRef {a.name} = t_{a.name} ? TensorRef::borrow(t_{a.name}) : TensorRef();")
            if uses(all_text, a.name + "_t"):
                if e.jvp == "auto_element_wise":
                    out.append(f"TensorRef {a.name}_t = tangent_of(t_{a.name});")
                elif a.is_list:
                    out.append(f"std::vector<TensorRef> {a.name}_t = tangents_or_zeros(t_{a.name});")
                else:
                    out.append(f"TensorRef {a.name}_t = tangent_or_zeros(t_{a.name});")
            if uses(all_text, a.name + "_sizes"):
                out.append(f"IntList {a.name}_sizes = sizes_of(t_{a.name});")
            if uses(all_text, a.name + "_dtype"):
                out.append(f"int32_t {a.name}_dtype = dtype_of(t_{a.name});")
        elif uses(all_text, a.name):
            st = saved_scalar(a)
            if st is None:
                sys.exit(f"gen_autograd.py: {base.full_name}: jvp cannot read argument {a.name} ({a.type_text})")
            out.append(f"{st[0]} {a.name} = {st[1]}(fw_args[{i}]);")
    out.append("TensorRef result = TensorRef::borrow(fw_result); (void)result;")
    for k in (0, 1, 2, 3):
        if uses(all_text, f"result{k}"):
            out.append(f"TensorRef result{k} = TensorRef::borrow(tensor_arg(v[{k}]));")
    # The tangents were read above; the formula sees primal values only.
    if e.jvp_all_outputs:
        out.append("std::vector<TensorRef> fw_ts;")
        out.append("{ HideTangents fw_hide;")
        out.append(f"  fw_ts = {e.jvp};")
        out.append("  for (size_t k = 0; k < fw_ts.size(); ++k) fw_ts[k] = match_result(fw_ts[k], tensor_arg(v[k])); }")
        out.append(f'for (size_t k = 0; k < fw_ts.size(); ++k) set_tangent(tensor_arg(v[k]), fw_ts[k], "{s.full_name}");')
        return out
    out.append("TensorRef fw_t;")
    out.append("{ HideTangents fw_hide;")
    if e.jvp == "auto_element_wise":
        for name, text in texts:
            out.append(f"  if ({name}_t.defined()) fw_t = add_tangents(fw_t, {text});")
    else:
        out.append(f"  fw_t = {e.jvp};")
    out.append("  fw_t = match_result(fw_t, fw_result); }")
    out.append(f'{setter}(fw_result, fw_t, "{s.full_name}");')
    return out


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
           '#include "formulas.h"', '#include "forward_ad.h"', '#include "kernel_support.h"', '#include "view_inplace.h"',
           "", "#include <algorithm>", "",
           "namespace tessera::autograd {", "namespace {", "using namespace formulas;", ""]
    out += structs + [""] + kernels
    out += ["", "}  // namespace", "",
            "void register_generated_kernels(sdk::Registrar& reg, const std::vector<ts_dispatch_key>& keys) {"]
    out += regs + ["}", "", "}  // namespace tessera::autograd", ""]
    os.makedirs(args.out, exist_ok=True)
    write_if_changed(os.path.join(args.out, "autograd_kernels.cpp"), "\n".join(out))


if __name__ == "__main__":
    main()
