# Fuzzing (issue 10). Every tests/fuzz/fuzz_<target>.c defines LLVMFuzzerTestOneInput; its seed
# corpus is tests/fuzz/<target>/ and the inputs that once made it fail are kept in
# tests/fuzz/<target>/regressions/.
#   Always: replay_<target> (the target + tests/fuzz/replay.c, no libFuzzer) runs every seed and
#   regression file as the CTest entry fuzz/<target>, so the normal and the ASan suites replay them.
#   With -DRG_FUZZ=ON and clang: fuzz_<target>, a libFuzzer binary (-fsanitize=fuzzer,address,
#   undefined; the library gets -fsanitize=fuzzer-no-link for coverage). scripts/fuzz.sh builds
#   and runs them for a bounded time.
option(RG_FUZZ "Build the libFuzzer targets of tests/fuzz (needs clang)" OFF)
if(RG_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "RG_FUZZ=ON needs clang (CC=clang cmake ...); this is ${CMAKE_C_COMPILER_ID}")
  endif()
  target_compile_options(ringgrad PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
endif()
file(GLOB RG_FUZZ_TARGETS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fuzz_*.c)
foreach(src ${RG_FUZZ_TARGETS})
  get_filename_component(name ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" target ${name})
  set(corpus ${CMAKE_CURRENT_LIST_DIR}/${target})
  add_executable(replay_${target} ${src} ${CMAKE_CURRENT_LIST_DIR}/replay.c)
  set_target_properties(replay_${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(replay_${target} PRIVATE ringgrad)
  target_include_directories(replay_${target} PRIVATE ${CMAKE_SOURCE_DIR})
  set(dirs ${corpus})
  if(EXISTS ${corpus}/regressions)
    list(APPEND dirs ${corpus}/regressions)
  endif()
  add_test(NAME fuzz/${target} COMMAND replay_${target} ${dirs})
  set_tests_properties(fuzz/${target} PROPERTIES LABELS fuzz TIMEOUT 300 ENVIRONMENT "${RG_TEST_ENV}")
  if(RG_FUZZ)
    add_executable(${name} ${src})
    set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(${name} PRIVATE ringgrad)
    target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR})
  endif()
endforeach()
