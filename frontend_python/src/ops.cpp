// _C.call_op: calls an operator by its schema name with Python arguments, choosing among its
// overloads by parsing the arguments against each schema (as PyTorch's Python argument parser).
//
// The overloads of a name are resolved once and cached in a dict (name -> capsule); a
// Dispatcher listener invalidates the cache when a plugin defines a new operator. The call
// path allocates nothing but the result object: arguments are boxed into a stack-resident
// frame, and a failed match reports through a bool, not an exception; the reasons are only
// computed to build the TypeError when no overload fits.
#include "bindings.h"
#include "convert.h"

#include <pybind11/stl.h>

#include <tessera/boxing.h>
#include <tessera/dispatcher.h>
#include <tessera/error.h>
#include <tessera/runtime.h>

#include <boost/container/small_vector.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace py = pybind11;
using boost::container::small_vector;

namespace tessera::python {

namespace {

// How a Python value is converted for a schema type.
enum class Conv : uint8_t {
  Tensor, Int, Float, Bool, Scalar, IntList, FloatList, ScalarType, Device, Str, TensorList, Any, Unsupported
};

struct Param {
  std::string name;
  PyObject* py_name = nullptr;   // interned, never freed
  PyObject* py_alias = nullptr;  // "input" for "self" (PyTorch's functional spelling)
  SchemaType type;
  Conv conv = Conv::Any;
  bool accepts_none = false;
  bool kwarg_only = false;
  bool has_default = false;
  DefaultValue def;
  ts_value def_value{};  // the boxed default (lists and strings point into `def` at call time)
  int64_t list_size = 1;  // N of int[N]; a single int becomes a list of N copies
};

struct Overload {
  OperatorHandle op = nullptr;
  std::vector<Param> params;
  int n_positional = 0;  // params before the first keyword-only one
  int varargs_index = -1;  // an int[] that may be spread: view(x, 2, 3), zeros(2, 3)
  bool has_out = false;
  int n_returns = 0;
  std::vector<int> return_alias_arg;  // per return: the argument it writes in place (a!), or -1
};

struct OverloadSet {
  std::string name;
  std::vector<Overload> overloads;
  size_t max_slots = 0;
  bool numbers_as_tensors = false;  // torch lets Python numbers stand for this operator's tensors
};

// The boxed arguments of one call, on the C stack.
struct Frame {
  small_vector<ts_value, 12> values;
  small_vector<PyObject*, 12> sources;  // the Python object each argument came from (borrowed)
  small_vector<int64_t, 16> ints;
  small_vector<double, 4> doubles;
  small_vector<ts_tensor, 8> tensors;
  small_vector<Tensor, 4> keep;  // references held while the GIL is released (list elements)
  struct Fixup {
    int slot;
    size_t offset;
  };
  small_vector<Fixup, 4> fixups;  // list slots whose data pointer is set once parsing is done

