# libFuzzer targets (issue 10): each tests/fuzz/fuzz_<name>.cmake registers one. They are built
# only with -DRG_FUZZ=ON and clang; every target's seed corpus and regression files live in
# tests/fuzz/<name>/.
option(RG_FUZZ "Build the libFuzzer targets (needs clang)" OFF)
file(GLOB _rg_fuzz_cmake CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fuzz_*.cmake)
foreach(f ${_rg_fuzz_cmake})
  include(${f})
endforeach()
