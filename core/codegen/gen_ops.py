#!/usr/bin/env python3
"""Generates the typed C++ entry points from core/ops.yaml.

Outputs (build artefacts, never committed):
  <out>/include/tessera/ops.h      declarations, namespace tessera
  <out>/src/ops.cpp                definitions: box the arguments, dispatch, unbox the returns
  <out>/src/builtin_schemas.cpp    the expanded schema list the host `def`s at start-up

The parser here is a small one for the generator only; the host parses the same schemas with
its full parser (core/src/schema.cpp) at start-up, so a schema this script misreads fails loudly.
"""
import argparse
import os
import re
import sys

import yaml


class Arg:
    def __init__(self, type_text, name, default, kwarg_only):
        self.type_text = type_text  # e.g. "Tensor(a!)", "int[1]?", "Tensor[]"
        self.name = name
        self.default = default
        self.kwarg_only = kwarg_only
        plain = re.sub(r"\([^)]*\)", "", type_text)  # drop alias annotations
        self.optional = plain.endswith("?")
        plain = plain.rstrip("?")
        self.is_list = plain.endswith("]")
        self.base = re.sub(r"\[\d*\]$", "", plain)
        # "Tensor?[]": a list whose elements may be None (an undefined Tensor in C++).
        self.element_optional = self.is_list and self.base.endswith("?")
        self.base = self.base.rstrip("?")
        self.writes = "!" in type_text