  void reset(size_t n) {
    values.assign(n, ts_value{});
    sources.assign(n, nullptr);
    ints.clear();
    doubles.clear();
    tensors.clear();
    keep.clear();
    fixups.clear();
  }
  void finish() {
    for (const Fixup& f : fixups) {
      ts_value& v = values[size_t(f.slot)];
      if (v.tag == TS_VALUE_INT_LIST) v.u.ints.data = ints.data() + f.offset;
      else if (v.tag == TS_VALUE_DOUBLE_LIST) v.u.doubles.data = doubles.data() + f.offset;
      else if (v.tag == TS_VALUE_TENSOR_LIST) v.u.tensors.data = tensors.data() + f.offset;
    }
  }
};

// ---------------------------------------------------------------------------- Python values

std::string type_name(PyObject* v) {
  if (v == Py_None) return "None";
  if (is_tensor(v)) return "Tensor";
  if (PyList_Check(v) || PyTuple_Check(v)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    std::string s = PyList_Check(v) ? "list of [" : "tuple of (";
    for (Py_ssize_t i = 0; i < n && i < 6; ++i) {
      if (i) s += ", ";
      s += type_name(PySequence_Fast_GET_ITEM(v, i));
    }
    if (n > 6) s += ", ...";
    return s + (PyList_Check(v) ? "]" : ")");
  }
  return Py_TYPE(v)->tp_name;
}

bool is_numpy_bool(PyObject* v) {
  std::string_view n = Py_TYPE(v)->tp_name;
  return n == "numpy.bool" || n == "numpy.bool_";
}

// An integer (not a bool, not a float, not a tensor): Python ints and int-likes (NumPy integers).
bool as_int(PyObject* v, int64_t* out) {
  if (PyLong_Check(v)) {
    if (PyBool_Check(v)) return false;
    int overflow = 0;
    long long r = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (r == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    *out = r;
    return true;
  }
  if (PyFloat_Check(v) || is_tensor(v) || is_numpy_bool(v) || !PyIndex_Check(v)) return false;
  PyObject* i = PyNumber_Index(v);
  if (!i) {
    PyErr_Clear();
    return false;
  }
  bool ok = as_int(i, out);
  Py_DECREF(i);
  return ok;
}

// A Python int too large for int64 (2**70): such arguments get an OverflowError naming the
// operator, the argument and the value, not a "must be int" TypeError.
constexpr std::string_view kDoesNotFit = "which does not fit in int64";
bool int_overflows(PyObject* v) {
  if (!PyLong_Check(v) || PyBool_Check(v)) return false;
  int overflow = 0;
  PyLong_AsLongLongAndOverflow(v, &overflow);
  PyErr_Clear();
  return overflow != 0;
}
std::string too_big(std::string_view argument, PyObject* v, Py_ssize_t element = -1) {
  std::string digits = py::str(v);
  return fmt::format("argument '{}'{} is {}, {} (int64 holds {} to {})", argument,
                     element >= 0 ? fmt::format(" element {}", element) : "", digits, kDoesNotFit,
                     std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
}

// A real number: floats, ints (not bools), float-likes (NumPy floats).
bool as_double(PyObject* v, double* out) {
  if (PyFloat_Check(v)) {
    *out = PyFloat_AS_DOUBLE(v);
    return true;
  }
  int64_t i;
  if (as_int(v, &i)) {
    *out = double(i);
    return true;
  }
  if (PyBool_Check(v) || is_tensor(v) || is_numpy_bool(v) || PyLong_Check(v)) return false;
  if (!Py_TYPE(v)->tp_as_number || !Py_TYPE(v)->tp_as_number->nb_float) return false;
  double d = PyFloat_AsDouble(v);
  if (d == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  *out = d;
  return true;
}

// A Scalar: bool, int, float, or a one-element tensor (its value).
bool as_scalar(PyObject* v, ts_value* out) {
  if (PyBool_Check(v) || is_numpy_bool(v)) {
    out->tag = TS_VALUE_BOOL;
    out->u.b = PyObject_IsTrue(v) == 1;
    return true;
  }
  if (is_tensor(v)) {
    const Tensor& t = tensor_of(v);
    if (!t.defined() || t.numel() != 1) return false;
    ScalarType d = t.dtype();
    if (d == kBool) {
      out->tag = TS_VALUE_BOOL;
      out->u.b = t.item_int() != 0;
    } else if (is_floating_point(d)) {
      out->tag = TS_VALUE_DOUBLE;
      out->u.d = t.item_double();
    } else {
      out->tag = TS_VALUE_INT;
      out->u.i = t.item_int();
    }
    return true;
  }
  int64_t i;
  if (as_int(v, &i)) {
    out->tag = TS_VALUE_INT;
    out->u.i = i;
    return true;
  }
  double d;
  if (as_double(v, &d)) {
    out->tag = TS_VALUE_DOUBLE;
    out->u.d = d;
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------- schema -> overload

Conv conv_of(const SchemaType& t) {
  using K = SchemaType::Kind;
  if (t.is_list) {
    switch (t.kind) {
      case K::Int: return Conv::IntList;
      case K::Float: return Conv::FloatList;
      case K::Tensor: return Conv::TensorList;
      default: return Conv::Unsupported;
    }
  }
  switch (t.kind) {
    case K::Tensor: return Conv::Tensor;
    case K::Int: return Conv::Int;
    case K::Float: return Conv::Float;
    case K::Bool: return Conv::Bool;
    case K::Scalar: return Conv::Scalar;
    case K::ScalarType: return Conv::ScalarType;
    case K::Str: return Conv::Str;
    case K::Device: return Conv::Device;
    case K::Any: return Conv::Any;
    default: return Conv::Unsupported;  // Layout, MemoryFormat, Generator, Dimname: None only
  }
}

// Lower ranks are more specific and are tried first (a Tensor before a Scalar, an int before a
// float or an int list, which also accept ints).
int rank(Conv c) {
  switch (c) {
    case Conv::Tensor:
    case Conv::TensorList: return 0;
    case Conv::Int:
    case Conv::Bool:
    case Conv::ScalarType:
    case Conv::Device:
    case Conv::Str: return 1;
    case Conv::Float:
    case Conv::IntList: return 2;
    case Conv::FloatList:
    case Conv::Scalar: return 3;
    case Conv::Any:
    case Conv::Unsupported: return 5;
  }
  return 5;
}

// a should be tried before b: every shared positional parameter is at least as specific, one more.
bool dominates(const Overload& a, const Overload& b) {
  if (a.has_out != b.has_out) return !a.has_out;
  int n = std::min(a.n_positional, b.n_positional);
  bool strict = false;
  for (int i = 0; i < n; ++i) {
    int ra = rank(a.params[size_t(i)].conv), rb = rank(b.params[size_t(i)].conv);
    if (ra > rb) return false;
    if (ra < rb) strict = true;
  }
  return strict;
}

ts_value box_default(const Param& p) {
  ts_value v{};
  const DefaultValue& d = p.def;
  switch (d.kind) {
    case DefaultValue::Kind::None: v.tag = TS_VALUE_NONE; break;
    case DefaultValue::Kind::Bool:
      v.tag = TS_VALUE_BOOL;
      v.u.b = d.b;
      break;
    case DefaultValue::Kind::Int:
      if (p.conv == Conv::Float) {
        v.tag = TS_VALUE_DOUBLE;
        v.u.d = double(d.i);
      } else {  // int, Scalar, or a single int on int[] (kernels read it as a one-element list)
        v.tag = TS_VALUE_INT;
        v.u.i = d.i;
      }
      break;
    case DefaultValue::Kind::Float:
      v.tag = TS_VALUE_DOUBLE;
      v.u.d = d.f;
      break;
    case DefaultValue::Kind::Str: v.tag = TS_VALUE_STRING; break;
    case DefaultValue::Kind::IntList: v.tag = TS_VALUE_INT_LIST; break;
    case DefaultValue::Kind::FloatList: v.tag = TS_VALUE_DOUBLE_LIST; break;
    case DefaultValue::Kind::BoolList:
      raise<NotImplementedError>("default '{}' of argument '{}': bool lists have no C ABI value", d.text, p.name);
    case DefaultValue::Kind::Identifier:
      if (p.conv == Conv::ScalarType) {
        v.tag = TS_VALUE_DTYPE;
        v.u.i = int64_t(scalar_type_from_name(d.s));
      } else {
        v.tag = TS_VALUE_NONE;  // enum-like identifiers (contiguous_format, Mean) have no ABI value
      }
      break;
  }
  return v;
}

Overload make_overload(OperatorHandle op) {
  static PyObject* input_name = PyUnicode_InternFromString("input");
  const FunctionSchema& s = op->schema();
  Overload ov;
  ov.op = op;
  ov.n_returns = int(s.returns.size());
  bool seen_kwarg_only = false;
  for (const Argument& a : s.arguments) {
    Param p;
    p.name = a.name;
    p.py_name = PyUnicode_InternFromString(a.name.c_str());
    if (!p.py_name) throw py::error_already_set();
    if (a.name == "self") p.py_alias = input_name;
    p.type = a.type;
    p.conv = conv_of(a.type);
    p.accepts_none = a.type.optional;
    p.kwarg_only = a.kwarg_only;
    if (a.type.fixed_size) p.list_size = *a.type.fixed_size;
    if (a.default_value) {
      p.def = *a.default_value;
      try {
        p.def_value = box_default(p);
        p.has_default = true;
      } catch (const Error&) {
        p.has_default = false;  // a default with no ABI value (bool[]): the argument must be given
      }
    }
    if (a.name == "out" && a.kwarg_only) ov.has_out = true;
    seen_kwarg_only |= a.kwarg_only;
    if (!seen_kwarg_only) ++ov.n_positional;
    ov.params.push_back(std::move(p));
  }
  // Spreading an int list: when it is the last positional parameter and at most `self` precedes it.
  if (ov.n_positional > 0) {
    int last = ov.n_positional - 1;
    const Param& p = ov.params[size_t(last)];
    bool only_self_before = last == 0 || (last == 1 && ov.params[0].conv == Conv::Tensor);
    if (p.conv == Conv::IntList && !p.type.fixed_size && only_self_before) ov.varargs_index = last;
  }
  for (const Argument& r : s.returns) {
    int k = -1;
    if (r.alias && r.alias->is_write)
      for (size_t i = 0; i < s.arguments.size(); ++i)
        if (s.arguments[i].alias && s.arguments[i].alias->set == r.alias->set &&
            s.arguments[i].type.kind == SchemaType::Kind::Tensor && !s.arguments[i].type.is_list)
          k = int(i);
    ov.return_alias_arg.push_back(k);
  }
  return ov;
}

std::string base_name(const FunctionSchema& s) { return s.ns.empty() ? s.name : s.ns + "::" + s.name; }

// The overloads of a name ("add", "test::double_it"), or the one overload of a full name ("add.Tensor").
std::unique_ptr<OverloadSet> build_set(const std::string& name) {
  auto set = std::make_unique<OverloadSet>();
  set->name = name;
  std::vector<OperatorHandle> ops;
  auto& dispatcher = Dispatcher::instance();
  for (OperatorHandle op : dispatcher.operators())
    if (base_name(op->schema()) == name) ops.push_back(op);
  if (ops.empty()) {
    std::string_view n = name;
    if (n.starts_with("aten::")) n.remove_prefix(6);
    if (OperatorHandle op = dispatcher.find(n)) ops.push_back(op);  // a full name such as "add.Tensor"
    else if (n != name)
      for (OperatorHandle op : dispatcher.operators())
        if (base_name(op->schema()) == n) ops.push_back(op);
  }
  if (ops.empty())
    raise<RuntimeError>("unknown operator '{}': it is neither in core/ops.yaml nor defined by a loaded plugin", name);
  std::vector<Overload> pending;
  for (OperatorHandle op : ops) pending.push_back(make_overload(op));
  // Order: repeatedly take the first overload that no other remaining one should precede.
  while (!pending.empty()) {
    size_t pick = 0;
    for (size_t i = 0; i < pending.size(); ++i) {
      bool dominated = false;
      for (size_t j = 0; j < pending.size() && !dominated; ++j)
        dominated = j != i && dominates(pending[j], pending[i]);
      if (!dominated) {
        pick = i;
        break;
      }
    }
    set->overloads.push_back(std::move(pending[pick]));
    pending.erase(pending.begin() + std::ptrdiff_t(pick));
  }
  for (const Overload& ov : set->overloads)
    set->max_slots = std::max(set->max_slots, std::max(ov.params.size(), size_t(ov.n_returns)));
  // torch's list (python_arg_parser's should_allow_numbers_as_tensors): the arithmetic and
  // comparison operators, by name (not a full overload name such as "add.Tensor").
  static const std::vector<std::string_view> kNumbersAsTensors = {
      "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "eq", "ne", "ge", "gt", "le",
      "lt", "xlogy", "copysign", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
      "bitwise_right_shift", "where"};
  std::string_view base = name;
  if (base.starts_with("aten::")) base.remove_prefix(6);
  if (base.ends_with('_')) base.remove_suffix(1);
  set->numbers_as_tensors = std::find(kNumbersAsTensors.begin(), kNumbersAsTensors.end(), base) != kNumbersAsTensors.end();
  return set;
}

// ---------------------------------------------------------------------------- the cache

std::atomic<uint64_t> g_generation{0};  // bumped when an operator is defined
uint64_t g_cache_generation = 0;        // guarded by the GIL
PyObject* g_cache = nullptr;            // dict: name -> capsule(OverloadSet*)

void free_set(PyObject* capsule) { delete static_cast<OverloadSet*>(PyCapsule_GetPointer(capsule, nullptr)); }

// A new reference to the capsule of `name`'s overloads (held for the call: the cache may be
// cleared meanwhile by another thread while this one runs a kernel without the GIL).
PyObject* lookup(PyObject* name) {
  uint64_t gen = g_generation.load(std::memory_order_acquire);
  if (gen != g_cache_generation) {
    PyDict_Clear(g_cache);
    g_cache_generation = gen;
  }
  PyObject* capsule = PyDict_GetItemWithError(g_cache, name);
  if (capsule) {
    Py_INCREF(capsule);
    return capsule;
  }
  if (PyErr_Occurred()) throw py::error_already_set();
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(name, &n);
  if (!s) throw py::error_already_set();
  auto set = build_set(std::string(s, size_t(n)));
  capsule = PyCapsule_New(set.get(), nullptr, free_set);
  if (!capsule) throw py::error_already_set();
  set.release();
  if (PyDict_SetItem(g_cache, name, capsule) < 0) {
    Py_DECREF(capsule);
    throw py::error_already_set();
  }
  return capsule;
}

// ---------------------------------------------------------------------------- parsing

std::string expected_name(const Param& p) { return p.type.to_string(); }

bool fail(std::string* why, std::string text) {
  if (why) *why = std::move(text);
  return false;
}

bool push_int_list(const Param& p, PyObject* v, Frame& f, int slot, std::string* why) {
  int64_t i;
  size_t offset = f.ints.size();
  if (as_int(v, &i)) {  // a single int: [i] for int[], N copies for int[N]
    f.ints.insert(f.ints.end(), size_t(std::max<int64_t>(p.list_size, 1)), i);
  } else if (PyList_Check(v) || PyTuple_Check(v)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    for (Py_ssize_t k = 0; k < n; ++k) {
      PyObject* e = PySequence_Fast_GET_ITEM(v, k);
      if (!as_int(e, &i) && int_overflows(e)) return fail(why, too_big(p.name, e, k));
      if (!as_int(e, &i))
        return fail(why, fmt::format("argument '{}' must be {} (a tuple of ints), but element {} is {}", p.name,
                                     expected_name(p), k, type_name(e)));
      f.ints.push_back(i);
    }
  } else if (int_overflows(v)) {
    return fail(why, too_big(p.name, v));
  } else {
    return fail(why, fmt::format("argument '{}' must be {} (an int or a tuple of ints), not {}", p.name,
                                 expected_name(p), type_name(v)));
  }
  ts_value& out = f.values[size_t(slot)];
  out.tag = TS_VALUE_INT_LIST;
  out.u.ints.size = int64_t(f.ints.size() - offset);
  f.fixups.push_back({slot, offset});
  return true;
}

// Set for resolve's second pass: a Python number may stand for a Tensor argument, as torch lets
// numbers stand for tensors (`torch.div(t, 2.0, out=o)`, `torch.where(c, x, 0.0)`).
thread_local bool t_numbers_as_tensors = false;

// A Python bool, int or float as the 0-dim tensor torch wraps it in: bool, int64, or the default
// float dtype (so it does not widen a float32 tensor). False for anything else.
bool wrap_number(PyObject* v, Frame& f, ts_value& out) {
  double value;
  ScalarType dtype;
  if (PyBool_Check(v)) {
    value = v == Py_True ? 1.0 : 0.0;
    dtype = kBool;
  } else if (PyLong_Check(v)) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || x > (1LL << 53) || x < -(1LL << 53)) return false;  // exact through a double only
    value = double(x);
    dtype = kInt64;
  } else if (PyFloat_Check(v)) {
    value = PyFloat_AS_DOUBLE(v);
    dtype = get_default_dtype();
  } else {
    return false;
  }
  f.keep.push_back(tensor_from_values(std::span<const double>(&value, 1), {}, dtype));
  detail::box(out, f.keep.back());
  return true;
}

bool convert(const Param& p, PyObject* v, Frame& f, int slot, std::string* why) {
  ts_value& out = f.values[size_t(slot)];
  if (v == Py_None) {
    if (p.accepts_none) {
      out.tag = TS_VALUE_NONE;
      return true;
    }
    return fail(why, fmt::format("argument '{}' must be {}, not None", p.name, expected_name(p)));
  }
  switch (p.conv) {
    case Conv::Tensor:
      if (!is_tensor(v)) {
        if (t_numbers_as_tensors && wrap_number(v, f, out)) return true;
        break;
      }
      detail::box(out, tensor_of(v));
      return true;
    case Conv::Int:
      if (int_overflows(v)) return fail(why, too_big(p.name, v));
      if (!as_int(v, &out.u.i)) break;
      out.tag = TS_VALUE_INT;
      return true;
    case Conv::Float:
      if (!as_double(v, &out.u.d)) break;
      out.tag = TS_VALUE_DOUBLE;
      return true;
    case Conv::Bool:
      if (!PyBool_Check(v) && !is_numpy_bool(v)) break;
      out.tag = TS_VALUE_BOOL;
      out.u.b = PyObject_IsTrue(v) == 1;
      return true;
    case Conv::Scalar:
      if (!as_scalar(v, &out)) {
        if (is_tensor(v))
          return fail(why, fmt::format("argument '{}' must be a number or a one-element tensor, got a tensor with {} "
                                       "elements", p.name, tensor_of(v).numel()));
        break;
      }
      return true;
    case Conv::IntList: return push_int_list(p, v, f, slot, why);
    case Conv::FloatList: {
      size_t offset = f.doubles.size();
      double d;
      if (as_double(v, &d)) {
        f.doubles.insert(f.doubles.end(), size_t(std::max<int64_t>(p.list_size, 1)), d);
      } else if (PyList_Check(v) || PyTuple_Check(v)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
        for (Py_ssize_t k = 0; k < n; ++k) {
          PyObject* e = PySequence_Fast_GET_ITEM(v, k);
          if (!as_double(e, &d))
            return fail(why, fmt::format("argument '{}' must be {}, but element {} is {}", p.name, expected_name(p), k,
                                         type_name(e)));
          f.doubles.push_back(d);
        }
      } else {
        break;
      }
      out.tag = TS_VALUE_DOUBLE_LIST;
      out.u.doubles.size = int64_t(f.doubles.size() - offset);
      f.fixups.push_back({slot, offset});
      return true;
    }
    case Conv::ScalarType: {
      ScalarType t;
      if (!try_scalar_type(v, &t)) break;
      out.tag = TS_VALUE_DTYPE;
      out.u.i = int64_t(t);
      return true;
    }
    case Conv::Device: {
      Device d;
      if (!try_device(v, &d)) break;  // raises ValueError for an unknown device name
      detail::box(out, d);
      return true;
    }
    case Conv::Str: {
      if (!PyUnicode_Check(v)) break;
      const char* s = PyUnicode_AsUTF8(v);  // cached in the str object, which outlives the call
      if (!s) {
        PyErr_Clear();
        break;
      }
      out.tag = TS_VALUE_STRING;
      out.u.str = s;
      return true;
    }
    case Conv::TensorList: {
      if (!PyList_Check(v) && !PyTuple_Check(v)) break;
      size_t offset = f.tensors.size();
      Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
      for (Py_ssize_t k = 0; k < n; ++k) {
        PyObject* e = PySequence_Fast_GET_ITEM(v, k);
        if (e == Py_None && p.type.element_optional) {
          f.tensors.push_back(nullptr);
          continue;
        }
        if (!is_tensor(e))
          return fail(why, fmt::format("argument '{}' must be {}, but element {} is {}", p.name, expected_name(p), k,
                                       type_name(e)));
        f.keep.push_back(tensor_of(e));  // a list may change while the GIL is released
        f.tensors.push_back(tensor_of(e).handle());
      }
      out.tag = TS_VALUE_TENSOR_LIST;
      out.u.tensors.size = int64_t(n);
      f.fixups.push_back({slot, offset});
      return true;
    }
    case Conv::Any: {
      if (is_tensor(v)) {
        detail::box(out, tensor_of(v));
        return true;
      }
      if (as_scalar(v, &out)) return true;
      ScalarType t;
      if (try_scalar_type(v, &t) && !PyUnicode_Check(v)) {
        out.tag = TS_VALUE_DTYPE;
        out.u.i = int64_t(t);
        return true;
      }
      if (PyUnicode_Check(v)) {
        Param q = p;
        q.conv = Conv::Str;
        return convert(q, v, f, slot, why);
      }
      if (PyList_Check(v) || PyTuple_Check(v)) {
        Param q = p;
        q.conv = PySequence_Fast_GET_SIZE(v) > 0 && is_tensor(PySequence_Fast_GET_ITEM(v, 0)) ? Conv::TensorList
                                                                                               : Conv::IntList;
        return convert(q, v, f, slot, why);
      }
      break;
    }
    case Conv::Unsupported:
      return fail(why, fmt::format("argument '{}' has type {}, which the Python binding can only pass as None",
                                   p.name, expected_name(p)));
  }
  return fail(why, fmt::format("argument '{}' must be {}, not {}", p.name, expected_name(p), type_name(v)));
}

PyObject* kwarg(PyObject* kwargs, const Param& p) {
  PyObject* v = PyDict_GetItemWithError(kwargs, p.py_name);
  if (!v && p.py_alias) v = PyDict_GetItemWithError(kwargs, p.py_alias);
  if (!v) PyErr_Clear();
  return v;
}

// Parses the arguments against one overload into `f`. Returns false (and, with `why`, the
// reason) when they do not fit; raises only for real errors (an unknown device name, ...).
bool parse(const Overload& ov, PyObject* const* args, Py_ssize_t nargs, PyObject* kwargs, Py_ssize_t nkw, Frame& f,
           std::string* why) {
  if (ov.has_out && nkw == 0) return fail(why, "missing required keyword argument 'out'");
  size_t np = ov.params.size();
  f.reset(np);
  bool spread = false;
  if (nargs > ov.n_positional) {
    int64_t ignored;
    spread = ov.varargs_index >= 0;
    for (Py_ssize_t k = ov.varargs_index; spread && k < nargs; ++k) spread = as_int(args[k], &ignored);
    if (!spread)
      return fail(why, fmt::format("it takes {} positional arguments but {} were given", ov.n_positional, nargs));
  }
  Py_ssize_t used_kw = 0;
  for (size_t i = 0; i < np; ++i) {
    const Param& p = ov.params[i];
    int slot = int(i);
    PyObject* v = nullptr;
    if (spread && slot == ov.varargs_index) {
      size_t offset = f.ints.size();
      for (Py_ssize_t k = ov.varargs_index; k < nargs; ++k) {
        int64_t x;
        as_int(args[k], &x);
        f.ints.push_back(x);
      }
      ts_value& out = f.values[i];
      out.tag = TS_VALUE_INT_LIST;
      out.u.ints.size = int64_t(f.ints.size() - offset);
      f.fixups.push_back({slot, offset});
      if (nkw && kwarg(kwargs, p))
        return fail(why, fmt::format("got multiple values for argument '{}'", p.name));
      continue;
    }
    if (!p.kwarg_only && Py_ssize_t(i) < nargs) v = args[i];
    if (nkw) {
      if (PyObject* kv = kwarg(kwargs, p)) {
        if (v) return fail(why, fmt::format("got multiple values for argument '{}'", p.name));
        v = kv;
        ++used_kw;
      }
    }
    if (!v) {
      if (!p.has_default)
        return fail(why, p.kwarg_only ? fmt::format("missing required keyword argument '{}'", p.name)
                                      : fmt::format("missing required argument '{}' (position {})", p.name, i + 1));
      ts_value& out = f.values[i];
      out = p.def_value;
      if (out.tag == TS_VALUE_INT_LIST) {
        out.u.ints.data = p.def.ints.data();
        out.u.ints.size = int64_t(p.def.ints.size());
      } else if (out.tag == TS_VALUE_DOUBLE_LIST) {
        out.u.doubles.data = p.def.floats.data();
        out.u.doubles.size = int64_t(p.def.floats.size());
      } else if (out.tag == TS_VALUE_STRING) {
        out.u.str = p.def.s.c_str();
      }
      continue;
    }
    if (!convert(p, v, f, slot, why)) return false;
    if (t_numbers_as_tensors && p.conv == Conv::Tensor && !is_tensor(v) &&
        std::find(ov.return_alias_arg.begin(), ov.return_alias_arg.end(), int(i)) != ov.return_alias_arg.end())
      return fail(why, fmt::format("argument '{}' is written in place and must be a Tensor", p.name));
    f.sources[i] = v;
  }
  if (used_kw != nkw) {
    if (why) {
      PyObject *key, *value;
      Py_ssize_t pos = 0;
      while (PyDict_Next(kwargs, &pos, &key, &value)) {
        bool known = false;
        for (const Param& p : ov.params)
          known |= PyUnicode_Compare(key, p.py_name) == 0 || (p.py_alias && PyUnicode_Compare(key, p.py_alias) == 0);
        if (PyErr_Occurred()) PyErr_Clear();
        if (!known) {
          py::str k = py::reinterpret_borrow<py::str>(key);
          *why = fmt::format("got an unexpected keyword argument '{}'", std::string(k));
          break;
        }
      }
    }
    return false;
  }
  f.finish();
  return true;
}

// ---------------------------------------------------------------------------- calling

[[noreturn]] void raise_no_match(const OverloadSet& set, PyObject* const* args, Py_ssize_t nargs, PyObject* kwargs,
                                 Py_ssize_t nkw) {
  std::vector<std::string> got;
  for (Py_ssize_t k = 0; k < nargs; ++k) got.push_back(type_name(args[k]));
  if (nkw) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value))
      got.push_back(std::string(py::str(key)) + "=" + type_name(value));
  }
  std::string text = fmt::format("{}() received an invalid combination of arguments - got ({}), but expected{}:\n",
                                 set.name, fmt::join(got, ", "), set.overloads.size() == 1 ? "" : " one of");
  std::string overflow;
  for (const Overload& ov : set.overloads) {
    Frame f;
    std::string why;
    parse(ov, args, nargs, kwargs, nkw, f, &why);
    if (overflow.empty() && why.find(kDoesNotFit) != std::string::npos) overflow = why;
    text += fmt::format(" * {}\n      didn't match because {}\n", ov.op->schema().to_string(), why);
  }
  text.pop_back();
  if (!overflow.empty()) {  // the value, not its type, is wrong: Python's OverflowError, as int() -> C long
    PyErr_SetString(PyExc_OverflowError, fmt::format("{}(): {}", set.name, overflow).c_str());
    throw py::error_already_set();
  }
  throw TypeError(text);
}

PyObject* return_value(const Overload& ov, const Frame& f, int j, const ts_value& v, Tensor& owned) {
  switch (v.tag) {
    case TS_VALUE_NONE: Py_RETURN_NONE;
    case TS_VALUE_TENSOR: {
      int k = ov.return_alias_arg[size_t(j)];
      if (k >= 0 && f.sources[size_t(k)] && is_tensor(f.sources[size_t(k)]) &&
          tensor_of(f.sources[size_t(k)]).handle() == owned.handle()) {
        PyObject* same = f.sources[size_t(k)];  // in place / out=: the argument's own object
        Py_INCREF(same);
        return same;
      }
      return wrap(std::move(owned)).release().ptr();
    }
    case TS_VALUE_INT: return PyLong_FromLongLong(v.u.i);
    case TS_VALUE_DOUBLE: return PyFloat_FromDouble(v.u.d);
    case TS_VALUE_BOOL: return PyBool_FromLong(v.u.b);
    case TS_VALUE_DTYPE: return dtype_object(ScalarType(int32_t(v.u.i))).release().ptr();
    case TS_VALUE_DEVICE: return tensor_device_object(Device::from_abi(v.u.device)).release().ptr();
    case TS_VALUE_STRING: return PyUnicode_FromString(v.u.str ? v.u.str : "");
    case TS_VALUE_INT_LIST: {
      PyObject* list = PyList_New(Py_ssize_t(v.u.ints.size));
      for (int64_t i = 0; list && i < v.u.ints.size; ++i)
        PyList_SET_ITEM(list, Py_ssize_t(i), PyLong_FromLongLong(v.u.ints.data[i]));
      return list;
    }
    case TS_VALUE_TENSOR_LIST: {  // ABI 1.2: new references, valid until the next call into the plugin
      std::vector<Tensor> tensors;
      for (int64_t i = 0; i < v.u.tensors.size; ++i)
        tensors.push_back(v.u.tensors.data[i] ? Tensor::adopt(v.u.tensors.data[i]) : Tensor());
      PyObject* list = PyList_New(Py_ssize_t(tensors.size()));
      for (size_t i = 0; list && i < tensors.size(); ++i) {
        PyObject* item = tensors[i].defined() ? wrap(std::move(tensors[i])).release().ptr() : (Py_INCREF(Py_None), Py_None);
        PyList_SET_ITEM(list, Py_ssize_t(i), item);
      }
      return list;
    }
    case TS_VALUE_DOUBLE_LIST: {
      PyObject* list = PyList_New(Py_ssize_t(v.u.doubles.size));
      for (int64_t i = 0; list && i < v.u.doubles.size; ++i)
        PyList_SET_ITEM(list, Py_ssize_t(i), PyFloat_FromDouble(v.u.doubles.data[i]));
      return list;
    }
    default:
      raise<NotImplementedError>("{}: return {} has value tag {}, which the Python binding cannot convert "
                                 "", ov.op->name(), j, v.tag);
  }
}

// Resolves the overload (returns its index) and leaves its arguments in `f`.
const Overload& resolve(const OverloadSet& set, PyObject* const* args, Py_ssize_t nargs, PyObject* kwargs,
                        Py_ssize_t nkw, Frame& f) {
  for (const Overload& ov : set.overloads)
    if (parse(ov, args, nargs, kwargs, nkw, f, nullptr)) return ov;
  if (!set.numbers_as_tensors) raise_no_match(set, args, nargs, kwargs, nkw);
  // Nothing matched as given: let Python numbers stand for tensors, as torch does for these
  // operators. A second pass, so an overload that takes the number as a Scalar always wins.
  struct NumbersAsTensors {
    NumbersAsTensors() { t_numbers_as_tensors = true; }
    ~NumbersAsTensors() { t_numbers_as_tensors = false; }
  } numbers_as_tensors;
  for (const Overload& ov : set.overloads)
    if (parse(ov, args, nargs, kwargs, nkw, f, nullptr)) return ov;
  t_numbers_as_tensors = false;  // the error lists why each overload refused the arguments as given
  raise_no_match(set, args, nargs, kwargs, nkw);
}

PyObject* run(const Overload& ov, Frame& f) {
  size_t np = ov.params.size();
  size_t capacity = std::max(np, size_t(ov.n_returns));
  if (f.values.size() < capacity) f.values.resize(capacity, ts_value{});
  ts_stack stack{sizeof(ts_stack), f.values.data(), int32_t(np), int32_t(capacity)};
  {
    GilRelease unlocked;
    Dispatcher::instance().call(ov.op, &stack);
  }
  // Take ownership of every returned tensor first, so nothing leaks if a conversion fails.
  small_vector<Tensor, 2> owned(size_t(std::max<int32_t>(stack.size, 0)));
  for (int32_t j = 0; j < stack.size; ++j)
    if (f.values[size_t(j)].tag == TS_VALUE_TENSOR) owned[size_t(j)] = detail::unbox_tensor(f.values[size_t(j)]);
  if (stack.size != ov.n_returns)
    raise<RuntimeError>("{}: the kernel left {} values on the stack, the schema declares {} returns", ov.op->name(),
                        stack.size, ov.n_returns);
  if (ov.n_returns == 0) Py_RETURN_NONE;
  if (ov.n_returns == 1) {
    PyObject* r = return_value(ov, f, 0, f.values[0], owned[0]);
    if (!r) throw py::error_already_set();
    return r;
  }
  py::tuple result(ov.n_returns);
  for (int j = 0; j < ov.n_returns; ++j) {
    PyObject* r = return_value(ov, f, j, f.values[size_t(j)], owned[size_t(j)]);
    if (!r) throw py::error_already_set();
    PyTuple_SET_ITEM(result.ptr(), j, r);
  }
  return result.release().ptr();
}

// Holds references to the keyword values for the call (the dict may change without the GIL).
struct KwargsHold {
  small_vector<PyObject*, 4> held;
  explicit KwargsHold(PyObject* kwargs) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      Py_INCREF(value);
      held.push_back(value);
    }
  }
  ~KwargsHold() {
    for (PyObject* v : held) Py_DECREF(v);
  }
};

