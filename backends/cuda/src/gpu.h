#pragma once
// The portability layer: one set of gpu* names over the CUDA runtime or HIP, so every source of
// the CUDA plugin also compiles with hipcc for the ROCm plugin (TESSERA_GPU_HIP defined there).
// Host files include it too (the runtime API only); device code sees the half/bfloat16 helpers.
#include <cstdint>

#if defined(TESSERA_GPU_HIP)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#define GPU_BACKEND_NAME "hip"
using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using gpuDeviceProp = hipDeviceProp_t;
inline constexpr gpuError_t gpuSuccess = hipSuccess;
inline constexpr gpuError_t gpuErrorMemoryAllocation = hipErrorOutOfMemory;
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDevice hipGetDevice
#define gpuSetDevice hipSetDevice
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuGetErrorString hipGetErrorString
#define gpuGetErrorName hipGetErrorName
#define gpuGetLastError hipGetLastError
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuRuntimeGetVersion hipRuntimeGetVersion
#define gpuDriverGetVersion hipDriverGetVersion
// Streams, events, page-locked host memory (ABI 1.3).
using gpuEvent_t = hipEvent_t;
using gpuPointerAttributes = hipPointerAttribute_t;
#if HIP_VERSION_MAJOR >= 6
#define GPU_POINTER_MEMORY_TYPE(attr) ((attr).type)
#else
#define GPU_POINTER_MEMORY_TYPE(attr) ((attr).memoryType)  // renamed `type` in ROCm 6
#endif
inline constexpr gpuError_t gpuErrorNotReady = hipErrorNotReady;
inline constexpr hipMemoryType gpuMemoryTypeHost = hipMemoryTypeHost;
#define gpuStreamCreateWithPriority hipStreamCreateWithPriority
#define gpuDeviceGetStreamPriorityRange hipDeviceGetStreamPriorityRange
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamQuery hipStreamQuery
#define gpuStreamWaitEvent hipStreamWaitEvent
#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventDefault hipEventDefault
#define gpuEventDisableTiming hipEventDisableTiming
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventQuery hipEventQuery
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuHostAlloc hipHostMalloc
#define gpuHostAllocPortable hipHostMallocPortable
#define gpuFreeHost hipHostFree
#define gpuPointerGetAttributes hipPointerGetAttributes
// Graphs (torch.cuda.CUDAGraph): stream capture, instantiation, replay.
using gpuGraph_t = hipGraph_t;
using gpuGraphExec_t = hipGraphExec_t;
using gpuStreamCaptureStatus = hipStreamCaptureStatus;
using gpuStreamCaptureMode = hipStreamCaptureMode;
inline constexpr gpuStreamCaptureStatus gpuStreamCaptureStatusNone = hipStreamCaptureStatusNone;
inline constexpr gpuStreamCaptureMode gpuStreamCaptureModeGlobal = hipStreamCaptureModeGlobal;
inline constexpr gpuStreamCaptureMode gpuStreamCaptureModeThreadLocal = hipStreamCaptureModeThreadLocal;
inline constexpr gpuStreamCaptureMode gpuStreamCaptureModeRelaxed = hipStreamCaptureModeRelaxed;
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuStreamIsCapturing hipStreamIsCapturing
#define gpuThreadExchangeStreamCaptureMode hipThreadExchangeStreamCaptureMode
#define gpuGraphInstantiateWithFlags hipGraphInstantiateWithFlags
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphGetNodes hipGraphGetNodes
#else
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define GPU_BACKEND_NAME "cuda"
using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using gpuDeviceProp = cudaDeviceProp;
inline constexpr gpuError_t gpuSuccess = cudaSuccess;
inline constexpr gpuError_t gpuErrorMemoryAllocation = cudaErrorMemoryAllocation;
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDevice cudaGetDevice
#define gpuSetDevice cudaSetDevice
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuGetErrorString cudaGetErrorString
#define gpuGetErrorName cudaGetErrorName
#define gpuGetLastError cudaGetLastError
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuRuntimeGetVersion cudaRuntimeGetVersion
#define gpuDriverGetVersion cudaDriverGetVersion
// Streams, events, page-locked host memory (ABI 1.3).
using gpuEvent_t = cudaEvent_t;
using gpuPointerAttributes = cudaPointerAttributes;
#define GPU_POINTER_MEMORY_TYPE(attr) ((attr).type)
inline constexpr gpuError_t gpuErrorNotReady = cudaErrorNotReady;
inline constexpr cudaMemoryType gpuMemoryTypeHost = cudaMemoryTypeHost;
#define gpuStreamCreateWithPriority cudaStreamCreateWithPriority
#define gpuDeviceGetStreamPriorityRange cudaDeviceGetStreamPriorityRange
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamQuery cudaStreamQuery
#define gpuStreamWaitEvent cudaStreamWaitEvent
#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventDefault cudaEventDefault
#define gpuEventDisableTiming cudaEventDisableTiming
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventQuery cudaEventQuery
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuHostAlloc cudaHostAlloc
#define gpuHostAllocPortable cudaHostAllocPortable
#define gpuFreeHost cudaFreeHost
#define gpuPointerGetAttributes cudaPointerGetAttributes
// Graphs (torch.cuda.CUDAGraph): stream capture, instantiation, replay.
using gpuGraph_t = cudaGraph_t;
using gpuGraphExec_t = cudaGraphExec_t;
using gpuStreamCaptureStatus = cudaStreamCaptureStatus;
using gpuStreamCaptureMode = cudaStreamCaptureMode;
inline constexpr gpuStreamCaptureStatus gpuStreamCaptureStatusNone = cudaStreamCaptureStatusNone;
inline constexpr gpuStreamCaptureMode gpuStreamCaptureModeGlobal = cudaStreamCaptureModeGlobal;
inline constexpr gpuStreamCaptureMode gpuStreamCaptureModeThreadLocal = cudaStreamCaptureModeThreadLocal;
inline constexpr gpuStreamCaptureMode gpuStreamCaptureModeRelaxed = cudaStreamCaptureModeRelaxed;
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuStreamIsCapturing cudaStreamIsCapturing
#define gpuThreadExchangeStreamCaptureMode cudaThreadExchangeStreamCaptureMode
#define gpuGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphGetNodes cudaGraphGetNodes
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
#define GPU_HD __host__ __device__ __forceinline__
#define GPU_D __device__ __forceinline__

namespace tessera::gpu {
// float16 and bfloat16 are stored as raw bits; arithmetic happens in float.
GPU_D float half_bits_to_float(uint16_t bits) {
  __half_raw r;
  r.x = bits;
  return __half2float(__half(r));
}
GPU_D uint16_t float_to_half_bits(float f) {
  __half_raw r = __half_raw(__float2half_rn(f));
  return r.x;
}
#if defined(TESSERA_GPU_HIP)
// HIP's bfloat16 header differs between releases: the conversion is a few bit operations.
GPU_D float bf16_bits_to_float(uint16_t bits) { return __uint_as_float(uint32_t(bits) << 16); }
GPU_D uint16_t float_to_bf16_bits(float f) {
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);                                          // round to nearest even
  return uint16_t(x >> 16);
}
#else
GPU_D float bf16_bits_to_float(uint16_t bits) {
  __nv_bfloat16_raw r;
  r.x = bits;
  return __bfloat162float(__nv_bfloat16(r));
}
GPU_D uint16_t float_to_bf16_bits(float f) {
  __nv_bfloat16_raw r = __nv_bfloat16_raw(__float2bfloat16_rn(f));
  return r.x;
}
#endif
}  // namespace tessera::gpu
#endif
