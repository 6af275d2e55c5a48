# The instruction-set copies of the hot CPU kernels (tensor/cpu/isa_impl.h, cmake/isa.cmake).
#   <test>/isa_<set>: the kernel tests, the gradient checks and the PyTorch reference test again
#     with RG_ISA=<set>, for each set this build has (run_isa.sh: Skipped where the CPU lacks it,
#     and for the CPU's default set, which the test's own run covers).
#     test_isa.c compares the copies with each other directly. Label isa-rerun: the sanitizer run of
#     scripts/test.sh leaves these out (it checks the kernels of the CPU's default set).
#   tensor/isa_objects: no wide vector instructions outside the dispatched kernels (check_isa.sh).
#   tensor/isa_bad_env, tensor/isa_missing_set: an unknown RG_ISA, or one naming a set this build
#     lacks, is a clear error listing the sets it runs.
set(RG_ISA_RERUN tensor/test_conv2d tensor/test_elementwise tensor/test_kernels
    tensor/test_dropout tensor/test_maxpool2d tensor/test_batchnorm2d tensor/test_bcast tensor/test_reduce
    tensor/test_cross_entropy tensor/test_matmul autograd/test_gradcheck layers/test_layers
    models/test_reference optim/test_optim dist/test_dist)
foreach(isa ${RG_ISAS})
  foreach(t ${RG_ISA_RERUN})
    get_filename_component(_name ${t} NAME)
    if(NOT TARGET ${_name})
      continue()
    endif()
    add_test(NAME ${t}/isa_${isa}
             COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_isa.sh ${isa} $<TARGET_FILE:ringgrad-bench>
                     $<TARGET_FILE:${_name}> --jobs 1)
    get_filename_component(_module ${t} DIRECTORY)
    set_tests_properties(${t}/isa_${isa} PROPERTIES LABELS "${_module};isa;isa-rerun" TIMEOUT 600
                         SKIP_RETURN_CODE 77 ENVIRONMENT "${RG_TEST_ENV}")
  endforeach()
endforeach()

# The optimizer tests compare the backend's steps with rg_sgd_update / rg_adam_update evaluated in
# the test itself, bit for bit; tensor/cpu/optim.c is compiled without fused multiply-adds, and so
# must the tests be: with -DRG_NATIVE=ON (-march=native, FMA) GCC would otherwise contract the
# reference formula and the two differ in the last bit.
set_source_files_properties(${CMAKE_SOURCE_DIR}/tests/tensor/test_isa.c
                            ${CMAKE_SOURCE_DIR}/tests/tensor/test_kernels.c
                            PROPERTIES COMPILE_OPTIONS -ffp-contract=off)

add_test(NAME tensor/isa_objects COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_isa.sh ${CMAKE_BINARY_DIR})
set_tests_properties(tensor/isa_objects PROPERTIES LABELS "tensor;isa;san-twin" SKIP_RETURN_CODE 77)

add_test(NAME tensor/isa_bad_env COMMAND ${CMAKE_COMMAND} -E env RG_ISA=avx9000
                                         $<TARGET_FILE:ringgrad-bench> --only peak --iters 1)
set_tests_properties(tensor/isa_bad_env PROPERTIES LABELS "tensor;isa" WILL_FAIL FALSE
                     PASS_REGULAR_EXPRESSION "RG_ISA=avx9000: unknown instruction set \\(expected one of: [a-z0-9, ]+\\)")
# A set the build lacks is an error naming the sets it has, not a silent fallback.
if(NOT "native" IN_LIST RG_ISAS)
  add_test(NAME tensor/isa_missing_set COMMAND ${CMAKE_COMMAND} -E env RG_ISA=native
                                               $<TARGET_FILE:ringgrad-bench> --only peak --iters 1)
  set_tests_properties(tensor/isa_missing_set PROPERTIES LABELS "tensor;isa"
                       PASS_REGULAR_EXPRESSION "RG_ISA=native: this build has no kernels for it \\(this one runs: generic")
endif()

# Sanitizer builds: the convolution tiles run uninstrumented and check their regions once per call
# (tensor/cpu/conv2d_kernels.c). Buffers that fit pass; each one a float short must be reported.
# It calls the generic set's tile, which a -DRG_NATIVE=ON build lacks.
if(RG_SANITIZE AND "generic" IN_LIST RG_ISAS)
  add_executable(asan_tile_check ${CMAKE_CURRENT_LIST_DIR}/asan_tile_check.c)
  target_link_libraries(asan_tile_check PRIVATE ringgrad)
  target_include_directories(asan_tile_check PRIVATE ${CMAKE_SOURCE_DIR})
  set_target_properties(asan_tile_check PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME tensor/asan_tile_check/fits COMMAND asan_tile_check 0)
  set_tests_properties(tensor/asan_tile_check/fits PROPERTIES LABELS "tensor" ENVIRONMENT
                       "${RG_TEST_ENV}" PASS_REGULAR_EXPRESSION "case 0: tile within bounds")
  foreach(case 1 2 3 4 5)
    add_test(NAME tensor/asan_tile_check/short${case} COMMAND asan_tile_check ${case})
    set_tests_properties(tensor/asan_tile_check/short${case} PROPERTIES LABELS "tensor"
                         ENVIRONMENT "${RG_TEST_ENV}"
                         PASS_REGULAR_EXPRESSION "AddressSanitizer: heap-buffer-overflow"
                         FAIL_REGULAR_EXPRESSION "tile within bounds")
  endforeach()
endif()
