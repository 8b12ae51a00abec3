#!/usr/bin/env python3
"""Writes the vmap plugin's table of batching rules from core/ops.yaml.

Most primitives batch by their kind, which this script reads off the schema:
  pointwise  element-wise with broadcasting: batched operands get their batch dim in front and
             singleton dims up to the widest operand's rank; unbatched ones broadcast as they are
  leading    the operator treats leading dims as batch dims: batched operands move their batch
             dim in front (unbatched ones in `expand` are expanded to the batch), dim arguments
             shift by one, a size argument gets the batch size in front
  fold       pooling and convolution: the batch dim folds into N (the operator's own batch)
  loss       a loss with a `reduction`: computed unreduced, then reduced per sample
  special    a hand-written rule in hand_rules.cpp (matmul family, permute, expand, ...) or
             conv_rules.cpp (convolution's backwards; convolution itself with a batched weight) or
             nn_backward_rules.cpp (layer norm, MSE, NLL and embedding backwards) or norm_rules.cpp
             (batch and group norm)
  no tensors factories: nothing to batch (the random ones draw per sample or not, as asked)
An operator without an entry runs the for-loop fallback (correct, slower, warned once).
"""
import argparse
import os
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "core", "codegen"))
from gen_ops import Schema, derive_variants, write_if_changed  # noqa: E402

POINTWISE = """add sub mul div floor_divide pow maximum minimum eq ne lt le gt ge logical_and logical_or
logical_not where clamp masked_fill neg abs sign exp log log1p sqrt rsqrt sin cos tanh sigmoid relu erf
clone copy_ to fill_ contiguous gelu gelu_backward silu silu_backward threshold_backward sigmoid_backward
tanh_backward exp2 expm1 log2 log10 tan asin acos atan sinh cosh asinh acosh atanh
erfc erfinv lgamma digamma reciprocal floor ceil trunc round bitwise_not atan2 fmod remainder copysign
bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift""".split()

# Operators whose dims, sizes and operands are read by name (options: dims, size, pass, none, rank+1).
LEADING = {
    "sum": dict(dims=["dim"], none="all"),
    "mean": dict(dims=["dim"], none="all"),
    "prod": dict(dims=["dim"], none="all"),
    "var": dict(dims=["dim"], none="all"),
    "std": dict(dims=["dim"], none="all"),
    "amax": dict(dims=["dim"], none="all"),
    "amin": dict(dims=["dim"], none="all"),
    "argmax": dict(dims=["dim"], none="flatten"),
    "argmin": dict(dims=["dim"], none="flatten"),
    "logsumexp": dict(dims=["dim"]),
    "softmax": dict(dims=["dim"]),
    "log_softmax": dict(dims=["dim"]),
    "_softmax_backward_data": dict(dims=["dim"]),
    "_log_softmax_backward_data": dict(dims=["dim"]),
    "cumsum": dict(dims=["dim"]),
    "cumprod": dict(dims=["dim"]),
    "cummax": dict(dims=["dim"]),
    "cummin": dict(dims=["dim"]),
    "sort": dict(dims=["dim"]),
    "topk": dict(dims=["dim"]),
    "flip": dict(dims=["dims"]),
    "view": dict(size="size"),
    "reshape": dict(size="shape"),
    "transpose": dict(dims=["dim0", "dim1"]),
    "unsqueeze": dict(dims=["dim"], rank_plus_one=True),
    "slice": dict(dims=["dim"]),
    "select": dict(dims=["dim"]),
    "narrow": dict(dims=["dim"]),
    "flatten": dict(dims=["start_dim", "end_dim"]),
    "squeeze": dict(dims=["dim"]),
    "cat": dict(dims=["dim"]),
    "stack": dict(dims=["dim"], rank_plus_one=True),
    "gather": dict(dims=["dim"]),
    "scatter": dict(dims=["dim"]),
    "scatter_add": dict(dims=["dim"]),
    "index_select": dict(dims=["dim"], passed=["index"]),
    "index_add": dict(dims=["dim"], passed=["index"]),
    "diagonal": dict(dims=["dim1", "dim2"]),
    "_fft_c2c": dict(dims=["dim"]),
    "_fft_r2c": dict(dims=["dim"]),
    "_fft_c2r": dict(dims=["dim"]),
    "linalg_lu_factor_ex": {},
    "linalg_lu_solve": {},
    "linalg_cholesky_ex": {},
    "linalg_qr": {},
    "linalg_eigh": {},
    "linalg_eig": {},
    "linalg_svd": {},
    "native_layer_norm": dict(passed=["weight", "bias"]),
    "full_like": {},
    "embedding": dict(passed=["weight"]),
    "native_dropout": dict(random=True),
    "native_dropout_backward": {},
    "view_as_real": {},
    "view_as_complex": {},
    "slice_backward": dict(size="input_sizes", dims=["dim"]),
    "select_backward": dict(size="input_sizes", dims=["dim"]),
}

FOLD = {  # operator -> (spatial rank, operands that stay unbatched)
    "max_pool2d_with_indices": (2, []),
    "max_pool2d_with_indices_backward": (2, []),
    "avg_pool2d": (2, []),
    "avg_pool2d_backward": (2, []),
    "adaptive_avg_pool2d": (2, []),
    "adaptive_avg_pool2d_backward": (2, []),
    "convolution": (None, ["weight", "bias"]),  # spatial rank from the weight
}

LOSS = ["mse_loss", "l1_loss", "binary_cross_entropy_with_logits"]

