#pragma once
// The DLPack structs, as the DLPack 1.0 specification defines them (https://dmlc.github.io/dlpack),
// written out here for tessera._C's interop (interop.cpp). Layouts are those of the C header
// of the specification: they cross into other libraries (NumPy, PyTorch, JAX, CuPy) through
// PyCapsules named "dltensor" (DLManagedTensor, legacy) and "dltensor_versioned"
// (DLManagedTensorVersioned, 1.0). A consumer renames the capsule "used_dltensor[_versioned]"
// and from then on owns the tensor: it calls `deleter` once when done.
#include <cstddef>
#include <cstdint>

namespace tessera::python::dlpack {

inline constexpr uint32_t kMajorVersion = 1;
inline constexpr uint32_t kMinorVersion = 0;

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

// Device types (DLDeviceType, a C enum: int sized).
enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
};

struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

// Type codes (DLDataTypeCode); DLDataType stores the code in a uint8_t.
enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
};

struct DLDataType {
  uint8_t code;    // DLDataTypeCode
  uint8_t bits;    // bits per lane: 8, 16, 32, 64 (bool is 8)
  uint16_t lanes;  // 1 for scalar types
};

// Shape and strides count elements; strides NULL means row-major contiguous. The first
// element is at (char*)data + byte_offset.
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};

// The legacy (pre-1.0) managed tensor: capsule name "dltensor".
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// Flags of DLManagedTensorVersioned.
inline constexpr uint64_t DLPACK_FLAG_BITMASK_READ_ONLY = 1ull << 0;  // the consumer must not write
inline constexpr uint64_t DLPACK_FLAG_BITMASK_IS_COPIED = 1ull << 1;  // the producer made a copy

// The 1.0 managed tensor: capsule name "dltensor_versioned". `version` comes first so that a
// consumer can refuse a major version it does not know before reading anything else.
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

// The layout of the specification's C header on 64-bit platforms.
static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4);
static_assert(sizeof(void*) != 8 || (sizeof(DLTensor) == 48 && offsetof(DLTensor, shape) == 24));
static_assert(sizeof(void*) != 8 || (sizeof(DLManagedTensor) == 64 && sizeof(DLManagedTensorVersioned) == 80 &&
                                     offsetof(DLManagedTensorVersioned, dl_tensor) == 32));

}  // namespace tessera::python::dlpack
