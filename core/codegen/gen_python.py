#!/usr/bin/env python3
"""Generates tessera/_generated_ops.py, the Python op table, from core/ops.yaml.

The generated module is data plus one-line wrappers: every wrapper calls
`_C.call_op(<base name>, args, kwargs)`, which parses the arguments against the operator's
schemas at run time. What it holds:
  OPERATORS  every operator base name the yaml declares (in-place `name_` ones included)
  SCHEMAS    base name -> the schema strings of its overloads (variants expanded)
  FUNCTIONS  names that become `tessera.<name>` (PyTorch's spelling, aliases included)
  METHODS    names that become `tessera.Tensor.<name>`
and one wrapper per name in FUNCTIONS | METHODS. The package (frontend_python/tessera) adds
the hand-written parts on top: factories, varargs shapes, `to`, indexing, Python operators.

Which op is a function, a method or both follows PyTorch; an op the tables below do not know
is both (or a method only when it is in-place), so a new yaml entry shows up without edits here.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_ops import Schema, derive_variants  # noqa: E402  (the same schema reader as the C++ generator)

import yaml  # noqa: E402

# Written by hand in the package (varargs sizes, default dtype, PyTorch-only signatures).
HANDWRITTEN = {
    "empty", "zeros", "ones", "full", "arange", "linspace", "eye", "rand", "randn", "randint",
    "to", "where", "nonzero", "var", "std", "einsum", "meshgrid", "unique_consecutive", "block_diag", "broadcast_tensors", "tensor_split",
}
# Reachable through tessera.ops.aten.<name> only (no PyTorch function or method of that name);
# so are linalg_* and special_*: tessera.linalg.<name> and tessera.special.<name> (linalg.py, special.py).
HIDDEN = {"slice", "index", "_unique2"}
# Tensor methods that are not tessera.<name> functions.
METHOD_ONLY = {"contiguous", "view", "expand", "copy_", "fill_", "index_put_"}
# tessera.<name> functions that are not Tensor methods.
FUNCTION_ONLY = {"cat", "stack"}
# PyTorch aliases: python name -> operator base name (emitted when the operator exists).
ALIASES = {
    "absolute": "abs", "absolute_": "abs_", "negative": "neg", "negative_": "neg_",
    "subtract": "sub", "subtract_": "sub_", "multiply": "mul", "multiply_": "mul_",
    "divide": "div", "divide_": "div_", "true_divide": "div", "true_divide_": "div_",
    "clip": "clamp", "clip_": "clamp_", "greater": "gt", "greater_equal": "ge", "less": "lt",
    "less_equal": "le", "not_equal": "ne", "concat": "cat", "concatenate": "cat",
    "swapaxes": "transpose", "swapdims": "transpose", "ger": "outer",
    "arccos": "acos", "arcsin": "asin", "arctan": "atan", "arctan2": "atan2", "arccosh": "acosh",
    "arcsinh": "asinh", "arctanh": "atanh", "arccos_": "acos_", "arcsin_": "asin_", "arctan_": "atan_",
    "fix": "trunc", "fix_": "trunc_", "moveaxis": "movedim",
}
ALIAS_METHOD_ONLY = set()
ALIAS_FUNCTION_ONLY = {"concat", "concatenate"}


def load_schemas(path):
    with open(path) as f:
        entries = yaml.safe_load(f) or []
    by_name = {}
    for entry in entries:
        for text, _ in derive_variants(entry):
            s = Schema(text)
            by_name.setdefault(s.name, []).append(text)
    return by_name


# Random operators: their Python wrappers take PyTorch's `generator=` keyword (the call then runs
# with that generator current: tessera/_generator.py).
RANDOM = {"bernoulli", "bernoulli_", "multinomial", "normal", "randperm", "uniform_", "normal_", "exponential_",
          "geometric_", "log_normal_", "cauchy_", "random_"}


def return_names(schema_text):
    """The names of a schema's returns when every return is named ("(Tensor values, Tensor indices)"), else None."""
    ret = schema_text.rsplit("->", 1)[1].strip()
    if not (ret.startswith("(") and ret.endswith(")")):
        return None
    names = [part.strip().split(" ")[-1] if " " in part.strip() else None for part in ret[1:-1].split(",")]
    return tuple(names) if all(names) else None


