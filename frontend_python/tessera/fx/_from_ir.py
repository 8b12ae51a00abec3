"""A GraphModule from the serialised graph IR ("tessera.graph" version 1, see
sdk/include/tessera/sdk/graph_ir.h): placeholders for the inputs, get_attr for the lifted
constants, one call_function per recorded operator call (with getitem nodes for the parts of
a multi-result call)."""
import json
import operator

from tessera import _C

from tessera._ops import op_overload
from tessera.fx.graph import Graph
from tessera.fx.graph_module import GraphModule

# Device type ids of the built-in devices (ts_device.type); plugin devices are named by the host.
_BUILTIN_DEVICE_TYPES = {0: "cpu", 1: "cuda", 2: "hip"}
_DTYPE_NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                "float32", "float64", "complex64", "complex128"]


def parse_ir(text):
    ir = json.loads(text)
    if ir.get("format") != "tessera.graph" or ir.get("version") != 1:
        raise ValueError(f"tessera.fx: expected a 'tessera.graph' version 1 graph, got format "
                         f"{ir.get('format')!r} version {ir.get('version')!r}")
    return ir


def arg_tensor_ids(arg):
    """The value ids one serialised argument names ({"tensor": id} or {"tensors": [id|None]})."""
    (kind, v), = arg.items()
    if kind == "tensor":
        return [v]
    if kind == "tensors":
        return [i for i in v if i is not None]
    return []


def tensor_ids(node):
    """Every value id a serialised node reads, in argument order."""
    return [i for a in node["args"] for i in arg_tensor_ids(a)]


def output_ids(node):
    """The value ids a serialised node makes (absent outputs, None or -1, left out)."""
    return [i for o in node["outputs"] for i in (o if isinstance(o, list) else [o]) if i is not None and i >= 0]


def device_of(pair):
    import tessera
    kind, index = pair
    name = _BUILTIN_DEVICE_TYPES.get(kind)
    if name is None:
        raise NotImplementedError(f"tessera.fx: the graph names device type {kind}, a plugin device; graphs with "
                                  "plugin devices in operator arguments cannot be rebuilt in Python yet")
    return tessera.device(name if name == "cpu" else f"{name}:{index}")


def dtype_of(code):
    return _C._dtype_from_name(_DTYPE_NAMES[code])


def value_meta(v):
    return {"shape": tuple(v["shape"]), "stride": tuple(v["strides"]), "dtype": dtype_of(v["dtype"]),
            "storage_offset": v["storage_offset"], "alias_of": v["alias_of"]}


def graph_module_from_ir(text, constants, input_names=None):
    """The GraphModule of a serialised graph; `constants` are the lifted tensors, in order."""
    ir = parse_ir(text) if isinstance(text, str) else text
    values = ir["values"]
    g = Graph()
    env = {}
    for k, vid in enumerate(ir["inputs"]):
        name = input_names[k] if input_names else f"arg{k}"
        env[vid] = g.placeholder(name, meta={"val": value_meta(values[vid])})
    attrs = {}
    for k, vid in enumerate(ir["constants"]):
        attrs[f"_tensor_constant{k}"] = constants[k]
        env[vid] = g.get_attr(f"_tensor_constant{k}", meta={"val": value_meta(values[vid])})

    def arg(a):
        (kind, v), = a.items()
        if kind == "tensor":
            return env[v]
        if kind == "tensors":
            return [None if i is None else env[i] for i in v]
        if kind == "double":
            return float(v)
        if kind == "dtype":
            return dtype_of(v)
        if kind == "device":
            return device_of(v)
        if kind == "doubles":
            return [float(x) for x in v]
        if kind == "none":
            return None
        return v  # int, bool, ints, str

    for node in ir["nodes"]:
        target = op_overload(node["op"])
        values_in = [arg(a) for a in node["args"]]
        args, kwargs = [], {}
        for (name, keyword_only), v in zip(target.arguments(), values_in):
            if keyword_only:
                kwargs[name] = v
            else:
                args.append(v)
        args = tuple(args)
        outputs = node["outputs"]
        meta = {"mutates": node.get("mutates", []), "grad_enabled": node.get("grad_enabled", True)}
        if len(outputs) == 1 and not isinstance(outputs[0], list):
            meta["val"] = value_meta(values[outputs[0]]) if outputs[0] >= 0 else None
            env[outputs[0]] = g.call_function(target, args, kwargs, meta=meta)
            continue
        call = g.call_function(target, args, kwargs, meta=meta)
        for k, ids in enumerate(outputs):
            if isinstance(ids, list):  # a Tensor[] return
                part = g.call_function(operator.getitem, (call, k))
                for j, vid in enumerate(ids):
                    env[vid] = g.call_function(operator.getitem, (part, j), meta={"val": value_meta(values[vid])})
            elif ids >= 0:
                env[ids] = g.call_function(operator.getitem, (call, k), meta={"val": value_meta(values[ids])})
    g.output(tuple(env[vid] for vid in ir["outputs"]))
    g.eliminate_dead_code()
    return GraphModule(attrs, g)
