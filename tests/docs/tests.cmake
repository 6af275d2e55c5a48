# The README's C API example (examples/train.c) must compile, run alone and under 2 ranks, and
# appear in the README verbatim, so that the documentation cannot drift from the code.
add_executable(example_train ${CMAKE_SOURCE_DIR}/examples/train.c)
target_link_libraries(example_train PRIVATE ringgrad)
set_target_properties(example_train PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

add_test(NAME docs/example_train COMMAND example_train)
set_tests_properties(docs/example_train PROPERTIES LABELS "docs" TIMEOUT 300
                     ENVIRONMENT "${RG_TEST_ENV}" PASS_REGULAR_EXPRESSION "step 15  loss")
add_test(NAME docs/example_train/np2 COMMAND ${RG_MPIRUN} -np 2 $<TARGET_FILE:example_train>)
set_tests_properties(docs/example_train/np2 PROPERTIES LABELS "docs;mpi" TIMEOUT 300
                     ENVIRONMENT "${RG_MPI_TEST_ENV}" PROCESSORS 2 PASS_REGULAR_EXPRESSION "step 15  loss")
add_test(NAME docs/readme_shows_example
         COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/docs/check_readme.py ${CMAKE_SOURCE_DIR})
set_tests_properties(docs/readme_shows_example PROPERTIES LABELS "docs")