SPECIAL = ["matmul", "mm", "bmm", "addmm", "permute", "expand", "squeeze", "index.Tensor", "nll_loss_forward",
           "as_strided", "convolution_backward", "convolution_backward_input", "native_layer_norm_backward",
           "mse_loss_backward", "nll_loss_backward", "embedding_dense_backward", "native_batch_norm",
           "native_batch_norm_backward", "native_group_norm", "native_group_norm_backward"]  # full names

RANDOM_FACTORIES = ["rand", "randn", "randint"]

# Composites batch through their decomposition, except these, whose decomposition would lose the
# batch (full_like decomposes into the factory `full`, which takes no tensor; view_as_real and
# view_as_complex alias their input's storage directly; _local_scalar_dense reads it).
COMPOSITES_WITH_RULES = ["full_like", "view_as_real", "view_as_complex", "_local_scalar_dense"]

# Data-dependent output shapes: vmap cannot batch them (PyTorch raises too).
DATA_DEPENDENT = ["nonzero", "masked_select", "_local_scalar_dense"]


def positions(schema, names):
    found = {a.name: i for i, a in enumerate(schema.args)}
    missing = [n for n in names if n not in found]
    if missing:
        sys.exit(f"gen_batching_rules.py: {schema.full_name} has no argument {missing}")
    return [found[n] for n in names]


def mask(indices):
    out = 0
    for i in indices:
        out |= 1 << i
    return out


def rule_for(schema):
    """(kind, expand_mask, pass_mask, dim_mask, rank_plus_one, size_arg, none_dims, spatial, random) or None."""
    base = schema.name.rstrip("_") if not schema.name.startswith("__") else schema.name
    inplace = schema.name.endswith("_") and schema.args and schema.args[0].writes
    if schema.overload.endswith("out") and any(a.name == "out" for a in schema.args):
        return ("Out", 0, 0, 0, False, -1, "Forbidden", 0, False)
    tensors = [i for i, a in enumerate(schema.args) if a.base == "Tensor"]
    if schema.full_name in SPECIAL or schema.name in SPECIAL:
        return ("Special", 0, 0, 0, False, -1, "Forbidden", 0, False)
    if base in DATA_DEPENDENT:
        return ("DataDependent", 0, 0, 0, False, -1, "Forbidden", 0, False)
    if base in RANDOM_FACTORIES and not tensors:
        return ("RandomFactory", 0, 0, 0, False, positions(schema, ["size"])[0], "Forbidden", 0, True)
    if not tensors:
        return ("NoTensors", 0, 0, 0, False, -1, "Forbidden", 0, False)
    if base in POINTWISE or schema.name in POINTWISE:
        return ("Pointwise", mask(tensors), 0, 0, False, -1, "Forbidden", 0, False)
    if base in LOSS:
        return ("Loss", mask(tensors), 0, 0, False, positions(schema, ["reduction"])[0], "Forbidden", 0, False)
    if base in FOLD:
        spatial, passed = FOLD[base]
        p = positions(schema, passed)
        return ("Fold", mask(t for t in tensors if t not in p), mask(p), 0, False, -1, "Forbidden", spatial or 0, False)
    if base in LEADING:
        o = LEADING[base]
        dims = [n for n in o.get("dims", []) if n in {a.name for a in schema.args}]
        p = positions(schema, o.get("passed", []))
        size = positions(schema, [o["size"]])[0] if "size" in o else -1
        return ("Leading", mask(t for t in tensors if t not in p), mask(p), mask(positions(schema, dims)),
                o.get("rank_plus_one", False), size, {"all": "All", "flatten": "Flatten"}.get(o.get("none"), "Forbidden"),
                0, o.get("random", False))
    del inplace
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yaml", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    entries = yaml.safe_load(open(args.yaml))
    rows, primitives = [], []
    for entry in entries:
        composite = bool(entry.get("composite"))
        if composite and Schema(entry["schema"]).name not in COMPOSITES_WITH_RULES:
            continue
        for text, _ in derive_variants(entry):
            s = Schema(text)
            if not composite:
                primitives.append(s.full_name)
            r = rule_for(s)
            if r is None:
                continue
            kind, expand, passed, dims, plus_one, size, none, spatial, random = r
            functional = Schema(entry["schema"]).full_name if kind == "Out" else ""
            inplace = "true" if (s.args and s.args[0].writes and s.name.endswith("_")) else "false"
            rows.append(f'    {{"{s.full_name}", RuleKind::{kind}, {expand:#x}u, {passed:#x}u, {dims:#x}u, '
                        f'{"true" if plus_one else "false"}, {size}, NoneDims::{none}, {spatial}, {inplace}, '
                        f'{"true" if random else "false"}, "{functional}"}},')
    missing_special = [n for n in SPECIAL if n not in primitives]
    if missing_special:
        sys.exit(f"gen_batching_rules.py: special rules for operators that do not exist: {missing_special}")
    text = "\n".join([
        "// Generated by autograd/vmap/gen_batching_rules.py from core/ops.yaml. Do not edit.",
        '#include "rule_spec.h"',
        "",
        "namespace tessera::vmap {",
        "const RuleSpec kGeneratedRules[] = {",
        *rows,
        "};",
        "const size_t kGeneratedRuleCount = sizeof(kGeneratedRules) / sizeof(kGeneratedRules[0]);",
        "const char* const kPrimitiveOperators[] = {",
        *[f'    "{p}",' for p in primitives],
        "};",
        "const size_t kPrimitiveOperatorCount = sizeof(kPrimitiveOperators) / sizeof(kPrimitiveOperators[0]);",
        "}  // namespace tessera::vmap",
        "",
    ])
    os.makedirs(args.out, exist_ok=True)
    write_if_changed(os.path.join(args.out, "batching_rules.cpp"), text)


if __name__ == "__main__":
    main()