struct CapsuleRef {
  PyObject* capsule;
  ~CapsuleRef() { Py_DECREF(capsule); }
  const OverloadSet& set() const { return *static_cast<OverloadSet*>(PyCapsule_GetPointer(capsule, nullptr)); }
};

// call_op(name, args, kwargs) and _resolve_op(name, args, kwargs) share this.
template <bool Resolve>
PyObject* call_op_impl(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
  const char* fname = Resolve ? "_resolve_op" : "call_op";
  if (argc < 2 || argc > 3) {
    PyErr_Format(PyExc_TypeError, "%s(name, args, kwargs=None) takes 2 or 3 arguments (%zd given)", fname, argc);
    return nullptr;
  }
  PyObject* name = argv[0];
  PyObject* args = argv[1];
  PyObject* kwargs = argc == 3 ? argv[2] : Py_None;
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "%s(): name must be a str, not %s", fname, Py_TYPE(name)->tp_name);
    return nullptr;
  }
  if (!PyTuple_Check(args)) {
    PyErr_Format(PyExc_TypeError, "%s(): args must be a tuple, not %s", fname, Py_TYPE(args)->tp_name);
    return nullptr;
  }
  if (kwargs != Py_None && !PyDict_Check(kwargs)) {
    PyErr_Format(PyExc_TypeError, "%s(): kwargs must be a dict or None, not %s", fname, Py_TYPE(kwargs)->tp_name);
    return nullptr;
  }
  try {
    CapsuleRef ref{lookup(name)};
    const OverloadSet& set = ref.set();
    Py_ssize_t nkw = kwargs == Py_None ? 0 : PyDict_GET_SIZE(kwargs);
    PyObject* const* items = &PyTuple_GET_ITEM(args, 0);
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    Frame f;
    if (nkw == 0) {
      const Overload& ov = resolve(set, items, nargs, kwargs, 0, f);
      if constexpr (Resolve) return PyUnicode_FromString(ov.op->name().c_str());
      else return run(ov, f);
    }
    KwargsHold hold(kwargs);
    const Overload& ov = resolve(set, items, nargs, kwargs, nkw, f);
    if constexpr (Resolve) return PyUnicode_FromString(ov.op->name().c_str());
    else return run(ov, f);
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

PyMethodDef call_op_def = {
    "call_op", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&call_op_impl<false>)), METH_FASTCALL,
    "call_op(name, args, kwargs=None): calls the operator `name` (its schema name: 'add', 'add_', "
    "'test::double_it', or a full 'add.Tensor') choosing the overload that fits the arguments."};
