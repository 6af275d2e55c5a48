# Multi-host tests on a simulated cluster (scripts/sim-cluster.sh; network namespaces, needs root).
# Label "cluster". Skipped (exit 77, "SKIPPED: ..." in the output) where namespaces are not allowed.
foreach(p cluster_smoke bench_cluster)
  add_executable(${p} ${CMAKE_CURRENT_LIST_DIR}/${p}.c)
  set_target_properties(${p} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${p} PRIVATE MPI::MPI_C)
endforeach()

add_test(NAME cluster/sim_cluster_smoke
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_sim_cluster.sh ${CMAKE_SOURCE_DIR}/scripts/sim-cluster.sh
                 $<TARGET_FILE:cluster_smoke>)
set_tests_properties(cluster/sim_cluster_smoke PROPERTIES LABELS "cluster;mpi" TIMEOUT 180
                     SKIP_RETURN_CODE 77 PROCESSORS 2 ENVIRONMENT "${RG_TEST_ENV}")
