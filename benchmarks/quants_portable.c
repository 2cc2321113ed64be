/* Times the portable kernels of engine/native/quants.c, one thread, per GGUF type: one
 * matmul of the 1.5B demo model's ffn_down shape (n = 1536 rows of W, k = 8960) for a
 * one-row call (decode) and a 32-row call (prefill), exact and fast mode, best of 10
 * after one warm-up, in the thread's CPU time (a busy machine takes the core away, not
 * the time). Weights are random code bytes under small fp16 scales.
 *
 *     cc -O2 -std=c11 -DLQ_NO_X86 -Iengine/native engine/native/quants.c \
 *         benchmarks/quants_portable.c -o /tmp/quants_portable -lm && /tmp/quants_portable
 */
#define _POSIX_C_SOURCE 199309L
#include "quants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 1536, K = 8960, ROUNDS = 10 };

static const struct {
    const char *name;
    int type;
    int scales[2]; /* byte offsets of the block's fp16 scale fields, -1 for none */
} TYPES[] = {
    {"F32", LQ_F32, {-1, -1}},   {"F16", LQ_F16, {-1, -1}},   {"BF16", LQ_BF16, {-1, -1}},
    {"Q4_0", LQ_Q4_0, {0, -1}},  {"Q4_1", LQ_Q4_1, {0, 2}},   {"Q5_0", LQ_Q5_0, {0, -1}},
    {"Q5_1", LQ_Q5_1, {0, 2}},   {"Q8_0", LQ_Q8_0, {0, -1}},  {"MXFP4", LQ_MXFP4, {-1, -1}},
    {"Q2_K", LQ_Q2_K, {80, 82}}, {"Q3_K", LQ_Q3_K, {108, -1}}, {"Q4_K", LQ_Q4_K, {0, 2}},
    {"Q5_K", LQ_Q5_K, {0, 2}},   {"Q6_K", LQ_Q6_K, {208, -1}},
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Random bytes that de-quantize to finite, modest values. */
static void random_weights(int t, uint8_t *w, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++)
        w[i] = (uint8_t)(rand() >> 7);
    if (TYPES[t].type == LQ_F32) {
        for (size_t i = 0; i < bytes / 4; i++)
            ((float *)w)[i] = (float)(rand() % 2001 - 1000) * 1e-5f;
    } else if (TYPES[t].type == LQ_F16 || TYPES[t].type == LQ_BF16) {
        for (size_t i = 1; i < bytes; i += 2)
            w[i] = (uint8_t)((w[i] & 0x80) | (TYPES[t].type == LQ_F16 ? 0x20 : 0x3c));
    } else if (TYPES[t].type == LQ_MXFP4) {
        for (size_t i = 0; i < bytes; i += 17)
            w[i] = (uint8_t)(120 + w[i] % 8);
    } else {
        /* bytes per block: 256 values are 8 blocks of 32 or one K-quant block */
        const size_t block = lq_row_bytes(TYPES[t].type, 256) / (lq_row_bytes(TYPES[t].type, 32) ? 8 : 1);
        for (size_t b = 0; b < bytes; b += block)
            for (int f = 0; f < 2; f++)
                if (TYPES[t].scales[f] >= 0) {
                    w[b + (size_t)TYPES[t].scales[f]] = 0;
                    w[b + (size_t)TYPES[t].scales[f] + 1] = (uint8_t)(0x1c | (w[b] & 0x80));
                }
    }
}

static double best_of(int fast, int type, int m, const float *x, const void *xq, const uint8_t *w,
                      float *y)
{
    double best = 1e30;
    for (int r = 0; r <= ROUNDS; r++) {
        const double t0 = now();
        if (fast)
            lq_matmul_fast(type, K, m, xq, w, 0, N, y, N);
        else
            lq_matmul_exact(type, K, m, x, w, 0, N, y, N);
        const double dt = now() - t0;
        if (r > 0 && dt < best)
            best = dt;
    }
    return best;
}

int main(void)
{
    const int ms[2] = {1, 32};
    float *x = malloc(sizeof(float) * 32 * K), *y = malloc(sizeof(float) * 32 * N);
    srand(1);
    for (int i = 0; i < 32 * K; i++)
        x[i] = (float)(rand() % 2001 - 1000) * 1e-3f;
    printf("kernels: %s; n = %d, k = %d; ms per call (GFLOP/s)\n", lq_isa(), N, K);
    printf("%-6s %22s %22s %22s %22s\n", "type", "exact m=1", "fast m=1", "exact m=32", "fast m=32");
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
        const int type = TYPES[t].type;
        const size_t rb = lq_row_bytes(type, K), ab = lq_act_bytes(type, K);
        uint8_t *w = malloc(rb * N), *xq = malloc(ab * 32);
        random_weights((int)t, w, rb * N);
        for (int i = 0; i < 32; i++)
            lq_quantize_act(type, K, x + (size_t)i * K, xq + (size_t)i * ab);
        printf("%-6s", TYPES[t].name);
        for (int mi = 0; mi < 2; mi++)
            for (int fast = 0; fast < 2; fast++) {
                const double s = best_of(fast, type, ms[mi], x, xq, w, y);
                printf(" %10.2f ms (%5.1f)", s * 1e3, 2.0 * ms[mi] * N * K / s * 1e-9);
            }
        printf("\n");
        free(w);
        free(xq);
    }
    free(x);
    free(y);
    return 0;
}
