# Tests of the programs (tools/) beyond their library.
#   cuda_device.sh: ringgrad-train asked for a GPU or for nccl where there is none exits 1 with a
#   clear message, in builds with and without CUDA (skipped, exit 77, where a GPU is present).
add_test(NAME tools/train_cuda_device_without_gpu
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/cuda_device.sh ${RG_MPIRUN} $<TARGET_FILE:ringgrad-train>
                 ${RG_HAVE_CUDA})
set_tests_properties(tools/train_cuda_device_without_gpu PROPERTIES LABELS "tools;mpi" TIMEOUT 300
                     ENVIRONMENT "${RG_MPI_TEST_ENV}" SKIP_RETURN_CODE 77 PROCESSORS 2)
