/* asan_tile_check.c — sanitizer builds only: the convolution tiles run uninstrumented there, and
 * rg_conv_tile / rg_conv_tile_add check the regions they touch once per call instead
 * (tensor/cpu/conv2d_kernels.c). This program proves that those checks catch an overrun: it calls
 * the generic set's tile with every buffer exactly large enough (case 0: no report), or with one
 * of them a float short (cases 1-5: AddressSanitizer must report a heap-buffer-overflow).
 *   asan_tile_check CASE    0 fits, 1 b short, 2 a row short, 3 c short, 4 off short,
 *                           5 a destination of rg_conv_tile_add short */
#include <stdio.h>
#include <stdlib.h>

/* The generic set's copies: with RG_ISA_SUFFIX=generic, tensor/cpu/isa_impl.h names
 * rg_conv_tile rg_conv_tile_generic, and conv2d_impl.h gives the x86-64 baseline's tile (this
 * file is compiled for it, as the generic set is). */
#define RG_ISA_SUFFIX generic
#include "tensor/cpu/conv2d_impl.h"

enum { VL = RG_CONV_VL, MR = RG_CONV_MR, NV = 2, NT = 5, STEP = 3 };
enum { LDB = NV * VL + 4, LDC = NV * VL + 2 }; /* rows of b and c with gaps between them */

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
        rg_conv_tile(NV, NT, off, a, b, LDB, c, LDC, false);
    } else if (which == 5) {
        rg_conv_tile_add(NV, NT, off, a, b, LDB, dst, col_off, MR);
    } else {
        rg_conv_tile(NV, NT, off, a, b, LDB, c, LDC, true);
        rg_conv_tile_add(NV, NT, off, a, b, LDB, dst, col_off, MR);
    }
    printf("case %d: tile within bounds, no report\n", which);
    free(off), free(arow), free(b), free(c), free(d);
    return 0;
}
