/* Every output of the portable kernels for fixed pseudo-random inputs, written to stdout:
 * per type, de-quantized rows, fast-mode activations, then exact and fast y for 17 rows of x
 * and for one. tests/unit/native/test_quants.py builds it for this machine and for ARM64
 * (run under qemu) and compares the bytes. */
#include "quants.h"

#include <stdio.h>
#include <stdlib.h>

static uint32_t state = 12345;

static uint32_t next(void)
{
    state = state * 1664525u + 1013904223u;
    return state >> 8;
}

static const struct {
    int type;
    int64_t k;
    int scales[2]; /* byte offsets of the block's fp16 scale fields, -1 for none */
} TYPES[] = {
    {LQ_F32, 2605, {-1, -1}},  {LQ_F16, 2605, {-1, -1}},   {LQ_BF16, 2605, {-1, -1}},
    {LQ_Q4_0, 2592, {0, -1}},  {LQ_Q4_1, 2592, {0, 2}},    {LQ_Q5_0, 2592, {0, -1}},
    {LQ_Q5_1, 2592, {0, 2}},   {LQ_Q8_0, 2592, {0, -1}},   {LQ_MXFP4, 2592, {-1, -1}},
    {LQ_Q2_K, 2816, {80, 82}}, {LQ_Q3_K, 2816, {108, -1}}, {LQ_Q4_K, 2816, {0, 2}},
    {LQ_Q5_K, 2816, {0, 2}},   {LQ_Q6_K, 2816, {208, -1}},
};

/* Random bytes whose scales (and dense values) are finite and modest. */
static void random_weights(int t, uint8_t *w, size_t bytes)
{
    const int type = TYPES[t].type;
    for (size_t i = 0; i < bytes; i++)
        w[i] = (uint8_t)next();
    if (type == LQ_F32)
        for (size_t i = 0; i < bytes / 4; i++)
            ((float *)w)[i] = (float)((int)(next() % 2001) - 1000) * 1e-3f;
    if (type == LQ_F16 || type == LQ_BF16)
        for (size_t i = 1; i < bytes; i += 2)
            w[i] = (uint8_t)((w[i] & 0x83) | (type == LQ_F16 ? 0x34 : 0x3c));
    if (type == LQ_MXFP4)
        for (size_t i = 0; i < bytes; i += 17)
            w[i] = (uint8_t)(118 + w[i] % 16);
    if (TYPES[t].scales[0] >= 0) {
        /* bytes per block: 256 values are 8 blocks of 32 or one K-quant block */
        const size_t block = lq_row_bytes(type, 256) / (lq_row_bytes(type, 32) ? 8 : 1);
        for (size_t b = 0; b < bytes; b += block)
            for (int f = 0; f < 2; f++)
                if (TYPES[t].scales[f] >= 0) {
                    uint8_t *high = w + b + TYPES[t].scales[f] + 1;
                    *high = (uint8_t)((*high & 0x83) | 0x1c);
                }
    }
}

int main(void)
{
    const int n = 37, m = 17;
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
        const int type = TYPES[t].type;
        const int64_t k = TYPES[t].k;
        const size_t rb = lq_row_bytes(type, k), ab = lq_act_bytes(type, k);
        uint8_t *w = malloc(rb * n), *xq = malloc(ab * m);
        float *x = malloc(sizeof(float) * m * k), *row = malloc(sizeof(float) * k);
        float *y = malloc(sizeof(float) * m * n);
        random_weights((int)t, w, rb * n);
        for (int64_t i = 0; i < m * k; i++)
            x[i] = (float)((int)(next() % 20001) - 10000) * 1e-4f;
        for (int j = 0; j < n; j++) {
            lq_dequantize_row(type, k, w + j * rb, row);
            fwrite(row, sizeof(float), (size_t)k, stdout);
        }
        for (int i = 0; i < m; i++)
            lq_quantize_act(type, k, x + i * k, xq + i * ab);
        fwrite(xq, 1, ab * m, stdout);
        lq_matmul_exact(type, k, m, x, w, 0, n, y, n);
        fwrite(y, sizeof(float), (size_t)(m * n), stdout);
        lq_matmul_fast(type, k, m, xq, w, 0, n, y, n);
        fwrite(y, sizeof(float), (size_t)(m * n), stdout);
        lq_matmul_exact(type, k, 1, x, w, 0, n, y, n);
        fwrite(y, sizeof(float), (size_t)n, stdout);
        lq_matmul_fast(type, k, 1, xq, w, 0, n, y, n);
        fwrite(y, sizeof(float), (size_t)n, stdout);
        free(w);
        free(xq);
        free(x);
        free(row);
        free(y);
    }
    return 0;
}
