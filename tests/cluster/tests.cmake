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

# The lab scripts that run on simulated hosts (bench/lab_allreduce.sh, bench/lab_buckets.sh,
# bench/scaling_cluster.sh), in a CI-sized mode: tiny sizes and steps, results into the build
# folder. They exit 77 where the machine cannot simulate a cluster. They run beside other tests
# (they ran alone, RUN_SERIAL, with the cores a quarter busy for 40 s of each run): their
# clusters have names of their own, and they check that the scripts run and report, not speeds.
set(RG_LAB_OUT ${CMAKE_BINARY_DIR}/lab_smoke)
add_test(NAME cluster/lab_allreduce_smoke
         COMMAND ${CMAKE_SOURCE_DIR}/bench/lab_allreduce.sh --hosts 2 --rates 1gbit --min 1K
                 --max 64K --factor 8 --rounds 1 --budget 0.001 --out ${RG_LAB_OUT})
add_test(NAME cluster/lab_buckets_smoke
         COMMAND ${CMAKE_SOURCE_DIR}/bench/lab_buckets.sh --buckets 1 --repeats 1 --steps 5
                 --batch-size 16 --out ${RG_LAB_OUT})
add_test(NAME cluster/scaling_cluster_smoke
         COMMAND ${CMAKE_SOURCE_DIR}/bench/scaling_cluster.sh --hosts 2 --repeats 1 --steps 5
                 --batch-size 16 --strategies "ddp powersgd" --no-torch --out ${RG_LAB_OUT})
set_tests_properties(cluster/lab_allreduce_smoke PROPERTIES PASS_REGULAR_EXPRESSION
                     "lab_allreduce.sh: [1-9][0-9]* lines")
set_tests_properties(cluster/lab_buckets_smoke PROPERTIES PASS_REGULAR_EXPRESSION
                     "lab_buckets.sh: 2 runs")
set_tests_properties(cluster/scaling_cluster_smoke PROPERTIES PASS_REGULAR_EXPRESSION
                     "rg2-powersgd +2 ")
set_tests_properties(cluster/lab_allreduce_smoke cluster/lab_buckets_smoke
                     cluster/scaling_cluster_smoke PROPERTIES LABELS "cluster;mpi" TIMEOUT 300
                     SKIP_RETURN_CODE 77 PROCESSORS 2
                     ENVIRONMENT "${RG_CLUSTER_TEST_ENV}")
