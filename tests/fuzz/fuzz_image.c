/* fuzz_image.c — libFuzzer target for the image decode path (data/image_io.c + stb_image).
 *
 * Every input goes through rg_image_decode() as an image folder's file would: the header size
 * check, stb_image with its allocations capped, the planar conversion; once as gray and once as
 * RGB (different conversion code in stb). The decoder must return RG_OK or RG_ECORRUPT, never
 * crash, read out of bounds (ASan), hit undefined behaviour (UBSan), or take more memory than the
 * limits of ringgrad/image.h allow (run with -rss_limit_mb=2048 -malloc_limit_mb=600). stb's
 * own assertions are off in every build (data/stb_image_config.h says why).
 *
 * Build and run (clang): cmake -B build-fuzz -DCMAKE_C_COMPILER=clang -DRG_FUZZ=ON -DRG_CUDA=OFF
 *   cmake --build build-fuzz --target fuzz_image
 *   build-fuzz/tests/fuzz_image -max_total_time=60 corpus/ tests/fuzz/image/
 * Inputs that crashed go into tests/fuzz/image/ as regression files; the normal test run decodes
 * every file there (tests/dataset/test_image_io.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ringgrad/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int channels = 1; channels <= 3; channels += 2) {
        rg_image img;
        rg_status s = rg_image_decode("fuzz-input", data, size, channels, &img);
        if (s != RG_OK && s != RG_ECORRUPT) abort(); /* only "corrupt" is a valid refusal */
        if (s == RG_OK) {
            if (img.c != channels || img.w <= 0 || img.h <= 0 ||
                (int64_t)img.w * img.h > RG_IMAGE_MAX_PIXELS)
                abort();
            volatile uint8_t sink = img.px[(size_t)img.w * img.h * img.c - 1]; /* ASan: in bounds */
            (void)sink;
        }
        rg_image_deinit(&img);
    }
    return 0;
}
