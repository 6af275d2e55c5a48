# The architecture's rules, checked on the source tree (no build output needed).
#   layers: every #include points down or sideways in the layer order of LAYERS
add_test(NAME architecture/layers COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_layers.sh)
set_tests_properties(architecture/layers PROPERTIES LABELS "architecture" TIMEOUT 60)
#   no_asprintf: no asprintf in ringgrad's C sources (tests/lsan.supp ignores leaks from libc's)
add_test(NAME architecture/no_asprintf COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_no_asprintf.sh)
set_tests_properties(architecture/no_asprintf PROPERTIES LABELS "architecture" TIMEOUT 60)
