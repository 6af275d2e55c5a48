/* isa_impl.h — one set of hot CPU kernels per instruction set. Private to the CPU backend.
 *
 * The files listed in cmake/isa.cmake (the convolution, the matrix product, the element-wise
 * loops, dropout, max-pooling, BatchNorm and the optimizer steps) are compiled once per
 * instruction set, generic (the x86-64 baseline: SSE2), avx2 (AVX2 + FMA + F16C) and avx512
 * (AVX-512 F/VL/BW/DQ), each time with its -m flags and RG_ISA_SUFFIX=<isa>. This header,
 * included first through cpu.h, then renames every global symbol those files define,
 * rg_cpu_relu_forward becoming rg_cpu_relu_forward_avx2, so that the three copies link side by
 * side. tensor/cpu/isa_table.c, compiled the same way, gathers each copy's backend table
 * (rg_cpu_table_<isa>), and tensor/cpu/isa.c picks one table at start-up with
 * __builtin_cpu_supports (or RG_ISA), as OpenBLAS's DYNAMIC_ARCH and oneDNN do.
 *
 * A symbol missing from the list below is defined by every copy under the same name: the link
 * fails with "multiple definition", and tests/tensor/check_isa.sh checks it too. */
#ifndef RG_CPU_ISA_IMPL_H
#define RG_CPU_ISA_IMPL_H

#define RG_ISA_CAT2(a, b) a##_##b
#define RG_ISA_CAT(a, b) RG_ISA_CAT2(a, b)

#ifdef RG_ISA_SUFFIX
#define RG_ISA_NAME(n) RG_ISA_CAT(n, RG_ISA_SUFFIX)

/* elementwise.c */
#define rg_cpu_fill RG_ISA_NAME(rg_cpu_fill)
#define rg_cpu_axpby RG_ISA_NAME(rg_cpu_axpby)
#define rg_cpu_binary RG_ISA_NAME(rg_cpu_binary)
#define rg_cpu_reduce_bcast RG_ISA_NAME(rg_cpu_reduce_bcast)
#define rg_cpu_relu_forward RG_ISA_NAME(rg_cpu_relu_forward)
#define rg_cpu_relu_backward RG_ISA_NAME(rg_cpu_relu_backward)
#define rg_cpu_sum RG_ISA_NAME(rg_cpu_sum)
#define rg_cpu_argmax RG_ISA_NAME(rg_cpu_argmax)
#define rg_cpu_uniform RG_ISA_NAME(rg_cpu_uniform)
#define rg_cpu_normal RG_ISA_NAME(rg_cpu_normal)
#define rg_cpu_f32_to_f16 RG_ISA_NAME(rg_cpu_f32_to_f16)
#define rg_cpu_f16_to_f32 RG_ISA_NAME(rg_cpu_f16_to_f32)
/* gemm_tile.c */
#define rg_cpu_gemm RG_ISA_NAME(rg_cpu_gemm)
/* dropout.c, maxpool2d.c */
#define rg_cpu_dropout_forward RG_ISA_NAME(rg_cpu_dropout_forward)
#define rg_cpu_dropout_backward RG_ISA_NAME(rg_cpu_dropout_backward)
#define rg_cpu_maxpool2d_forward RG_ISA_NAME(rg_cpu_maxpool2d_forward)
#define rg_cpu_maxpool2d_backward RG_ISA_NAME(rg_cpu_maxpool2d_backward)
#define rg_cpu_maxpool2d_forward_serial RG_ISA_NAME(rg_cpu_maxpool2d_forward_serial)
#define rg_cpu_maxpool2d_backward_serial RG_ISA_NAME(rg_cpu_maxpool2d_backward_serial)
/* optim.c */
#define rg_cpu_sgd_step_many RG_ISA_NAME(rg_cpu_sgd_step_many)
#define rg_cpu_adam_step RG_ISA_NAME(rg_cpu_adam_step)
/* batchnorm2d.c */
#define rg_cpu_batchnorm_stats RG_ISA_NAME(rg_cpu_batchnorm_stats)
#define rg_cpu_batchnorm_finalize RG_ISA_NAME(rg_cpu_batchnorm_finalize)
#define rg_cpu_batchnorm_apply RG_ISA_NAME(rg_cpu_batchnorm_apply)
#define rg_cpu_batchnorm_train_forward RG_ISA_NAME(rg_cpu_batchnorm_train_forward)
#define rg_cpu_batchnorm_backward_reduce RG_ISA_NAME(rg_cpu_batchnorm_backward_reduce)
#define rg_cpu_batchnorm_backward_data RG_ISA_NAME(rg_cpu_batchnorm_backward_data)
#define rg_cpu_batchnorm_backward RG_ISA_NAME(rg_cpu_batchnorm_backward)
/* conv2d.c, conv2d_backward.c, conv2d_direct.c, conv2d_gemm.c, conv2d_kernels.c,
 * conv2d_winograd.c */
