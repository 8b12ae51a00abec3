#pragma once
// Shared pieces of the simulated-device plugin: the device state, turning a tensor into bytes
// the plugin may touch, element loads/stores in any dtype, and a strided walk with broadcasting.
#include "arena.h"

#include <tessera/sdk/plugin.h>

#include <array>
#include <span>
#include <vector>

#ifndef SIMDEV_NAME
#define SIMDEV_NAME "simdev"
#endif
#ifndef SIMDEV_MEMORY_MB
#define SIMDEV_MEMORY_MB 1024
#endif

namespace simdev {
namespace sdk = tessera::sdk;

inline constexpr int32_t kDeviceCount = 2;

// Set once during registration.
struct DeviceState {
  ts_dispatch_key key = -1;   // the dispatch key the host gave this device type
  int32_t type = -1;          // its device type id (learned from the first tensor or Device argument)
};
DeviceState& state();
ts_device_desc device_desc();  // what register_device receives
Arena& arena(int32_t index);
bool is_this_device(ts_device d);  // true for our device type (any index)

// The tensor's first element as bytes the plugin can read and write: an arena mapping for our
// device, the pointer itself for a host-accessible (CPU) tensor. nullptr for an empty tensor.
char* bytes(const sdk::TensorRef& t);
// Every tensor argument must be on `device`, except 0-dim CPU tensors (scalars), as in PyTorch.
void check_same_device(const char* op, ts_device device, std::initializer_list<const sdk::TensorRef*> tensors);
std::string device_str(ts_device d);

// Values are computed in double (floating results) or int64 (integral and bool results).
double load_double(const char* p, int32_t dtype);
int64_t load_int(const char* p, int32_t dtype);
void store(char* p, int32_t dtype, double v);
void store(char* p, int32_t dtype, int64_t v);

// An operand of a walk: its bytes, dtype, and element strides laid out over the walk's shape
// (0 along broadcast dimensions).
struct Operand {
  char* data = nullptr;
  int32_t dtype = TS_FLOAT32;
  int64_t itemsize = 4;
  std::vector<int64_t> strides;
};
// Lays `t` over `shape` (numpy broadcasting: align right, size-1 or missing dims repeat).
Operand broadcast_operand(const char* op, const sdk::TensorRef& t, std::span<const int64_t> shape);
std::vector<int64_t> broadcast_shapes(const char* op, std::span<const int64_t> a, std::span<const int64_t> b);
std::vector<int64_t> contiguous_strides(std::span<const int64_t> shape);
int64_t numel_of(std::span<const int64_t> shape);

// Calls fn(ptrs) for every index of `shape` in row-major order, ptrs[k] pointing at operand k's element.
template <size_t N, class Fn>
void walk(std::span<const int64_t> shape, const std::array<Operand*, N>& ops, Fn fn) {
  int64_t n = numel_of(shape);
  if (n == 0) return;
  size_t nd = shape.size();
  std::vector<int64_t> index(nd, 0);
  std::array<char*, N> ptr;
  for (size_t k = 0; k < N; ++k) ptr[k] = ops[k]->data;
  for (int64_t i = 0; i < n; ++i) {
    fn(ptr);
    for (size_t d = nd; d-- > 0;) {
      bool wrap = ++index[d] == shape[d];
      for (size_t k = 0; k < N; ++k)
        ptr[k] += (wrap ? -(shape[d] - 1) : 1) * ops[k]->strides[d] * ops[k]->itemsize;
      if (!wrap) break;
      index[d] = 0;
    }
  }
}

// Streams (streams.cpp): each stream's simulated clock, the desc's 1.3 functions.
void add_stream_functions(ts_device_desc& desc);
// Moves the calling thread's current stream of device `index` on by one kernel's simulated time.
void note_kernel(int32_t index);
// Blocks until the calling thread's current stream of `index` has done its work (blocking copies).
void wait_current_stream(int32_t index);
// Blocks until every stream of `index` has done its work.
void wait_device(int32_t index);

// Registers kernels whose work is queued on the current stream: after a kernel succeeds, the
// current stream of the device its results live on moves on by one kernel's simulated time.
class Registrar : public sdk::Registrar {
 public:
  explicit Registrar(const sdk::Registrar& reg) : sdk::Registrar(reg) {}
  void kernel(const char* op, ts_dispatch_key key, sdk::KernelFn fn);
  void untimed_kernel(const char* op, ts_dispatch_key key, sdk::KernelFn fn) { sdk::Registrar::kernel(op, key, fn); }
};

// Registration of each kernel family (one file each).
void register_stream_ops(Registrar& reg);
void register_factories(Registrar& reg, ts_dispatch_key key);
void register_elementwise(Registrar& reg, ts_dispatch_key key);
void register_reductions(Registrar& reg, ts_dispatch_key key);
void register_linalg(Registrar& reg, ts_dispatch_key key);
void register_copies_and_views(Registrar& reg, ts_dispatch_key key);
void register_custom_ops(Registrar& reg, ts_dispatch_key key);

// Element-wise binary arithmetic (a op alpha*b), shared by the aten kernels and the custom op.
// `b` is a tensor, or a Scalar argument (a Python number, promoted as PyTorch's wrapped numbers).
enum class BinaryOp { Add, Sub, Mul, Div };
struct BinaryRhs {
  const sdk::TensorRef* tensor = nullptr;
  sdk::ScalarArg scalar;
};
sdk::TensorRef binary(const char* op_name, ts_call call, const sdk::TensorRef& a, const BinaryRhs& b, BinaryOp op,
                      sdk::ScalarArg alpha = {sdk::ScalarArg::Int, 1, 0});

}  // namespace simdev
