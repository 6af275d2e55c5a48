# The CUDA backend: nvcc for tensor/cuda/*.cu, cuBLAS, cuDNN 9 and NCCL from the toolkit.
# Targets sm_80 and sm_90 as real code plus compute_90 PTX for later GPUs.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_FLAGS_RELEASE "-O3 -g -lineinfo")

find_library(RG_CUDNN_LIB cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib REQUIRED)
find_library(RG_NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
             ${CUDAToolkit_LIBRARY_ROOT}/lib64 REQUIRED)

# rg_add_cuda(target scope): scope is PUBLIC for the static library (its users link the CUDA
# libraries too) and PRIVATE for the shared one.
function(rg_add_cuda target scope)
  target_compile_definitions(${target} PUBLIC RG_CUDA=1)
  # Warnings are errors on the host side of .cu files and in device code alike.
  # C++20 for designated initialisers (the backend table reads like the C ones); CMake 3.25 does
  # not know nvcc's C++20 flag, so it is passed directly.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 -Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror,-Wno-unused-parameter>)
  # cuBLAS is not linked: tensor/cuda/cublas_lazy.c loads it on first use (dlopen), from its
  # soname or else from this toolkit's library folder.
  target_compile_definitions(${target} PRIVATE RG_CUDA_LIBDIR="${CUDAToolkit_LIBRARY_DIR}")
  target_link_libraries(${target} ${scope} CUDA::cudart ${RG_CUDNN_LIB} ${RG_NCCL_LIB}
                        ${CMAKE_DL_LIBS})
  set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
endfunction()
