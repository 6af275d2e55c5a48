# ringgrad as an installed library (cmake/install.cmake):
#   install/symbols  libringgrad.so exports exactly the functions declared RG_API in include/
#   install/consumer cmake --install into a temporary prefix, then build examples/train.c against
#                    it with pkg-config and with a 5-line CMake project, run each for a few steps,
#                    and compile a C++ file that includes <ringgrad.h>
add_test(NAME install/symbols
         COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/check_symbols.py $<TARGET_FILE:ringgrad_shared>
                 ${CMAKE_SOURCE_DIR}/include)
set_tests_properties(install/symbols PROPERTIES LABELS "install" TIMEOUT 60)
add_test(NAME install/consumer
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/install.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
# nosan: the consumer programs are built without the sanitizer runtime the library needs there.
set_tests_properties(install/consumer PROPERTIES LABELS "install;nosan" TIMEOUT 600
                     ENVIRONMENT "${RG_TEST_ENV}" PROCESSORS 2)
