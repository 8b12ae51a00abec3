#pragma once
// Device-side loads and stores in any ts_dtype (converted to/from the compute type), the
// offsets of a linear index in a loop, and the launch configuration. Shared by the .cu files.
#include "launch.h"
#include "launch_shape.h"

#include <stdexcept>
#include <string>

namespace tessera::gpu {

// ts_dtype codes (abi.h), repeated here so device code needs no host header.
enum : int32_t { kBool = 0, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64 };

template <class C>
GPU_D C load(const char* p, int32_t dtype) {
  switch (dtype) {
    case kBool: return C(*reinterpret_cast<const bool*>(p) ? 1 : 0);
    case kUInt8: return C(*reinterpret_cast<const uint8_t*>(p));
    case kInt8: return C(*reinterpret_cast<const int8_t*>(p));
    case kInt16: return C(*reinterpret_cast<const int16_t*>(p));
    case kInt32: return C(*reinterpret_cast<const int32_t*>(p));
    case kInt64: return C(*reinterpret_cast<const int64_t*>(p));
    case kFloat16: return C(half_bits_to_float(*reinterpret_cast<const uint16_t*>(p)));
    case kBFloat16: return C(bf16_bits_to_float(*reinterpret_cast<const uint16_t*>(p)));
    case kFloat32: return C(*reinterpret_cast<const float*>(p));
    default: return C(*reinterpret_cast<const double*>(p));
  }
}

template <class C>
GPU_D void store(char* p, int32_t dtype, C v) {
  switch (dtype) {
    case kBool: *reinterpret_cast<bool*>(p) = v != C(0); break;
    case kUInt8: *reinterpret_cast<uint8_t*>(p) = uint8_t(v); break;
    case kInt8: *reinterpret_cast<int8_t*>(p) = int8_t(v); break;
    case kInt16: *reinterpret_cast<int16_t*>(p) = int16_t(v); break;
    case kInt32: *reinterpret_cast<int32_t*>(p) = int32_t(v); break;
    case kInt64: *reinterpret_cast<int64_t*>(p) = int64_t(v); break;
    case kFloat16: *reinterpret_cast<uint16_t*>(p) = float_to_half_bits(float(v)); break;
    case kBFloat16: *reinterpret_cast<uint16_t*>(p) = float_to_bf16_bits(float(v)); break;
    case kFloat32: *reinterpret_cast<float*>(p) = float(v); break;
    default: *reinterpret_cast<double*>(p) = double(v); break;
  }
}

GPU_HD int32_t itemsize_of(int32_t dtype) {
  return dtype == kInt64 || dtype == kFloat64 ? 8 : dtype == kInt32 || dtype == kFloat32 ? 4
         : dtype == kInt16 || dtype == kFloat16 || dtype == kBFloat16 ? 2 : 1;
}

// Element offsets of every operand for linear index i (row-major over the loop's sizes).
template <class I, int N>
GPU_D void offsets(const Loop& L, I i, I (&off)[N]) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = L.ndim - 1; d >= 0; --d) {
    I size = I(L.sizes[d]);
    I idx = i % size;
    i /= size;
    for (int k = 0; k < N; ++k) off[k] += idx * I(L.ops[k].strides[d]);
  }
}

inline void check_launch(const char* what) {
  gpuError_t e = gpuGetLastError();
  if (e != gpuSuccess)
    throw std::runtime_error(std::string(GPU_BACKEND_NAME ": launching ") + what + " failed: " + gpuGetErrorString(e));
}

}  // namespace tessera::gpu
