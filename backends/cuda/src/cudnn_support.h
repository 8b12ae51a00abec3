#pragma once
// What the cuDNN users of the CUDA plugin share (conv_cudnn.cpp, rnn_cudnn.cpp): status checks,
// one handle per (thread, device) set to the current stream, RAII descriptors, data types.
#include "cuda_plugin.h"

#include <cudnn.h>

namespace tessera::gpu {

// Raises the plugin's error for a failed cuDNN call (out of memory as TS_ERROR_OUT_OF_MEMORY).
void check_dnn(cudnnStatus_t s, const char* what);

// The calling thread's handle for device `index` (the current device), set to its current stream.
cudnnHandle_t handle_for(int32_t index);

// One cuDNN descriptor, created and destroyed with the object.
template <class Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
struct Descriptor {
  Handle d = nullptr;
  Descriptor() { check_dnn(Create(&d), "creating a cuDNN descriptor"); }
  ~Descriptor() { Destroy(d); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
};
using TensorDesc = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;

// cuDNN's data type for a tessera floating dtype.
cudnnDataType_t dnn_type(int32_t dtype);

}  // namespace tessera::gpu
