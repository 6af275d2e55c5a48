# The hot CPU kernels, compiled once per instruction set (tensor/cpu/isa_impl.h explains how the
# copies link side by side; tensor/cpu/isa.c picks one at start-up). Everything else in the
# library is built for the x86-64 baseline, so the same binary runs on any x86-64 CPU.
#
#   RG_NATIVE=OFF (default), x86-64: generic (baseline), avx2, avx512
#   RG_NATIVE=OFF, other CPUs:       generic
#   RG_NATIVE=ON:                    one copy, native, like the rest built with -march=native
set(RG_ISA_SOURCES
    tensor/cpu/conv2d.c tensor/cpu/conv2d_backward.c tensor/cpu/conv2d_direct.c
    tensor/cpu/conv2d_gemm.c tensor/cpu/conv2d_winograd.c tensor/cpu/gemm_tile.c
    tensor/cpu/conv2d_kernels.c tensor/cpu/elementwise.c tensor/cpu/dropout.c
    tensor/cpu/maxpool2d.c tensor/cpu/batchnorm2d.c tensor/cpu/optim.c tensor/cpu/isa_table.c)
list(REMOVE_ITEM RG_SOURCES ${RG_ISA_SOURCES})
# The optimizer steps give the scalar formula's results bit for bit in every copy (tests compare
# them exactly; ranks on different CPUs keep equal parameters): no fused multiply-add there.
set_source_files_properties(tensor/cpu/optim.c PROPERTIES COMPILE_OPTIONS -ffp-contract=off)

# The -m flags of each copy; tensor/cpu/isa.c checks exactly these features before using one.
set(RG_ISA_FLAGS_generic "")
set(RG_ISA_FLAGS_avx2 -mavx2 -mfma -mf16c)
set(RG_ISA_FLAGS_avx512 -mavx2 -mfma -mf16c -mavx512f -mavx512vl -mavx512bw -mavx512dq)
set(RG_ISA_FLAGS_native "")  # -march=native comes from the global options
if(RG_NATIVE)
  set(RG_ISAS native)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(RG_ISAS generic avx2 avx512)
else()
  set(RG_ISAS generic)
endif()
message(STATUS "ringgrad: CPU kernels for ${RG_ISAS}")

# One object library per copy, linked into each library target given after `objects` (the object
# library whose isa.c needs to know which copies exist).
function(rg_add_isa_kernels objects)
  foreach(isa ${RG_ISAS})
    add_library(ringgrad_isa_${isa} OBJECT ${RG_ISA_SOURCES})
    target_compile_options(ringgrad_isa_${isa} PRIVATE ${RG_ISA_FLAGS_${isa}})
    target_compile_definitions(ringgrad_isa_${isa} PRIVATE RG_ISA_SUFFIX=${isa})
    target_include_directories(ringgrad_isa_${isa} PRIVATE ${CMAKE_SOURCE_DIR}/include
                               ${CMAKE_SOURCE_DIR})
    target_link_libraries(ringgrad_isa_${isa} PRIVATE PkgConfig::OPENBLAS OpenMP::OpenMP_C
                          MPI::MPI_C)
    set_target_properties(ringgrad_isa_${isa} PROPERTIES POSITION_INDEPENDENT_CODE ON
                          C_VISIBILITY_PRESET hidden)
    foreach(lib ${ARGN})
      target_sources(${lib} PRIVATE $<TARGET_OBJECTS:ringgrad_isa_${isa}>)
    endforeach()
    string(TOUPPER ${isa} _ISA)
    target_compile_definitions(${objects} PRIVATE RG_ISA_HAVE_${_ISA})
  endforeach()
endfunction()
