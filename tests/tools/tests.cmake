# Tests of the programs (tools/) beyond their library.
#   cuda_device.sh: ringgrad-train asked for a GPU or for nccl where there is none exits 1 with a
#   clear message, in builds with and without CUDA, and so does ringgrad-bench --device cuda
#   (skipped, exit 77, where a GPU is present).
set(_bench "")
if(TARGET ringgrad-bench)
  set(_bench $<TARGET_FILE:ringgrad-bench>)
endif()
add_test(NAME tools/train_cuda_device_without_gpu
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/cuda_device.sh ${RG_MPIRUN} $<TARGET_FILE:ringgrad-train>
                 ${RG_HAVE_CUDA} ${_bench})
set_tests_properties(tools/train_cuda_device_without_gpu PROPERTIES LABELS "tools;mpi" TIMEOUT 300
                     ENVIRONMENT "${RG_MPI_TEST_ENV}" SKIP_RETURN_CODE 77 PROCESSORS 2)

#   threads_env.sh: a bad RG_NUM_THREADS (abc, -3, 0, 100000) or --threads is exit 2 and a message
add_test(NAME tools/threads_env COMMAND ${CMAKE_CURRENT_LIST_DIR}/threads_env.sh $<TARGET_FILE:ringgrad-train>)
set_tests_properties(tools/threads_env PROPERTIES LABELS "tools" TIMEOUT 300)

# imagefolder_train.sh: Fashion-MNIST exported as PNG files trains through --data imagefolder on
# 1 and 2 ranks; damaged, huge, FIFO and empty-class inputs exit 1 naming the file.
add_test(NAME tools/imagefolder_train
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/imagefolder_train.sh ${RG_MPIRUN}
                 $<TARGET_FILE:ringgrad-train> $<TARGET_FILE:ringgrad-export-images>)
set_tests_properties(tools/imagefolder_train PROPERTIES LABELS "tools;mpi" TIMEOUT 600
                     ENVIRONMENT "${RG_MPI_TEST_ENV}" SKIP_RETURN_CODE 77 PROCESSORS 2)

# bench_usage.sh: ringgrad-bench's bad arguments (an unknown --only or --model, --threads 0, a
# model that cannot take the images, a batch of one image on 1x1 planes) are exit 2, not a signal
if(TARGET ringgrad-bench)
  add_test(NAME tools/bench_usage
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/bench_usage.sh $<TARGET_FILE:ringgrad-bench>)
  set_tests_properties(tools/bench_usage PROPERTIES LABELS "tools" TIMEOUT 300)
  # bench_ops.sh: --ops, the CNN step's wall time per op at 1 and 2 threads (its parts add up)
  add_test(NAME tools/bench_ops
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/bench_ops.sh $<TARGET_FILE:ringgrad-bench>)
  set_tests_properties(tools/bench_ops PROPERTIES LABELS "tools" TIMEOUT 300 PROCESSORS 2)
endif()

# small_bench_args.sh: the small MPI and loader benchmarks (bench/) refuse bad numbers, unknown
# options and missing values with exit 2 before MPI starts, and answer --help with their usage
if(TARGET allreduce_bench AND TARGET cluster_bench)
  add_test(NAME tools/small_bench_args
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/small_bench_args.sh ${CMAKE_BINARY_DIR}/bin)
  set_tests_properties(tools/small_bench_args PROPERTIES LABELS "tools" TIMEOUT 120)
endif()
