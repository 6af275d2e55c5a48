/* isa_table.c — the CPU backend's table for one instruction set, rg_cpu_table_<isa>: compiled once
 * per copy of the hot kernels (isa_impl.h), so that rg_cpu_<name> below names that copy's kernel
 * where the kernel has copies, and the one shared kernel (memory, OpenBLAS's GEMM, cross-entropy)
 * where it has not. */
#include "tensor/cpu/cpu.h"

const rg_backend RG_ISA_NAME(rg_cpu_table) = {.name = "cpu",
#define RG_CPU_ENTRY(ret, fn, params) .fn = rg_cpu_##fn,
                                              RG_BACKEND_KERNELS(RG_CPU_ENTRY)
#undef RG_CPU_ENTRY
};
