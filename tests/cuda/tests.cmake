# CUDA tests. The test_*.c programs are registered by cmake/tests.cmake in every build; here:
#  - the programs that need a GPU are reported by CTest as skipped (not passed) when they print
#    "SKIPPED ...: no CUDA device" (RGT_REQUIRE_CUDA in cudatest.h);
#  - test_cuda_alloc runs a second time with the caching allocator off;
#  - in CUDA builds, cuda_streams.c checks tensor/cuda/streams.h from C, and cublas_lazy.c that
#    cuBLAS is loaded on first use (tensor/cuda/cublas_lazy.c), which needs no GPU.
set(RG_CUDA_GPU_TESTS cuda/test_cuda_ops cuda/test_cuda_kernels cuda/test_cuda_alloc cuda/test_cuda_comm)
set_tests_properties(${RG_CUDA_GPU_TESTS} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED [^\n]*: no CUDA device")

add_test(NAME cuda/test_cuda_alloc_nocache COMMAND test_cuda_alloc --jobs 1)
set_tests_properties(cuda/test_cuda_alloc_nocache PROPERTIES LABELS cuda TIMEOUT 600
                     ENVIRONMENT "${RG_TEST_ENV};RG_CUDA_ALLOC_CACHE=0"
                     SKIP_REGULAR_EXPRESSION "SKIPPED [^\n]*: no CUDA device")
# A build without the CUDA backend (the sanitizer build; a machine without the toolkit) can only
# skip these, so there they are disabled: ctest lists them as "Not Run (Disabled)" instead of
# forking a process per test to skip each one (4-8 s a program under ASan).
if(NOT RG_HAVE_CUDA)
  set_tests_properties(${RG_CUDA_GPU_TESTS} cuda/test_cuda_alloc_nocache PROPERTIES DISABLED TRUE)
endif()

if(RG_HAVE_CUDA)
  add_executable(cuda_streams ${CMAKE_SOURCE_DIR}/tests/cuda/cuda_streams.c)
  set_target_properties(cuda_streams PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(cuda_streams PRIVATE rgtest PkgConfig::CRITERION)
  add_test(NAME cuda/cuda_streams COMMAND cuda_streams --jobs 1)
  set_tests_properties(cuda/cuda_streams PROPERTIES LABELS cuda TIMEOUT 600
                       ENVIRONMENT "${RG_TEST_ENV}"
                       SKIP_REGULAR_EXPRESSION "SKIPPED [^\n]*: no CUDA device")
  add_executable(cublas_lazy ${CMAKE_SOURCE_DIR}/tests/cuda/cublas_lazy.c)
  set_target_properties(cublas_lazy PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(cublas_lazy PRIVATE rgtest PkgConfig::CRITERION)
  add_test(NAME cuda/cublas_lazy COMMAND cublas_lazy)
  set_tests_properties(cuda/cublas_lazy PROPERTIES LABELS cuda TIMEOUT 600 ENVIRONMENT "${RG_TEST_ENV}")
endif()
