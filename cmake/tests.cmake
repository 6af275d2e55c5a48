# Test registration. Conventions, so that adding a test never means editing this file:
#   tests/<module>/test_<unit>.c  a Criterion test program, one CTest entry, label <module>
#   tests/<module>/mpi_<unit>.c   an MPI program (tests/common/mpitest.h), run by CTest under
#                                 mpirun -np 2 and -np 3; labels <module> and mpi
#   tests/common/*.c              helpers linked into every test


pkg_check_modules(CRITERION REQUIRED IMPORTED_TARGET criterion)
file(GLOB RG_TEST_COMMON CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/common/*.c)
add_library(rgtest STATIC ${RG_TEST_COMMON})
target_link_libraries(rgtest PUBLIC ringgrad PkgConfig::CRITERION)
# Tests are white-box: they see the library's internal headers too.
target_include_directories(rgtest PUBLIC ${CMAKE_SOURCE_DIR}/tests/common ${CMAKE_SOURCE_DIR})
target_compile_definitions(rgtest PUBLIC RG_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
                           RG_BINARY_DIR="${CMAKE_BINARY_DIR}")

set(RG_MPIRUN ${CMAKE_SOURCE_DIR}/scripts/rg-mpirun)
# OMP_WAIT_POLICY=passive: tests that set two threads themselves (rg_set_num_threads) share the
# cores with the other test ctest -j runs; GOMP's threads spinning at every barrier then took
# their time slices from each other (three test_conv2d at once on 2 cores: 12.1 s spinning, 4.1 s
# passive, 2.5 s one alone).
# RG_MPIRUN_TMPDIR: a session folder of its own for each job scripts/rg-mpirun starts: two
# started at once by ctest -j raced to create the shared one, and one failed (open-mpi/ompi#8510).
set(RG_TEST_ENV "RG_NUM_THREADS=1" "OMP_NUM_THREADS=1" "OPENBLAS_NUM_THREADS=1"
    "OMP_WAIT_POLICY=passive" "RG_MPIRUN_TMPDIR=${CMAKE_BINARY_DIR}/mpi-sessions")
if(RG_SANITIZE)
  # OpenMPI and OpenBLAS keep allocations alive until exit; leaks there are not ours.
  list(APPEND RG_TEST_ENV "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0"
       "LSAN_OPTIONS=suppressions=${CMAKE_SOURCE_DIR}/tests/lsan.supp:print_suppressions=0"
       "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endif()
# MPI programs. Open MPI's plugins, and libc, have no frame pointers, so ASan's fast unwinder
# stops in them; a leak's stack then holds only the frames up to the first of those, often
# enough for lsan.supp (a plugin calls malloc directly: its module is frame 1). The exception,
# Open MPI's strings from asprintf, whose stack ends in libc's vasprintf: lsan.supp names that
# (ringgrad itself never calls asprintf; tests/architecture checks). The slow unwinder
# (fast_unwind_on_malloc=0) walks every such stack to its end instead, but at every malloc: it
# took 2.4x the CPU time of a 2-rank run (4.8 s against 2.0 s for one step of the CNN,
# 2026-11-29), and the MPI tests are most of the sanitizer run.
set(RG_MPI_TEST_ENV ${RG_TEST_ENV})
if(RG_SANITIZE)
  # And keep the plugins loaded until exit (tests/keep_plugins.c): their frames then have module
  # names for lsan.supp, instead of "<unknown module>"s that made LSan reread /proc/self/maps at
  # each. verify_asan_link_order=0: the preload comes before ASan's runtime.
  add_library(rg_keep_plugins SHARED ${CMAKE_SOURCE_DIR}/tests/keep_plugins.c)
  target_compile_options(rg_keep_plugins PRIVATE -fno-sanitize=all)
  target_link_options(rg_keep_plugins PRIVATE -fno-sanitize=all)
  set_target_properties(rg_keep_plugins PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  string(REPLACE "abort_on_error=0" "abort_on_error=0:verify_asan_link_order=0" RG_MPI_TEST_ENV
         "${RG_MPI_TEST_ENV}")
  list(APPEND RG_MPI_TEST_ENV "LD_PRELOAD=${CMAKE_BINARY_DIR}/tests/librg_keep_plugins.so")
endif()

file(GLOB_RECURSE RG_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/*/test_*.c)
foreach(src ${RG_TEST_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  get_filename_component(dir ${src} DIRECTORY)
  get_filename_component(module ${dir} NAME)
  add_executable(${name} ${src})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${name} PRIVATE rgtest PkgConfig::CRITERION)
  # --jobs 1: tests already run in parallel under ctest -j; one worker keeps timing noise down.
  add_test(NAME ${module}/${name} COMMAND ${name} --jobs 1)
  set_tests_properties(${module}/${name} PROPERTIES LABELS "${module}" TIMEOUT 600
                       ENVIRONMENT "${RG_TEST_ENV}")
endforeach()

file(GLOB_RECURSE RG_MPI_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/*/mpi_*.c)
foreach(src ${RG_MPI_TEST_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  get_filename_component(dir ${src} DIRECTORY)
  get_filename_component(module ${dir} NAME)
  add_executable(${name} ${src})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${name} PRIVATE rgtest)
  foreach(np 2 3)
    add_test(NAME ${module}/${name}/np${np} COMMAND ${RG_MPIRUN} -np ${np} $<TARGET_FILE:${name}>)
    set_tests_properties(${module}/${name}/np${np} PROPERTIES LABELS "${module};mpi" TIMEOUT 600
                         ENVIRONMENT "${RG_MPI_TEST_ENV}" PROCESSORS ${np})
  endforeach()
endforeach()

# Extra tests (shell scripts, programs) registered by each module's tests/<module>/tests.cmake.
file(GLOB RG_TEST_EXTRA CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/*/tests.cmake)
foreach(f ${RG_TEST_EXTRA})
  include(${f})
endforeach()

# The tests' python3 (for their helper scripts and checks; they need only its standard library):
# the system's, /usr/bin/python3 (scripts/install-deps.sh installs it), ahead of any python3
# earlier in PATH. A version manager's shim there costs: pyenv's runs bash scripts to choose a
# version before it starts Python, 0.7 s of CPU a call against 0.09 s (2026-11-29, 2 cores busy
# with the suite), and the suite calls python3 hundreds of times. Every test's PATH starts with a
# folder that holds only a link to it.
find_program(RG_TEST_PYTHON python3 PATHS /usr/bin /bin NO_DEFAULT_PATH)
if(NOT RG_TEST_PYTHON)
  find_program(RG_TEST_PYTHON python3)
endif()
if(RG_TEST_PYTHON)
  set(rg_test_path ${CMAKE_BINARY_DIR}/tests/python)
  file(MAKE_DIRECTORY ${rg_test_path})
  file(CREATE_LINK ${RG_TEST_PYTHON} ${rg_test_path}/python3 SYMBOLIC)
  get_property(rg_all_tests DIRECTORY PROPERTY TESTS)
  set_property(TEST ${rg_all_tests} APPEND PROPERTY ENVIRONMENT_MODIFICATION
               "PATH=path_list_prepend:${rg_test_path}")
endif()

# The order of a parallel run: ctest -j starts the tests in descending COST, and a fresh build has
# no timings of its own (CTest keeps them in Testing/Temporary once it has run). tests/costs.txt
# (scripts/test-costs.sh) holds each test's seconds in the last Release and sanitizer runs, so
# that the long tests start first and the short ones fill the gaps, instead of the tests of
# tests/train, declared last, running at the end while a core idles.
if(EXISTS ${CMAKE_SOURCE_DIR}/tests/costs.txt)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/costs.txt)
  file(STRINGS ${CMAKE_SOURCE_DIR}/tests/costs.txt rg_cost_lines REGEX "^[^#]")
  foreach(line ${rg_cost_lines})
    string(REPLACE " " ";" fields "${line}")
    list(GET fields 0 name)
    if(RG_SANITIZE)
      list(GET fields 2 cost)
    else()
      list(GET fields 1 cost)
    endif()
    if(TEST ${name} AND NOT cost STREQUAL "-")
      set_tests_properties(${name} PROPERTIES COST ${cost})
    endif()
  endforeach()
endif()