def named_returns(schemas):
    """The return names shared by every tuple-returning overload of an operator, else None."""
    found = {return_names(t) for t in schemas if t.rsplit("->", 1)[1].strip().startswith("(")}
    return found.pop() if len(found) == 1 and None not in found else None


def classify(name):
    """(is_function, is_method) for an operator base name."""
    if name in HANDWRITTEN or name in HIDDEN or name.startswith(("linalg_", "special_")):
        return False, False
    if name in METHOD_ONLY:
        return False, True
    if name in FUNCTION_ONLY:
        return True, False
    if name.endswith("_"):
        return False, True
    return True, True


def py_ident(name):
    return name.replace("::", "__")


def generate(by_name):
    names = sorted(by_name)
    functions, methods, wrappers = [], [], {}
    for n in names:
        is_fn, is_method = classify(n)
        if "::" in n:  # namespaced ops live under tessera.ops.<ns> only
            continue
        if is_fn:
            functions.append(n)
        if is_method:
            methods.append(n)
        if is_fn or is_method:
            wrappers[n] = n
    for alias, target in sorted(ALIASES.items()):
        if target not in by_name:
            continue
        wrappers[alias] = target
        if alias not in ALIAS_METHOD_ONLY and not alias.endswith("_"):
            functions.append(alias)
        if alias not in ALIAS_FUNCTION_ONLY and classify(target)[1]:
            methods.append(alias)

    out = [
        "# Generated by core/codegen/gen_python.py from core/ops.yaml. Do not edit.",
        '"""The operator table of the tessera package: names, schemas and thin wrappers over',
        "_C.call_op (argument parsing and overload resolution happen in C++).\"\"\"",
        "from collections import namedtuple",
        "",
        "from tessera import _C",
        "",
        "_call = _C.call_op",
        "",
        "",
        "def _named(result, cls):",
        "    return cls(*result) if type(result) is tuple and len(result) == len(cls._fields) else result",
        "",
        "",
        "# Results of operators whose returns are named, as torch.return_types: x.sort().indices",
        "RETURN_TYPES = {}",
    ]
    for n in names:
        fields = named_returns(by_name[n])
        if fields:
            out.append(f"RETURN_TYPES[{n!r}] = namedtuple({n!r}, {list(fields)!r})")
    out += ["", "OPERATORS = ("]
    out += [f"    {n!r}," for n in names]
    out += [")", "", "SCHEMAS = {"]
    for n in names:
        out.append(f"    {n!r}: (")
        out += [f"        {t!r}," for t in by_name[n]]
        out.append("    ),")
    out += ["}", "", "FUNCTIONS = ("]
    out += [f"    {n!r}," for n in sorted(set(functions))]
    out += [")", "", "METHODS = ("]
    out += [f"    {n!r}," for n in sorted(set(methods))]
    out += [")", "", "ALIASES = {"]
    out += [f"    {a!r}: {t!r}," for a, t in sorted(wrappers.items()) if a != t]
    out += ["}", ""]
    for py_name in sorted(wrappers):
        op = wrappers[py_name]
        doc = "\\n".join(by_name[op]).replace('"', '\\"')
        call = f"_call({op!r}, args, kwargs)"
        if named_returns(by_name[op]):
            call = f"_named({call}, RETURN_TYPES[{op!r}])"
        if op in RANDOM:
            out += ["", f"def {py_ident(py_name)}(*args, generator=None, **kwargs):",
                    f'    "{doc}"',
                    "    if generator is None:",
                    f"        return {call}",
                    "    with generator:",
                    f"        return {call}", ""]
            continue
        out += ["", f"def {py_ident(py_name)}(*args, **kwargs):",
                f'    "{doc}"',
                f"    return {call}", ""]
    out.append(f"__all__ = {sorted(set(functions))!r}")
    out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--yaml", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    text = generate(load_schemas(args.yaml))
    compile(text, args.out, "exec")  # fail the build here, not at import time
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    if os.path.exists(args.out):
        with open(args.out) as f:
            if f.read() == text:
                return
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
