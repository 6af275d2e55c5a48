# fuzz_image: the image decode path (data/image_io.c and stb_image) under libFuzzer, ASan and
# UBSan. Built from the few sources it needs, so it does not depend on how the library itself was
# built. CTest runs it for RG_FUZZ_SECONDS (default 60) over a copy of the seed
# corpus in tests/fuzz/image/.
if(RG_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "RG_FUZZ=ON needs clang (-DCMAKE_C_COMPILER=clang): libFuzzer is part of "
                        "clang's compiler-rt (libclang-rt-dev)")
  endif()
  set(RG_FUZZ_SECONDS 60 CACHE STRING "How long CTest runs each fuzz target")
  add_executable(fuzz_image ${CMAKE_CURRENT_LIST_DIR}/fuzz_image.c
                 ${CMAKE_SOURCE_DIR}/data/image_io.c ${CMAKE_SOURCE_DIR}/data/stb_image.c
                 ${CMAKE_SOURCE_DIR}/core/status.c)
  target_include_directories(fuzz_image PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR})
  # Smaller size limits (4096 a side, 1 Mi pixels) keep each input fast under the sanitizers: a
  # 50-byte RLE TGA may legally claim 26 Mi pixels, which takes seconds to decode instrumented.
  # The limit checks are the same code, only the numbers differ.
  target_compile_definitions(fuzz_image PRIVATE RG_IMAGE_MAX_SIDE=4096
                             "RG_IMAGE_MAX_PIXELS=((int64_t)1<<20)")
  target_compile_options(fuzz_image PRIVATE -fsanitize=fuzzer,address,undefined -UNDEBUG -O1 -g
                         -fno-sanitize-recover=undefined)
  target_link_options(fuzz_image PRIVATE -fsanitize=fuzzer,address,undefined)
  set_target_properties(fuzz_image PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME fuzz/fuzz_image
           COMMAND sh -c "rm -rf fuzz_image_corpus && mkdir fuzz_image_corpus && \
cp ${CMAKE_CURRENT_LIST_DIR}/image/* fuzz_image_corpus/ && \
$<TARGET_FILE:fuzz_image> -max_total_time=${RG_FUZZ_SECONDS} -rss_limit_mb=2048 \
-malloc_limit_mb=600 -timeout=10 -artifact_prefix=fuzz_image- fuzz_image_corpus")
  set_tests_properties(fuzz/fuzz_image PROPERTIES LABELS "fuzz" TIMEOUT 900)
endif()