def split_top_level(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


class Schema:
    def __init__(self, text):
        self.text = text
        m = re.fullmatch(r"\s*([\w:]+)(?:\.(\w+))?\((.*)\)\s*->\s*(.+?)\s*", text)
        if not m:
            sys.exit(f"gen_ops.py: cannot parse schema: {text}")
        self.name, self.overload, args_text, ret_text = m.group(1), m.group(2) or "", m.group(3), m.group(4)
        self.args = []
        kwarg_only = False
        for part in split_top_level(args_text):
            if part == "*":
                kwarg_only = True
                continue
            decl, _, default = part.partition("=")
            type_text, name = decl.strip().rsplit(" ", 1)
            self.args.append(Arg(type_text.strip(), name.strip(), default.strip() or None, kwarg_only))
        ret_text = ret_text.strip()
        if ret_text.startswith("(") and ret_text.endswith(")"):
            inner = split_top_level(ret_text[1:-1])
        else:
            inner = [ret_text]
        self.returns = [r.split(" ")[0] for r in inner if r]

    @property
    def full_name(self):
        return f"{self.name}.{self.overload}" if self.overload else self.name


def derive_variants(entry):
    base = entry["schema"]
    out = [(base, entry.get("cpp_name"))]
    variants = entry.get("variants", [])
    s = Schema(base)
    head = base[: base.index("(")]
    args_text = base[base.index("(") + 1 : base.rindex(")")]
    if "inplace" in variants:
        name = s.name + "_" + (f".{s.overload}" if s.overload else "")
        first, _, rest = args_text.partition(",")
        first = first.replace("Tensor self", "Tensor(a!) self", 1)
        new_args = first + ("," + rest if rest else "")
        out.append((f"{name}({new_args}) -> Tensor(a!)", None))
    if "out" in variants:
        overload = entry.get("out_overload") or ("out" if s.overload in ("", "Tensor") else f"{s.overload}_out")
        sep = ", " if "*" in split_top_level(args_text) else ", *, "
        out.append((f"{s.name}.{overload}({args_text}{sep}Tensor(a!) out) -> Tensor(a!)", None))
    del head
    return out


# ops.yaml's `composite:` field -> OperatorKind (dispatcher.h); absent means primitive.
KINDS = {"primitive": 0, "implicit": 1, "explicit": 2}

CPP_TYPES = {
    "Tensor": "const Tensor&",
    "int": "int64_t",
    "SymInt": "int64_t",
    "float": "double",
    "bool": "bool",
    "Scalar": "const Scalar&",
    "ScalarType": "ScalarType",
    "str": "std::string_view",
    "Device": "Device",
}


def cpp_type(arg):
    if arg.is_list:
        if arg.base == "Tensor":
            return "const std::vector<Tensor>&"  # Tensor?[]: undefined entries are None
        if arg.base in ("int", "SymInt"):
            return "std::optional<std::vector<int64_t>>" if arg.optional else "const std::vector<int64_t>&"
        if arg.base == "float":
            return "const std::vector<double>&"
        sys.exit(f"gen_ops.py: unsupported list type {arg.type_text}")
    if arg.base not in CPP_TYPES:
        sys.exit(f"gen_ops.py: unsupported type {arg.type_text}")
    if arg.optional:
        if arg.base == "Tensor":
            return "const Tensor&"  # an undefined Tensor is None
        if arg.base == "str":
            return "std::optional<std::string>"
        inner = CPP_TYPES[arg.base].replace("const ", "").replace("&", "")
        return f"std::optional<{inner}>"
    return CPP_TYPES[arg.base]


def cpp_default(arg):
    d = arg.default
    if d is None:
        return None
    if d == "None":
        return "Tensor()" if arg.base == "Tensor" else "std::nullopt"
    if d in ("True", "False"):
        return d.lower()
    if d.startswith("["):
        return "{" + d[1:-1] + "}"
    if arg.is_list:  # int[2] padding=0 stands for [0, 0], as in PyTorch
        m = re.search(r"\[(\d+)\]", arg.type_text)
        return "{" + ", ".join([d] * (int(m.group(1)) if m else 1)) + "}"
    if d.startswith('"') or d.startswith("'"):
        return '"' + d[1:-1] + '"'
    return d


def cpp_return(schema):
    types = []
    for r in schema.returns:
        base = re.sub(r"\([^)]*\)", "", r)
        if base == "()":
            continue
        types.append({"Tensor": "Tensor", "int": "int64_t", "SymInt": "int64_t", "float": "double", "bool": "bool",
                      "Scalar": "Scalar", "Tensor[]": "std::vector<Tensor>"}[base])
    if not types:
        return "void"
    return types[0] if len(types) == 1 else "std::tuple<" + ", ".join(types) + ">"


def cpp_name(schema, override):
    if override:
        return override
    if schema.overload == "out" or schema.overload.endswith("_out"):
        return schema.name + "_out"
    return schema.name


def cpp_params(schema):
    """Arguments in C++ order: an out= tensor comes first (as in PyTorch's add_out(out, ...)),
    so the defaults of the other arguments can stay."""
    args = list(schema.args)
    if args and args[-1].name == "out" and args[-1].writes:
        args = [args[-1]] + args[:-1]
    return args


def signature(schema, fname, with_defaults):
    params = []
    defaults_allowed = True
    for a in reversed(cpp_params(schema)):  # C++ allows defaults only on trailing parameters
        p = f"{cpp_type(a)} {a.name}"
        d = cpp_default(a)
        if d is None:
            defaults_allowed = False
        elif with_defaults and defaults_allowed:
            p += f" = {d}"
        params.insert(0, p)
    return f"{cpp_return(schema)} {fname}({', '.join(params)})"


def unbox(ret_type, index):
    if ret_type == "Tensor":
        return f"detail::unbox_tensor(slots_[{index}])"
    return f"detail::unbox<{ret_type}>(slots_[{index}])"


def definition(schema, fname):
    n_args, n_ret = len(schema.args), len([r for r in schema.returns if r != "()"])
    cap = max(n_args, n_ret, 1)
    lines = [signature(schema, fname, False) + " {",
             f'  static const OperatorHandle op = detail::builtin_operator("{schema.full_name}");',
             # The stack's slots: named so that no schema argument (e.g. `values`) can shadow them.
             f"  ts_value slots_[{cap}];"]
    for i, a in enumerate(schema.args):
        lines.append(f"  detail::box(slots_[{i}], {a.name});")
    lines.append(f"  ts_stack stack{{sizeof(ts_stack), slots_, {n_args}, {cap}}};")
    lines.append(f"  detail::call(op, &stack, {n_ret});")
    rt = cpp_return(schema)
    if rt == "void":
        pass
    elif rt.startswith("std::tuple<"):
        inner = rt[len("std::tuple<"):-1].split(", ")
        lines.append("  return {" + ", ".join(unbox(t, i) for i, t in enumerate(inner)) + "};")
    else:
        lines.append(f"  return {unbox(rt, 0)};")
    lines.append("}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yaml", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.yaml) as f:
        entries = yaml.safe_load(f)
    schemas, kinds, functional_of = [], [], []
    for entry in entries:
        kind = KINDS.get(entry.get("composite", "primitive"))
        if kind is None:
            sys.exit(f"gen_ops.py: {entry['schema']}: composite must be implicit or explicit, "
                     f"got {entry.get('composite')!r}")
        functional = len(schemas)  # derive_variants lists the entry's own schema first
        for text, override in derive_variants(entry):
            functional_of.append(-1 if len(schemas) == functional else functional)
            schemas.append((Schema(text), override))
            kinds.append(kind)

    decls, defs = [], []
    for s, override in schemas:
        fname = cpp_name(s, override)
        decls.append(f"// {s.text}\n{signature(s, fname, True)};")
        defs.append(definition(s, fname))

    os.makedirs(os.path.join(args.out, "include", "tessera"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "src"), exist_ok=True)
    header = ["// Generated by core/codegen/gen_ops.py from core/ops.yaml. Do not edit.",
              "#pragma once", "#include <tessera/boxing.h>", "", "namespace tessera {", ""]
    header += decls + ["", "}  // namespace tessera", ""]
    source = ["// Generated by core/codegen/gen_ops.py from core/ops.yaml. Do not edit.",
              "#include <tessera/ops.h>", "", "namespace tessera {", ""]
    source += defs + ["", "}  // namespace tessera", ""]
    schemas_src = ["// Generated by core/codegen/gen_ops.py from core/ops.yaml. Do not edit.",
                   "#include <cstddef>", "", "namespace tessera::detail {",
                   "extern const char* const kBuiltinSchemas[] = {"]
    schemas_src += [f'    "{s.text}",' for s, _ in schemas]
    schemas_src += ["};", "// OperatorKind of each schema above: 0 primitive, 1 implicit composite, 2 explicit composite.",
                    "extern const unsigned char kBuiltinKinds[] = {"]
    schemas_src += ["    " + ", ".join(str(k) for k in kinds[i:i + 32]) + "," for i in range(0, len(kinds), 32)]
    schemas_src += ["};", "// For an in-place or out= variant, the index of the functional schema it derives from; else -1.",
                    "extern const int kBuiltinFunctionalOf[] = {"]
    schemas_src += ["    " + ", ".join(str(k) for k in functional_of[i:i + 32]) + ","
                    for i in range(0, len(functional_of), 32)]
    schemas_src += ["};", f"extern const size_t kNumBuiltinSchemas = {len(schemas)};",
                    "}  // namespace tessera::detail", ""]
    write_if_changed(os.path.join(args.out, "include", "tessera", "ops.h"), "\n".join(header))
    write_if_changed(os.path.join(args.out, "src", "ops.cpp"), "\n".join(source))
    write_if_changed(os.path.join(args.out, "src", "builtin_schemas.cpp"), "\n".join(schemas_src))


def write_if_changed(path, text):
    # Keeps timestamps stable so an unchanged yaml rebuilds nothing.
    if os.path.exists(path) and open(path).read() == text:
        return
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
