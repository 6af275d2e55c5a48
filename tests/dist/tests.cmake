# dist tests beyond the auto-registered test_*.c and mpi_*.c (see cmake/tests.cmake):
#   - fault tests: a rank that dies, exits, trips a check, stalls or leaves early must end the
#     whole job with a non-zero exit and a message, within a time limit (fault.sh, fault_prog.c);
#   - the timeline of a 3-rank run must be valid Chrome-trace JSON (check_timeline.py);
#   - the allreduce benchmark must build and run (bench/allreduce_bench.c).

add_executable(fault_prog ${CMAKE_CURRENT_LIST_DIR}/fault_prog.c)
set_target_properties(fault_prog PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
target_link_libraries(fault_prog PRIVATE ringgrad)

# name  np  seconds  pattern the output must contain
set(RG_FAULTS
  "kill|3|20|exited on signal 9"
  "exit|3|20|exited with non-zero status"
  "exit0|3|20|exiting improperly"
  "check|3|20|ringgrad: rg_comm_broadcast: root: rank 3 is not in a world of 3"
  "stall|3|30|not joined yet: rank 2"
  "early|3|20|rank 2 called close"
  "freeze|3|30|ringgrad: stall: .*(not joined yet: rank 2|after every rank joined it)")
foreach(f ${RG_FAULTS})
  string(REPLACE "|" ";" f "${f}")
  list(GET f 0 mode)
  list(GET f 1 np)
  list(GET f 2 secs)
  list(SUBLIST f 3 -1 pat)
  string(REPLACE ";" "|" pat "${pat}")
  add_test(NAME dist/fault_${mode}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/fault.sh ${RG_MPIRUN} $<TARGET_FILE:fault_prog>
                   ${mode} ${np} ${secs} "${pat}")
  # Only the stall test shortens the stall times: the others must end through mpirun alone.
  set(env ${RG_MPI_TEST_ENV})
  if(mode STREQUAL "stall" OR mode STREQUAL "freeze")
    list(APPEND env "RG_STALL_SECONDS=1" "RG_STALL_ABORT_SECONDS=4")
  endif()
  set_tests_properties(dist/fault_${mode} PROPERTIES LABELS "dist;mpi" TIMEOUT 120
                       ENVIRONMENT "${env}" PROCESSORS ${np})
endforeach()

# A smoke test that the allreduce benchmark (bench/allreduce_bench.c) runs and that every method's
# result is right (it checks each before timing). 0.5 s alone, but every method busy-polls: with
# two ranks sharing 2 cores with 4 other busy processes it once took 49 s, hence the 300 s limit.
add_test(NAME dist/allreduce_bench_smoke
         COMMAND ${RG_MPIRUN} -np 2 $<TARGET_FILE:allreduce_bench> --min 4 --max 1M --factor 16
                 --rounds 1 --budget 0.001)
set_tests_properties(dist/allreduce_bench_smoke PROPERTIES LABELS "dist;mpi" TIMEOUT 300
                     ENVIRONMENT "${RG_MPI_TEST_ENV}" PROCESSORS 2)

# The same for bench/collectives_bench.c: every method's result is checked before it is timed.
add_test(NAME dist/collectives_bench_smoke
         COMMAND ${RG_MPIRUN} -np 3 $<TARGET_FILE:collectives_bench> --min 96 --max 96K --factor 32
                 --rounds 1 --iters 1)
set_tests_properties(dist/collectives_bench_smoke PROPERTIES LABELS "dist;mpi" TIMEOUT 300
                     ENVIRONMENT "${RG_MPI_TEST_ENV}" PROCESSORS 2)

# A smoke test that the overlap benchmark (bench/overlap_bench.c, run by bench/overlap.sh) trains
# its three DDP modes side by side and reports.
add_test(NAME dist/overlap_bench_smoke
         COMMAND ${RG_MPIRUN} -np 2 $<TARGET_FILE:overlap_bench> --steps 1 --warmup 0 --batch-size 4)
set_tests_properties(dist/overlap_bench_smoke PROPERTIES LABELS "dist;mpi" TIMEOUT 120
                     ENVIRONMENT "${RG_MPI_TEST_ENV}" PROCESSORS 2
                     PASS_REGULAR_EXPRESSION "hidden = ")

# The collectives across 3 simulated hosts over TCP (scripts/sim-cluster.sh: network namespaces,
# 10 Gbit/s links). Needs root and network namespaces; skipped where the machine has neither.
# It runs beside other tests: each simulated cluster has namespaces of its own name (the run's
# PID), and nothing in it measures time.
add_test(NAME dist/sim_cluster_collectives
         COMMAND ${CMAKE_SOURCE_DIR}/scripts/sim-cluster.sh run 3 --rate 10gbit -- -np 3 $<TARGET_FILE:mpi_collectives>)
set_tests_properties(dist/sim_cluster_collectives PROPERTIES LABELS "dist;mpi;sim" TIMEOUT 600
                     ENVIRONMENT "${RG_MPI_TEST_ENV}" SKIP_RETURN_CODE 77
                     PROCESSORS 3)

# Collectives and DDP on GPUs (mpi_nccl.c, mpi_nccl_ddp.c): without a GPU for every rank of a
# host they print "SKIPPED ...: no CUDA device ..." and exit 77, which CTest reports as skipped.
# In a build without the CUDA backend they can do nothing else, and are disabled (as the GPU
# programs of tests/cuda are).
foreach(t mpi_nccl mpi_nccl_ddp)
  foreach(np 2 3)
    set_tests_properties(dist/${t}/np${np} PROPERTIES SKIP_RETURN_CODE 77)
    if(NOT RG_HAVE_CUDA)
      set_tests_properties(dist/${t}/np${np} PROPERTIES DISABLED TRUE)
    endif()
  endforeach()
endforeach()
