# Multi-host tests on a simulated cluster (scripts/sim-cluster.sh; network namespaces, needs root).
# Label "cluster". Skipped (exit 77, "SKIPPED: ..." in the output) where namespaces are not allowed.
# The benchmark of the same network, bench/cluster_bench.c, is built with the other benchmarks.
add_executable(cluster_smoke ${CMAKE_CURRENT_LIST_DIR}/cluster_smoke.c)
set_target_properties(cluster_smoke PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
target_link_libraries(cluster_smoke PRIVATE MPI::MPI_C)

set(RG_CLUSTER_TEST_ENV ${RG_TEST_ENV})
if(RG_SANITIZE)
  # Open MPI dlcloses its components in MPI_Finalize, so LeakSanitizer sees their allocations with
  # "<unknown module>" frames that no suppression matches; the slow unwinder walks on into
  # libopen-pal/libmpi, which tests/lsan.supp does suppress.
  list(TRANSFORM RG_CLUSTER_TEST_ENV REPLACE "^(LSAN_OPTIONS=.*)$" "\\1:fast_unwind_on_malloc=0")
endif()

add_test(NAME cluster/sim_cluster_smoke
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_sim_cluster.sh ${CMAKE_SOURCE_DIR}/scripts/sim-cluster.sh
                 $<TARGET_FILE:cluster_smoke>)
set_tests_properties(cluster/sim_cluster_smoke PROPERTIES LABELS "cluster;mpi" TIMEOUT 180
                     SKIP_RETURN_CODE 77 PROCESSORS 2 ENVIRONMENT "${RG_CLUSTER_TEST_ENV}")
