# The loader benchmark (not a test): build/tests/bench_loader, see its header comment.
add_executable(bench_loader ${CMAKE_CURRENT_LIST_DIR}/bench_loader.c)
set_target_properties(bench_loader PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
target_link_libraries(bench_loader PRIVATE ringgrad)
