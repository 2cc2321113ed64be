/* Lantern's quantized matmul over GGUF blocks exactly as they lie in the file.
 *
 * The contract between the per-format kernels (quants_*.c) and the ONNX Runtime custom op
 * (op.c). Weights are never repacked: a weight row is the GGUF tensor's row of blocks.
 * The value of y[i][j] depends only on row i of x and row j of W — never on m, j0 or j1 —
 * so a verify step of several rows equals one-token steps to the bit, by construction.
 */
#ifndef LANTERN_QUANTS_H
#define LANTERN_QUANTS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GGML type ids, numbered as gguf.GGMLQuantizationType numbers them. */
enum lq_type {
    LQ_F32 = 0, LQ_F16 = 1, LQ_Q4_0 = 2, LQ_Q4_1 = 3, LQ_Q5_0 = 6, LQ_Q5_1 = 7, LQ_Q8_0 = 8,
    LQ_Q2_K = 10, LQ_Q3_K = 11, LQ_Q4_K = 12, LQ_Q5_K = 13, LQ_Q6_K = 14, LQ_BF16 = 30,
    LQ_MXFP4 = 39,
};

/* Fast mode's activations, quantized once per row of x, with float32 scales. Blocks of 32
 * serve the 32-element formats (MXFP4 among them), blocks of 256 the K-quants; both scale
 * every 32 values on their own (a K-quant block carries 8 scales where llama.cpp's Q8_K
 * has one), so that one large activation costs only its 32 neighbours their precision.
 * The dense types (F32, F16, BF16) have no integer path: their fast-mode activations are
 * the float32 row itself (4 k bytes) and fast mode computes what exact mode computes. */
typedef struct {
    float d;          /* x[i] ~= d * qs[i] */
    float s;          /* d * sum(qs): the block's sum, for formats with a minimum (Q4_1, Q5_1) */
    int8_t qs[32];
} lq_act32;

typedef struct {
    float d[8];       /* x[i] ~= d[i / 32] * qs[i] */
    float s[8];       /* d[j] * the sum of sub-block j's codes: for formats with minimums */
    int16_t bsums[16];/* sum of qs over each group of 16 */
    int8_t qs[256];
    /* qs again, its 8 sub-blocks of 32 transposed in units of 4 codes: qt[32 c + 4 j + b]
     * = qs[32 j + 4 c + b]. Many-row kernels multiply it with weight blocks transposed
     * the same way once for all rows, so that lane j of a register sums sub-block j. */
    int8_t qt[256];
} lq_act256;

/* Bytes of one weight row of k values; 0 when the type is unknown or k is not a whole
 * number of its blocks. */
size_t lq_row_bytes(int type, int64_t k);

/* Bytes of one row of fast-mode activations for weights of this type; 0 as above. */
size_t lq_act_bytes(int type, int64_t k);

/* Quantize one row x[k] into xq (lq_act_bytes(type, k) bytes). */
void lq_quantize_act(int type, int64_t k, const float *x, void *xq);

/* W's row w of k values (lq_row_bytes(type, k) > 0) de-quantized into out[k]: exactly
 * gguf.quants.dequantize's float32 values, the ones exact mode multiplies with. */
void lq_dequantize_row(int type, int64_t k, const void *w, float *out);

/* Rows ids[0..count) of W (rows of k values, lq_row_bytes(type, k) > 0) de-quantized into
 * out[count][k], as lq_dequantize_row does: the token embeddings a step is fed, gathered
 * in one call (from Python, one call without the interpreter's lock). */
void lq_gather_rows(int type, int64_t k, const uint8_t *w, const int64_t *ids, int64_t count,
                    float *out);

/* y[i * ldy + j] = x[i, :] . W[j, :] for i < m and j0 <= j < j1; W's row j starts at
 * w + j * lq_row_bytes(type, k).
 * exact: float32 x; every block de-quantized to exactly gguf.quants.dequantize's values;
 *        float32 accumulation.
 * fast:  xq holds m rows from lq_quantize_act, lq_act_bytes(type, k) bytes apart; integer
 *        dot products per block. */
void lq_matmul_exact(int type, int64_t k, int64_t m, const float *x, const uint8_t *w,
                     int64_t j0, int64_t j1, float *y, int64_t ldy);
void lq_matmul_fast(int type, int64_t k, int64_t m, const void *xq, const uint8_t *w,
                    int64_t j0, int64_t j1, float *y, int64_t ldy);

/* The kernels this CPU runs, chosen once at run time: "avx512-vnni", "avx512", "avx2",
 * "neon", "portable". */
const char *lq_isa(void);

#ifdef __cplusplus
}
#endif

#endif
