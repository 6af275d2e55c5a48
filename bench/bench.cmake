# The benchmark programs, all built into build/bin next to ringgrad-bench (bench/ringgrad-bench.c,
# built by the top-level CMakeLists with the tools). Each file's header says how to run it; the
# scripts beside them (cnn_step.sh, overlap.sh, scaling.sh, ...) run them against their baselines.
#   allreduce_bench  ringgrad's communicators and the DDP buckets against raw MPI_Allreduce
#   collectives_bench  reduce-scatter, allgather and broadcast: the communicators against raw MPI
#   overlap_bench    DDP with and without overlap against compute alone (run by overlap.sh)
#   cluster_bench    what a (simulated) network gives MPI: ping-pong, exchange, allreduce
#   loader_bench     how fast the data path delivers batches
foreach(p allreduce_bench collectives_bench overlap_bench loader_bench)
  add_executable(${p} ${CMAKE_CURRENT_LIST_DIR}/${p}.c)
  target_link_libraries(${p} PRIVATE ringgrad)
  target_include_directories(${p} PRIVATE ${CMAKE_SOURCE_DIR})
endforeach()
# Plain MPI, no ringgrad: the network's own numbers.
add_executable(cluster_bench ${CMAKE_CURRENT_LIST_DIR}/cluster_bench.c)
target_link_libraries(cluster_bench PRIVATE MPI::MPI_C)
target_include_directories(cluster_bench PRIVATE ${CMAKE_SOURCE_DIR})
