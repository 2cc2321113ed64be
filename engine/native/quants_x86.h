/* x86-64 SIMD kernels (AVX2+FMA, AVX-512, AVX-512 VNNI), chosen at run time by CPU
 * features; the portable kernels in quants.c are the fallback and the reference.
 * Each returns 1 when it computed y (same contract as lq_matmul_* in quants.h), 0 when it
 * has no kernel for this type on this CPU. */
#ifndef LANTERN_QUANTS_X86_H
#define LANTERN_QUANTS_X86_H

#include <stdint.h>

int lq_x86_matmul_exact(int type, int64_t k, int64_t m, const float *x, const uint8_t *w,
                        int64_t j0, int64_t j1, float *y, int64_t ldy);
int lq_x86_matmul_fast(int type, int64_t k, int64_t m, const void *xq, const uint8_t *w,
                       int64_t j0, int64_t j1, float *y, int64_t ldy);
/* The name of the widest x86 kernel set this CPU runs ("avx512-vnni", "avx512", "avx2"),
 * or NULL when it has none. */
const char *lq_x86_isa(void);

#endif
