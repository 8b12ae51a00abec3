#pragma once
// Boxing between the typed C++ entry points and the C ABI's boxed stack. Arguments are
// borrowed: lists and strings point into the caller's objects for the duration of the call.
#include <tessera/dispatcher.h>
#include <tessera/scalar.h>
#include <tessera/tensor.h>

#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace tessera {

// A list of tensors is passed as an array of handles: a Tensor is exactly one pointer.
static_assert(sizeof(Tensor) == sizeof(ts_tensor), "Tensor must be layout-compatible with ts_tensor");

namespace detail {

inline void box(ts_value& v, const Tensor& t) {
  v.tag = t.defined() ? TS_VALUE_TENSOR : TS_VALUE_NONE;
  v.u.tensor = t.handle();
}
inline void box(ts_value& v, int64_t i) { v.tag = TS_VALUE_INT; v.u.i = i; }
inline void box(ts_value& v, double d) { v.tag = TS_VALUE_DOUBLE; v.u.d = d; }
inline void box(ts_value& v, bool b) { v.tag = TS_VALUE_BOOL; v.u.b = b; }
inline void box(ts_value& v, ScalarType t) { v.tag = TS_VALUE_DTYPE; v.u.i = int64_t(t); }
inline void box(ts_value& v, Device d) { v.tag = TS_VALUE_DEVICE; v.u.device = d.to_abi(); }
inline void box(ts_value& v, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: box(v, s.to_bool()); break;
    case Scalar::Kind::Int: box(v, s.to_int()); break;
    case Scalar::Kind::Double: box(v, s.to_double()); break;
  }
}
inline void box(ts_value& v, std::string_view s) { v.tag = TS_VALUE_STRING; v.u.str = s.data(); }  // NUL-terminated by caller
inline void box(ts_value& v, const std::string& s) { v.tag = TS_VALUE_STRING; v.u.str = s.c_str(); }
inline void box(ts_value& v, const std::vector<int64_t>& l) {
  v.tag = TS_VALUE_INT_LIST;
  v.u.ints.data = l.data();
  v.u.ints.size = int64_t(l.size());
}
inline void box(ts_value& v, const std::vector<double>& l) {
  v.tag = TS_VALUE_DOUBLE_LIST;
  v.u.doubles.data = l.data();
  v.u.doubles.size = int64_t(l.size());
}
inline void box(ts_value& v, const std::vector<Tensor>& l) {
  v.tag = TS_VALUE_TENSOR_LIST;
  v.u.tensors.data = reinterpret_cast<const ts_tensor*>(l.data());
  v.u.tensors.size = int64_t(l.size());
}
template <class T>
void box(ts_value& v, const std::optional<T>& o) {
  if (o) box(v, *o);
  else v.tag = TS_VALUE_NONE;
}

inline Tensor unbox_tensor(const ts_value& v) {
  return v.tag == TS_VALUE_TENSOR ? Tensor::adopt(v.u.tensor) : Tensor();
}
template <class T> T unbox(const ts_value& v);
template <> inline int64_t unbox<int64_t>(const ts_value& v) { return v.u.i; }
template <> inline double unbox<double>(const ts_value& v) { return v.tag == TS_VALUE_INT ? double(v.u.i) : v.u.d; }
template <> inline bool unbox<bool>(const ts_value& v) { return v.u.b != 0; }
template <> inline Tensor unbox<Tensor>(const ts_value& v) { return unbox_tensor(v); }
template <> inline Scalar unbox<Scalar>(const ts_value& v) {
  if (v.tag == TS_VALUE_DOUBLE) return Scalar(v.u.d);
  if (v.tag == TS_VALUE_BOOL) return Scalar(v.u.b != 0);
  return Scalar(v.u.i);
}
// A Tensor[] return: the receiver takes over each element's reference (null: undefined).
template <> inline std::vector<Tensor> unbox<std::vector<Tensor>>(const ts_value& v) {
  std::vector<Tensor> out;
  if (v.tag != TS_VALUE_TENSOR_LIST) return out;
  for (int64_t i = 0; i < v.u.tensors.size; ++i)
    out.push_back(v.u.tensors.data[i] ? Tensor::adopt(v.u.tensors.data[i]) : Tensor());
  return out;
}

// The handle of a built-in operator, resolved once per entry point (initialises the runtime).
OperatorHandle builtin_operator(std::string_view name);
// Dispatches and checks that the kernel left `n_returns` values.
void call(OperatorHandle op, ts_stack* stack, int n_returns);

}  // namespace detail
}  // namespace tessera
