# `cmake --install build --prefix P` installs ringgrad as a C library:
#   P/include/ringgrad.h, P/include/ringgrad/*.h      the public API (nothing of the *_impl.h)
#   P/lib/libringgrad.a, P/lib/libringgrad.so*        static and shared (the shared one exports
#                                                     only RG_API functions)
#   P/bin/ringgrad-train                              the trainer
#   P/lib/pkgconfig/ringgrad.pc                       pkg-config --cflags --libs ringgrad
#   P/lib/cmake/ringgrad/ringgradConfig*.cmake        find_package(ringgrad): ringgrad::ringgrad
#                                                     (shared), ringgrad::ringgrad_static
# tests/install/install.sh installs into a temporary prefix and builds examples/train.c both ways.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(ringgrad_shared PROPERTIES EXPORT_NAME ringgrad)
set_target_properties(ringgrad PROPERTIES EXPORT_NAME ringgrad_static)
# Installed binaries keep the run path to libraries outside the system's (the CUDA toolkit's).
set_target_properties(ringgrad_shared ringgrad-train PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)

install(TARGETS ringgrad ringgrad_shared EXPORT ringgradTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ringgrad-train RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/ringgrad.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/ringgrad DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

set(_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/ringgrad)
install(EXPORT ringgradTargets NAMESPACE ringgrad:: DESTINATION ${_cmakedir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/ringgradConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/ringgradConfig.cmake INSTALL_DESTINATION ${_cmakedir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ringgradConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ringgradConfig.cmake ${CMAKE_BINARY_DIR}/ringgradConfigVersion.cmake
        DESTINATION ${_cmakedir})

# pkg-config: the shared library needs only -lringgrad; --static adds what libringgrad.a needs.
set(RG_PC_LIBS_PRIVATE "-lopenblas -lz -lm -lpthread")
set(RG_PC_REQUIRES_PRIVATE "openblas ompi-c zlib")
if(RG_HAVE_CUDA)
  string(APPEND RG_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcudnn -lnccl -ldl")
endif()
string(APPEND RG_PC_LIBS_PRIVATE " ${OpenMP_C_FLAGS}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/ringgrad.pc.in ${CMAKE_BINARY_DIR}/ringgrad.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ringgrad.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
