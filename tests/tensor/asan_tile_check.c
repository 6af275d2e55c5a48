/* asan_tile_check.c — sanitizer builds only: the convolution tiles run uninstrumented there, and
 * rg_conv_tile / rg_conv_tile_add check the regions they touch once per call instead
 * (tensor/cpu/conv2d_kernels.c). This program proves that those checks catch an overrun: it calls
 * the generic set's tile with every buffer exactly large enough (case 0: no report), or with one
 * of them a float short (cases 1-5: AddressSanitizer must report a heap-buffer-overflow).
 *   asan_tile_check CASE    0 fits, 1 b short, 2 a row short, 3 c short, 4 off short,
 *                           5 a destination of rg_conv_tile_add short */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The generic set's copies (tensor/cpu/isa_impl.h names them), built for the x86-64 baseline:
 * 4 floats a vector, 6 rows a tile. */
void rg_conv_tile_generic(int nv, int64_t nt, const int32_t *off, const float *const *a,
                          const float *b, int64_t ldb, float *c, int64_t ldc, bool accumulate);
void rg_conv_tile_add_generic(int nv, int64_t nt, const int32_t *off, const float *const *a,
                              const float *b, int64_t ldb, float *const *dst,
                              const int32_t *col_off, int dst_rows);
enum { VL = 4, MR = 6, NV = 2, NT = 5, LDB = 12, STEP = 3, LDC = 10 };

int main(int argc, char **argv) {
    int which = argc > 1 ? atoi(argv[1]) : 0;
    int32_t *off = malloc((NT - (which == 4)) * sizeof *off);
    for (int t = 0; t < NT - (which == 4); t++) off[t] = t * STEP;
    float *arow = calloc((NT - 1) * STEP + 1 - (which == 2), sizeof(float)); /* off's span */
    const float *a[MR];
    for (int i = 0; i < MR; i++) a[i] = arow;
    float *b = calloc((NT - 1) * LDB + NV * VL - (which == 1), sizeof(float));
    float *c = calloc((MR - 1) * LDC + NV * VL - (which == 3), sizeof(float));
    float *d = calloc(NV * VL - (which == 5), sizeof(float));
    float *dst[MR];
    int32_t col_off[NV * VL];
    for (int i = 0; i < MR; i++) dst[i] = d;
    for (int j = 0; j < NV * VL; j++) col_off[j] = j;
    if (which == 4) { /* off one entry short: the tile reads off[NT - 1] past its end */
        rg_conv_tile_generic(NV, NT, off, a, b, LDB, c, LDC, false);
    } else if (which == 5) {
        rg_conv_tile_add_generic(NV, NT, off, a, b, LDB, dst, col_off, MR);
    } else {
        rg_conv_tile_generic(NV, NT, off, a, b, LDB, c, LDC, true);
        rg_conv_tile_add_generic(NV, NT, off, a, b, LDB, dst, col_off, MR);
    }
    printf("case %d: tile within bounds, no report\n", which);
    free(off), free(arow), free(b), free(c), free(d);
    return 0;
}