#define rg_cpu_conv2d_forward RG_ISA_NAME(rg_cpu_conv2d_forward)
#define rg_cpu_conv2d_backward_data RG_ISA_NAME(rg_cpu_conv2d_backward_data)
#define rg_cpu_conv2d_backward_filter RG_ISA_NAME(rg_cpu_conv2d_backward_filter)
#define rg_cpu_conv2d_backward RG_ISA_NAME(rg_cpu_conv2d_backward)
#define rg_conv_forward_direct RG_ISA_NAME(rg_conv_forward_direct)
#define rg_conv_filter_rows_applies RG_ISA_NAME(rg_conv_filter_rows_applies)
#define rg_conv_backward_filter_rows RG_ISA_NAME(rg_conv_backward_filter_rows)
#define rg_conv_gemm_applies RG_ISA_NAME(rg_conv_gemm_applies)
#define rg_conv_gemm_filter_applies RG_ISA_NAME(rg_conv_gemm_filter_applies)
#define rg_conv_forward_gemm RG_ISA_NAME(rg_conv_forward_gemm)
#define rg_conv_backward_gemm RG_ISA_NAME(rg_conv_backward_gemm)
#define rg_conv_data_as_forward_applies RG_ISA_NAME(rg_conv_data_as_forward_applies)
#define rg_conv_data_as_forward RG_ISA_NAME(rg_conv_data_as_forward)
#define rg_conv_tile RG_ISA_NAME(rg_conv_tile)
#define rg_conv_winograd_applies RG_ISA_NAME(rg_conv_winograd_applies)
#define rg_conv_winograd_weights_len RG_ISA_NAME(rg_conv_winograd_weights_len)
#define rg_conv_winograd_weights RG_ISA_NAME(rg_conv_winograd_weights)
#define rg_conv_winograd_scratch_len RG_ISA_NAME(rg_conv_winograd_scratch_len)
#define rg_conv_winograd_chunk RG_ISA_NAME(rg_conv_winograd_chunk)
#define rg_conv_winograd_filter RG_ISA_NAME(rg_conv_winograd_filter)
#define rg_conv_tile_add RG_ISA_NAME(rg_conv_tile_add)
#define rg_conv_panel_product RG_ISA_NAME(rg_conv_panel_product)
#define rg_conv_transpose RG_ISA_NAME(rg_conv_transpose)
#define rg_conv_transpose_sum RG_ISA_NAME(rg_conv_transpose_sum)
#define rg_conv_transpose_narrow RG_ISA_NAME(rg_conv_transpose_narrow)
#define rg_conv_transpose_rows RG_ISA_NAME(rg_conv_transpose_rows)
#define rg_conv_transpose_relu RG_ISA_NAME(rg_conv_transpose_relu)
#define rg_conv_pool2x2_nhwc RG_ISA_NAME(rg_conv_pool2x2_nhwc)
#define rg_conv_transpose_i32 RG_ISA_NAME(rg_conv_transpose_i32)
#define rg_conv_unpool2x2_nhwc RG_ISA_NAME(rg_conv_unpool2x2_nhwc)
#define rg_conv_panel_sums RG_ISA_NAME(rg_conv_panel_sums)
#define rg_conv_geom_of RG_ISA_NAME(rg_conv_geom_of)
#define rg_conv_to_padded_nhwc RG_ISA_NAME(rg_conv_to_padded_nhwc)
#define rg_conv_window_offsets RG_ISA_NAME(rg_conv_window_offsets)
#define rg_conv_chunks_new RG_ISA_NAME(rg_conv_chunks_new)
#define rg_conv_chunks_free RG_ISA_NAME(rg_conv_chunks_free)
#define rg_conv_scratch RG_ISA_NAME(rg_conv_scratch)
#define rg_conv_scratch_free RG_ISA_NAME(rg_conv_scratch_free)
#endif /* RG_ISA_SUFFIX */

/* The instruction sets, best last. Each table exists only when cmake/isa.cmake built its copy
 * (RG_ISA_HAVE_<ISA>): all three on x86-64, only generic elsewhere, only native with
 * -DRG_NATIVE=ON. */
typedef enum { RG_ISA_GENERIC, RG_ISA_AVX2, RG_ISA_AVX512, RG_ISA_NATIVE, RG_ISA_COUNT } rg_isa;

#endif
