# The sources of the GPU plugin, one list for both builds of them: backends/cuda (nvcc, CUDA) and
# backends/rocm (hipcc, HIP). Host files by path; kernels by name (src/<name>.cu). The files of
# NVIDIA's libraries are not here: the CUDA build adds conv_cudnn.cpp when cuDNN is found, and
# fft_cufft.cpp / linalg_cusolver.cpp / sort_cub.cu (cuFFT, cuSOLVER, CUB: in the toolkit).
set(TESSERA_GPU_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/src)
set(TESSERA_GPU_HOST_SOURCES)
foreach(name plugin runtime streams caching_allocator pinned_blocks memory_ops graph_ops copy_ops views elementwise_ops reduce_ops blas
             activation_ops pool_ops norm_ops channel_norm_ops loss_ops embedding_ops dropout_ops more_ops
             elementwise_more_ops reduce_more_ops factory_ops indexing_ops advanced_index_ops scan_ops bucket_ops
             flip_ops kernel_spans attention_ops optim_ops)
  list(APPEND TESSERA_GPU_HOST_SOURCES ${TESSERA_GPU_SOURCE_DIR}/${name}.cpp)
endforeach()
set(TESSERA_GPU_KERNELS elementwise reduce gemm activation pool norm channel_norm loss softmax_backward embedding
    dropout elementwise_more reduce_more factories indexing nonzero scan bucket attention optim)
# Headers every kernel includes (a change rebuilds them all).
set(TESSERA_GPU_KERNEL_HEADERS gpu.h launch.h nn_launch.h device_io.cuh map.cuh ops_launch.h order_launch.h
    row_kernels.cuh)
list(TRANSFORM TESSERA_GPU_KERNEL_HEADERS PREPEND ${TESSERA_GPU_SOURCE_DIR}/)