PyMethodDef resolve_op_def = {
    "_resolve_op", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&call_op_impl<true>)), METH_FASTCALL,
    "_resolve_op(name, args, kwargs=None): the full name of the overload call_op would run ('add.Scalar')."};

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (OperatorHandle op : Dispatcher::instance().operators()) names.push_back(base_name(op->schema()));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace

// Schema texts of every overload of a base name (or of one full name); shared with plugins.cpp.
std::vector<OperatorHandle> overloads_of(const std::string& name) {
  std::vector<OperatorHandle> out;
  for (OperatorHandle op : Dispatcher::instance().operators())
    if (base_name(op->schema()) == name) out.push_back(op);
  if (out.empty())
    if (OperatorHandle op = Dispatcher::instance().find(name)) out.push_back(op);
  return out;
}

void bind_ops(py::module_& m) {
  init();
  g_cache = PyDict_New();  // lives as long as the process
  if (!g_cache) throw py::error_already_set();
  Dispatcher::instance().add_listener([](OperatorHandle) { g_generation.fetch_add(1, std::memory_order_release); });

  py::object module_name = m.attr("__name__");
  for (PyMethodDef* def : {&call_op_def, &resolve_op_def}) {
    PyObject* fn = PyCFunction_NewEx(def, nullptr, module_name.ptr());
    if (!fn) throw py::error_already_set();
    m.add_object(def->ml_name, py::reinterpret_steal<py::object>(fn));
  }
  m.def("op_names", &op_names, "The sorted base names of every registered operator ('add', 'test::double_it').");
  m.def(
      "op_schemas",
      [](const std::string& name) {
        std::vector<std::string> out;
        for (OperatorHandle op : overloads_of(name)) out.push_back(op->schema().to_string());
        return out;
      },
      py::arg("name"), "The schema texts of the overloads of a base name (empty if none).");
}

}  // namespace tessera::python
