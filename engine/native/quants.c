/* Portable C11 kernels for Lantern's quantized matmul (quants.h): the fallback on CPUs
 * without SIMD kernels and the reference the SIMD kernels are checked against. No
 * intrinsics: loops the compiler vectorizes at -O2. Little-endian hosts, as GGUF files are.
 *
 * Exact mode de-quantizes each weight block to the float32 values gguf.quants.dequantize
 * gives (the same products and sums in the same order, each rounded to float32, hence no
 * fused multiply-adds: see the pragma below) and multiplies them with float32 x in a fixed
 * order: 8 lanes, element e of the row into lane e % 8 in increasing e, then
 * y = ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
 *
 * Fast mode: integer dot products per block against activations quantized once per row of
 * x (lq_quantize_act: d = max|x| / 127 in float32 per 32 values, codes x * (1 / d) rounded
 * to nearest, ties away from zero), scales applied in float32, blocks summed in order into
 * one float per (i, j). Activation blocks and each block's term, per weight format:
 *   F32, F16, BF16     float32 activations (lq_act_bytes = 4 k, a copy): no integer path,
 *                      fast mode computes what exact mode computes.
 *   Q4_0, Q5_0, Q8_0   lq_act32:  (d_w * d_x) * sum(q_w q_x)
 *   MXFP4              lq_act32:  (d_w * d_x) * sum(q_w q_x), q_w the doubled E2M1 values
 *                      and d_w half the E8M0 scale (gguf-py's kvalues, llama.cpp's too)
 *   Q4_1, Q5_1         lq_act32:  (d_w * d_x) * sum(q_w q_x) + m_w * s_x
 *   K-quants           lq_act256, its 8 sub-blocks of 32 added in order, sub-block j:
 *                      d_x[j] * (d_w * sumi_j - dmin_w * summ_j),
 *                      sumi_j = sum_g(sc_g * sum_16(q_w q_x)), summ_j = sum_g(m_g * bsums_g)
 *                      over j's two groups g of 16 (dmin_w = 0 for Q3_K and Q6_K)
 * (sums of integers are exact; a Q4_K/Q5_K sub-block's scale and minimum count for both of
 * its groups.)
 *
 * Both modes walk W in groups of rows and chunks of elements: each weight block is
 * decoded once per ITILE rows of x (once per call up to ITILE rows) and then used for all
 * of them. Every y[i][j] is accumulated by the same code in the same order whatever m, j0
 * and j1 are, so it does not depend on them to the bit.
 */
#include "quants.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if !defined(LQ_NO_X86) && (defined(__x86_64__) || defined(_M_X64))
#define LQ_HAVE_X86 1
#include "quants_x86.h"
#endif

/* De-quantized values must be rounded as numpy rounds them: d * q + m is a product rounded
 * to float32, then a sum rounded to float32. Contracting it into one fused multiply-add (GCC
 * does by default outside ISO C mode wherever the target has FMA, e.g. on ARM64) would
 * change the low bits. Builds should also pass -ffp-contract=off (or -std=c11). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#elif defined(_MSC_VER)
#pragma fp_contract(off)
#endif

/* MSVC's C mode knows restrict only under /std:c11. */
#if defined(_MSC_VER) && !defined(__clang__)
#define LQ_RESTRICT __restrict
#else
#define LQ_RESTRICT restrict
#endif

/* Unrolling the lanes loop lets the compiler keep the lanes in vector registers. */
#if defined(__GNUC__)
#define LQ_UNROLL_LANES _Pragma("GCC unroll 8")
#else
#define LQ_UNROLL_LANES
#endif

/* How W is walked. Grouping changes which blocks are decoded together, never the
 * arithmetic of an output, so it may depend on m. */
enum {
    LANES = 8,         /* exact mode's partial sums per (i, j) */
    PANEL = 4,         /* weight rows decoded together (few streams of weights for one row
                        * of x); exact mode multiplies this many with a row of x at a time */
    GROUP = 16,        /* weight rows exact mode decodes together for MANY_ROWS or more rows
                        * of x, each row of x then read once per GROUP rows of W */
    MANY_ROWS = 8,
    CHUNK_EXACT = 256, /* elements of a weight row decoded at a time, whole 32 and 256 */
    CHUNK_FAST = 512,  /* blocks */
    ITILE = 64,        /* rows of x served by one decoded chunk */
};

/* ---- format table ---------------------------------------------------------------- */

typedef struct {
    int block;     /* elements per block */
    int bytes;     /* bytes per block */
} block_format;

static block_format format_of(int type)
{
    switch (type) {
    case LQ_F32: return (block_format){1, 4};
    case LQ_F16: return (block_format){1, 2};
    case LQ_BF16: return (block_format){1, 2};
    case LQ_Q4_0: return (block_format){32, 18};
    case LQ_Q4_1: return (block_format){32, 20};
    case LQ_Q5_0: return (block_format){32, 22};
    case LQ_Q5_1: return (block_format){32, 24};
    case LQ_Q8_0: return (block_format){32, 34};
    case LQ_MXFP4: return (block_format){32, 17};
    case LQ_Q2_K: return (block_format){256, 84};
    case LQ_Q3_K: return (block_format){256, 110};
    case LQ_Q4_K: return (block_format){256, 144};
    case LQ_Q5_K: return (block_format){256, 176};
    case LQ_Q6_K: return (block_format){256, 210};
    default: return (block_format){0, 0};
    }
}

static int is_dense(int type) { return type == LQ_F32 || type == LQ_F16 || type == LQ_BF16; }

size_t lq_row_bytes(int type, int64_t k)
{
    const block_format f = format_of(type);
    if (f.block == 0 || k <= 0 || k % f.block != 0)
        return 0;
    return (size_t)(k / f.block) * (size_t)f.bytes;
}

size_t lq_act_bytes(int type, int64_t k)
{
    const block_format f = format_of(type);
    if (f.block == 0 || k <= 0 || k % f.block != 0)
        return 0;
    if (is_dense(type))
        return (size_t)k * sizeof(float);
    if (f.block == 32)
        return (size_t)(k / 32) * sizeof(lq_act32);
    return (size_t)(k / 256) * sizeof(lq_act256);
}

/* ---- scalars as they lie in the file (little-endian) ------------------------------ */

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* IEEE half to float, exactly (subnormals, infinities and NaN payloads kept); branch-free
 * so that a row of F16 weights vectorizes. Subnormal halves go through an exact int-to-float
 * product rather than a float32 subnormal, which a flush-to-zero mode would lose. */
static inline float f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    const uint32_t normal = ((exp + 112u) << 23) | (man << 13);
    const uint32_t special = 0x7f800000u | (man << 13);
    const uint32_t sub = f32_to_bits((float)(int32_t)man * 5.9604644775390625e-8f /* 2^-24 */);
    const uint32_t is_special = 0u - (uint32_t)(exp == 0x1fu), is_sub = 0u - (uint32_t)(exp == 0);
    const uint32_t mag = (special & is_special) | (sub & is_sub) | (normal & ~(is_special | is_sub));
    return bits_to_f32(sign | mag);
}

/* MXFP4's E8M0 scale, halved (gguf-py's e8m0_to_fp32_half, llama.cpp's
 * GGML_E8M0_TO_FP32_HALF): 2^(e - 128). */
static inline float e8m0_half(uint8_t e)
{
    return bits_to_f32(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* Bit l of Q5_0's and Q5_1's qh word (a table rather than a variable shift, which SSE2
 * cannot vectorize). */
static const uint32_t bit_of[32] = {
    1u << 0, 1u << 1, 1u << 2, 1u << 3, 1u << 4, 1u << 5, 1u << 6, 1u << 7,
    1u << 8, 1u << 9, 1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
    1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
    1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31,
};

/* Q5_0's and Q5_1's 32 five-bit codes: low nibbles in qs (element l and l + 16 share byte
 * l), bit 4 of element l in bit l of qh. */
static inline void q5_codes(const uint8_t *LQ_RESTRICT qs, uint32_t qh, int q[32])
{
    for (int l = 0; l < 16; l++) {
        q[l] = (qs[l] & 0x0f) | ((qh & bit_of[l]) != 0 ? 16 : 0);
        q[l + 16] = (qs[l] >> 4) | ((qh & bit_of[l + 16]) != 0 ? 16 : 0);
    }
}

/* E2M1 values, doubled (gguf-py's MXFP4.kvalues). */
static const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Q3_K's 16 six-bit scales, minus 32. */
static inline void q3_k_scales(const uint8_t *sc, int sout[16])
{
    for (int j = 0; j < 16; j++) {
        const int low = (sc[j % 8] >> (4 * (j / 8))) & 0x0f;
        const int high = (sc[8 + j % 4] >> (2 * (j / 4))) & 0x03;
        sout[j] = (low | (high << 4)) - 32;
    }
}

/* Q4_K's and Q5_K's eight six-bit scales and minimums (gguf-py's Q4_K.get_scale_min). */
static inline void k4_scale_min(const uint8_t *s, int sc[8], int mn[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 0x3f;
        mn[j] = s[j + 4] & 0x3f;
        sc[j + 4] = (s[j + 8] & 0x0f) | ((s[j] >> 6) << 4);
        mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
}

/* ---- exact mode: blocks to float32 ------------------------------------------------ */
/* Each decoder turns nb blocks at b into nb * block floats at y, with gguf.quants'
 * formulas: the same products and sums in the same order, each rounded to float32. */

static void dq_f32(const uint8_t *LQ_RESTRICT b, int64_t n, float *LQ_RESTRICT y) { memcpy(y, b, (size_t)n * sizeof(float)); }

/* Dense rows go 32 values at a time (a loop the compiler vectorizes), then the rest. */
static void dq_f16(const uint8_t *LQ_RESTRICT b, int64_t n, float *LQ_RESTRICT y)
{
    uint16_t h[32];
    int64_t e = 0;
    for (; e + 32 <= n; e += 32) {
        memcpy(h, b + 2 * e, sizeof h);
        for (int l = 0; l < 32; l++)
            y[e + l] = f16_to_f32(h[l]);
    }
    for (; e < n; e++)
        y[e] = f16_to_f32(rd16(b + 2 * e));
}

static void dq_bf16(const uint8_t *LQ_RESTRICT b, int64_t n, float *LQ_RESTRICT y)
{
    uint16_t h[32];
    int64_t e = 0;
    for (; e + 32 <= n; e += 32) {
        memcpy(h, b + 2 * e, sizeof h);
        for (int l = 0; l < 32; l++)
            y[e + l] = bits_to_f32((uint32_t)h[l] << 16);
    }
    for (; e < n; e++)
        y[e] = bits_to_f32((uint32_t)rd16(b + 2 * e) << 16);
}

static void dq_q4_0(const uint8_t *LQ_RESTRICT b, int64_t nb, float *LQ_RESTRICT y)
{
    for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const float d = f16_to_f32(rd16(b));
        const uint8_t *qs = b + 2;
        for (int l = 0; l < 16; l++) {
            y[l] = d * (float)((qs[l] & 0x0f) - 8);
            y[l + 16] = d * (float)((qs[l] >> 4) - 8);
        }
    }
}

static void dq_q4_1(const uint8_t *LQ_RESTRICT b, int64_t nb, float *LQ_RESTRICT y)
{
    for (int64_t i = 0; i < nb; i++, b += 20, y += 32) {
        const float d = f16_to_f32(rd16(b)), m = f16_to_f32(rd16(b + 2));
        const uint8_t *qs = b + 4;
        for (int l = 0; l < 16; l++) {
            y[l] = d * (float)(qs[l] & 0x0f) + m;
            y[l + 16] = d * (float)(qs[l] >> 4) + m;
        }
    }
}

static void dq_q5_0(const uint8_t *LQ_RESTRICT b, int64_t nb, float *LQ_RESTRICT y)
{
    for (int64_t i = 0; i < nb; i++, b += 22, y += 32) {
        const float d = f16_to_f32(rd16(b));
        int q[32];
        q5_codes(b + 6, rd32(b + 2), q);
        for (int l = 0; l < 32; l++)
            y[l] = d * (float)(q[l] - 16);
    }
}

static void dq_q5_1(const uint8_t *LQ_RESTRICT b, int64_t nb, float *LQ_RESTRICT y)
{
    for (int64_t i = 0; i < nb; i++, b += 24, y += 32) {
        const float d = f16_to_f32(rd16(b)), m = f16_to_f32(rd16(b + 2));
        int q[32];
        q5_codes(b + 8, rd32(b + 4), q);
        for (int l = 0; l < 32; l++)
            y[l] = d * (float)q[l] + m;
    }
}

static void dq_q8_0(const uint8_t *LQ_RESTRICT b, int64_t nb, float *LQ_RESTRICT y)
{
    for (int64_t i = 0; i < nb; i++, b += 34, y += 32) {
        const float d = f16_to_f32(rd16(b));
        const int8_t *qs = (const int8_t *)(b + 2);
        for (int l = 0; l < 32; l++)
            y[l] = (float)qs[l] * d;
    }
}

static void dq_mxfp4(const uint8_t *LQ_RESTRICT b, int64_t nb, float *LQ_RESTRICT y)
{
    for (int64_t i = 0; i < nb; i++, b += 17, y += 32) {
        const float d = e8m0_half(b[0]);
        const uint8_t *qs = b + 1;
        for (int l = 0; l < 16; l++) {
            y[l] = d * (float)mxfp4_values[qs[l] & 0x0f];
            y[l + 16] = d * (float)mxfp4_values[qs[l] >> 4];
        }
    }
}

/* Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin. Element
 * h*128 + s*32 + l is bits 2s..2s+1 of qs[h*32 + l]; group of 16 g = element / 16. */
static void dq_q2_k(const uint8_t *LQ_RESTRICT b, int64_t nb, float *LQ_RESTRICT y)
{
    for (int64_t i = 0; i < nb; i++, b += 84, y += 256) {
        const uint8_t *sc = b, *qs = b + 16;
        const float d = f16_to_f32(rd16(b + 80)), dmin = f16_to_f32(rd16(b + 82));
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int half = 0; half < 2; half++) {
                    const int g = h * 8 + s * 2 + half;
                    const float dl = d * (float)(sc[g] & 0x0f), ml = dmin * (float)(sc[g] >> 4);
                    const uint8_t *q = qs + h * 32 + half * 16;
                    float *out = y + g * 16;
                    for (int l = 0; l < 16; l++)
                        out[l] = dl * (float)((q[l] >> (2 * s)) & 3) - ml;
                }
    }
}

/* Q3_K: hmask[32], qs[64], scales[12], d. Element e = h*128 + s*32 + l: low bits as Q2_K,
 * minus 4 where bit e/32 of hmask[l] is clear. */
static void dq_q3_k(const uint8_t *LQ_RESTRICT b, int64_t nb, float *LQ_RESTRICT y)
{
    for (int64_t i = 0; i < nb; i++, b += 110, y += 256) {
        const uint8_t *hm = b, *qs = b + 32;
        const float d = f16_to_f32(rd16(b + 108));
        int sc[16];
        q3_k_scales(b + 96, sc);
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int half = 0; half < 2; half++) {
                    const int g = h * 8 + s * 2 + half, hbit = h * 4 + s;
                    const float dl = d * (float)sc[g];
                    const uint8_t *q = qs + h * 32 + half * 16, *hq = hm + half * 16;
                    float *out = y + g * 16;
                    for (int l = 0; l < 16; l++) {
                        const int v = ((q[l] >> (2 * s)) & 3) - (((hq[l] >> hbit) & 1) ? 0 : 4);
                        out[l] = dl * (float)v;
                    }
                }
    }
}

/* Q4_K: d, dmin, scales[12], qs[128]. Element c*64 + s*32 + l is nibble s of
 * qs[c*32 + l], in sub-block 2c + s of 32. */
static void dq_q4_k(const uint8_t *LQ_RESTRICT b, int64_t nb, float *LQ_RESTRICT y)
{
    for (int64_t i = 0; i < nb; i++, b += 144, y += 256) {
        const float d = f16_to_f32(rd16(b)), dmin = f16_to_f32(rd16(b + 2));
        const uint8_t *qs = b + 16;
        int sc[8], mn[8];
        k4_scale_min(b + 4, sc, mn);
        for (int j = 0; j < 8; j++) {
            const float dl = d * (float)sc[j], ml = dmin * (float)mn[j];
            const uint8_t *q = qs + (j / 2) * 32;
            const int shift = 4 * (j % 2);
            float *out = y + j * 32;
            for (int l = 0; l < 32; l++)
                out[l] = dl * (float)((q[l] >> shift) & 0x0f) - ml;
        }
    }
}

/* Q5_K: Q4_K plus qh[32] before qs: bit j of qh[l] is bit 4 of sub-block j's element l. */
static void dq_q5_k(const uint8_t *LQ_RESTRICT b, int64_t nb, float *LQ_RESTRICT y)
{
    for (int64_t i = 0; i < nb; i++, b += 176, y += 256) {
        const float d = f16_to_f32(rd16(b)), dmin = f16_to_f32(rd16(b + 2));
        const uint8_t *qh = b + 16, *qs = b + 48;
        int sc[8], mn[8];
        k4_scale_min(b + 4, sc, mn);
        for (int j = 0; j < 8; j++) {
            const float dl = d * (float)sc[j], ml = dmin * (float)mn[j];
            const uint8_t *q = qs + (j / 2) * 32;
            const int shift = 4 * (j % 2);
            float *out = y + j * 32;
            for (int l = 0; l < 32; l++) {
                const int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> j) & 1) << 4);
                out[l] = dl * (float)v - ml;
            }
        }
    }
}

/* Q6_K: ql[128], qh[64], scales[16] (int8), d. Element h*128 + t*32 + l: nibble t/2 of
 * ql[h*64 + (t%2)*32 + l], high bits 2t..2t+1 of qh[h*32 + l], minus 32. */
static void dq_q6_k(const uint8_t *LQ_RESTRICT b, int64_t nb, float *LQ_RESTRICT y)
{
    for (int64_t i = 0; i < nb; i++, b += 210, y += 256) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        const float d = f16_to_f32(rd16(b + 208));
        for (int h = 0; h < 2; h++)
            for (int t = 0; t < 4; t++)
                for (int half = 0; half < 2; half++) {
                    const int g = h * 8 + t * 2 + half;
                    const float dl = d * (float)sc[g];
                    const uint8_t *lo = ql + h * 64 + (t % 2) * 32 + half * 16;
                    const uint8_t *hi = qh + h * 32 + half * 16;
                    float *out = y + g * 16;
                    for (int l = 0; l < 16; l++) {
                        const int v = (((lo[l] >> (4 * (t / 2))) & 0x0f) | (((hi[l] >> (2 * t)) & 3) << 4)) - 32;
                        out[l] = dl * (float)v;
                    }
                }
    }
}

/* n elements (whole blocks) of a weight row at w into y. */
static void decode_exact(int type, const uint8_t *w, int64_t n, float *y)
{
    switch (type) {
    case LQ_F32: dq_f32(w, n, y); break;
    case LQ_F16: dq_f16(w, n, y); break;
    case LQ_BF16: dq_bf16(w, n, y); break;
    case LQ_Q4_0: dq_q4_0(w, n / 32, y); break;
    case LQ_Q4_1: dq_q4_1(w, n / 32, y); break;
    case LQ_Q5_0: dq_q5_0(w, n / 32, y); break;
    case LQ_Q5_1: dq_q5_1(w, n / 32, y); break;
    case LQ_Q8_0: dq_q8_0(w, n / 32, y); break;
    case LQ_MXFP4: dq_mxfp4(w, n / 32, y); break;
    case LQ_Q2_K: dq_q2_k(w, n / 256, y); break;
    case LQ_Q3_K: dq_q3_k(w, n / 256, y); break;
    case LQ_Q4_K: dq_q4_k(w, n / 256, y); break;
    case LQ_Q5_K: dq_q5_k(w, n / 256, y); break;
    case LQ_Q6_K: dq_q6_k(w, n / 256, y); break;
    default: break;
    }
}

void lq_dequantize_row(int type, int64_t k, const void *w, float *out)
{
    if (lq_row_bytes(type, k) != 0)
        decode_exact(type, (const uint8_t *)w, k, out);
}

void lq_gather_rows(int type, int64_t k, const uint8_t *w, const int64_t *ids, int64_t count,
                    float *out)
{
    const size_t rb = lq_row_bytes(type, k);
    if (rb == 0) return;
    for (int64_t i = 0; i < count; i++)
        decode_exact(type, w + (size_t)ids[i] * rb, k, out + (size_t)i * (size_t)k);
}

/* ---- exact mode: the matmul ------------------------------------------------------- */

/* acc[r][l] += sum over e = l mod LANES of w[r][e] * x[e], for PANEL rows at once, e in
 * increasing order. n is a multiple of LANES except in a dense row's last chunk. */
static void lanes_panel(const float *x, const float (*w)[CHUNK_EXACT], int n, float (*acc)[LANES])
{
    const int n8 = n - n % LANES;
    float a0[LANES], a1[LANES], a2[LANES], a3[LANES];
    memcpy(a0, acc[0], sizeof a0);
    memcpy(a1, acc[1], sizeof a1);
    memcpy(a2, acc[2], sizeof a2);
    memcpy(a3, acc[3], sizeof a3);
    for (int e = 0; e < n8; e += LANES)
LQ_UNROLL_LANES
        for (int l = 0; l < LANES; l++) {
            const float xv = x[e + l];
            a0[l] += w[0][e + l] * xv;
            a1[l] += w[1][e + l] * xv;
            a2[l] += w[2][e + l] * xv;
            a3[l] += w[3][e + l] * xv;
        }
    for (int l = 0; l < n - n8; l++) {
        const float xv = x[n8 + l];
        a0[l] += w[0][n8 + l] * xv;
        a1[l] += w[1][n8 + l] * xv;
        a2[l] += w[2][n8 + l] * xv;
        a3[l] += w[3][n8 + l] * xv;
    }
    memcpy(acc[0], a0, sizeof a0);
    memcpy(acc[1], a1, sizeof a1);
    memcpy(acc[2], a2, sizeof a2);
    memcpy(acc[3], a3, sizeof a3);
}

/* The same sums for one row (a panel's last rows): the same operations per lane. */
static void lanes_row(const float *x, const float *w, int n, float acc[LANES])
{
    const int n8 = n - n % LANES;
    float a[LANES];
    memcpy(a, acc, sizeof a);
    for (int e = 0; e < n8; e += LANES)
LQ_UNROLL_LANES
        for (int l = 0; l < LANES; l++)
            a[l] += w[e + l] * x[e + l];
    for (int l = 0; l < n - n8; l++)
        a[l] += w[n8 + l] * x[n8 + l];
    memcpy(acc, a, sizeof a);
}

static float lanes_sum(const float a[LANES])
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

static void exact_portable(int type, int64_t k, int64_t m, const float *x, const uint8_t *w,
                           int64_t j0, int64_t j1, float *y, int64_t ldy)
{
    const size_t rb = lq_row_bytes(type, k);
    const block_format f = format_of(type);
    const int group = m >= MANY_ROWS ? GROUP : PANEL;
    float wbuf[GROUP][CHUNK_EXACT];
    float acc[ITILE][GROUP][LANES];
    if (rb == 0)
        return;
    for (int64_t j = j0; j < j1; j += group) {
        const int np = j1 - j < group ? (int)(j1 - j) : group;
        for (int64_t i0 = 0; i0 < m; i0 += ITILE) {
            const int ni = m - i0 < ITILE ? (int)(m - i0) : ITILE;
            memset(acc, 0, (size_t)ni * sizeof acc[0]);
            for (int64_t c = 0; c < k; c += CHUNK_EXACT) {
                const int nc = k - c < CHUNK_EXACT ? (int)(k - c) : CHUNK_EXACT;
                const size_t off = (size_t)(c / f.block) * (size_t)f.bytes;
                for (int r = 0; r < np; r++)
                    decode_exact(type, w + (size_t)(j + r) * rb + off, nc, wbuf[r]);
                for (int ii = 0; ii < ni; ii++) {
                    const float *xi = x + (i0 + ii) * k + c;
                    int r = 0;
                    for (; r + PANEL <= np; r += PANEL)
                        lanes_panel(xi, (const float (*)[CHUNK_EXACT])(wbuf + r), nc, acc[ii] + r);
                    for (; r < np; r++)
                        lanes_row(xi, wbuf[r], nc, acc[ii][r]);
                }
            }
            for (int ii = 0; ii < ni; ii++)
                for (int r = 0; r < np; r++)
                    y[(i0 + ii) * ldy + j + r] = lanes_sum(acc[ii][r]);
        }
    }
}

/* ---- fast mode: activations -------------------------------------------------------- */

/* Round to nearest, ties away from zero, into [-127, 127]; NaN maps to 0 (its block's
 * scale is NaN then, see act_scale). */
static inline int8_t act_round(float v)
{
    const float r = roundf(v);
    return (int8_t)(r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : (r == r ? r : 0.0f)));
}

/* d = max|x| / 127 over n values; NaN if one of them is NaN, so the outputs that use the
 * block are NaN rather than finite garbage. */
static inline float act_scale(const float *x, int n)
{
    float amax = 0.0f;
    int nan = 0;
    for (int l = 0; l < n; l++) {
        const float a = fabsf(x[l]);
        amax = a > amax ? a : amax;
        nan |= a != a;
    }
    return nan ? NAN : amax / 127.0f;
}

/* Codes x * (1 / d), as llama.cpp computes them; x / d where 1 / d overflows (d subnormal:
 * a block of values below 2^-119), whose codes would otherwise all be 0 or +-127. */
static void act_codes(const float *LQ_RESTRICT x, int n, float d, int8_t *LQ_RESTRICT qs)
{
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (id <= FLT_MAX)
        for (int l = 0; l < n; l++)
            qs[l] = act_round(x[l] * id);
    else
        for (int l = 0; l < n; l++)
            qs[l] = act_round(x[l] / d);
}

static void quantize_act32(const float *x, int64_t nb, lq_act32 *y)
{
    for (int64_t i = 0; i < nb; i++, x += 32, y++) {
        const float d = act_scale(x, 32);
        int sum = 0;
        act_codes(x, 32, d, y->qs);
        for (int l = 0; l < 32; l++)
            sum += y->qs[l];
        y->d = d;
        y->s = d * (float)sum;
    }
}

static void quantize_act256(const float *x, int64_t nb, lq_act256 *y)
{
    for (int64_t i = 0; i < nb; i++, x += 256, y++) {
        for (int j = 0; j < 8; j++) {
            y->d[j] = act_scale(x + 32 * j, 32);
            act_codes(x + 32 * j, 32, y->d[j], y->qs + 32 * j);
        }
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += y->qs[g * 16 + l];
            y->bsums[g] = (int16_t)sum;
        }
        for (int j = 0; j < 8; j++)
            y->s[j] = y->d[j] * (float)(y->bsums[2 * j] + y->bsums[2 * j + 1]);
        for (int c = 0; c < 8; c++)
            for (int j = 0; j < 8; j++)
                memcpy(y->qt + 32 * c + 4 * j, y->qs + 32 * j + 4 * c, 4);
    }
}

void lq_quantize_act(int type, int64_t k, const float *x, void *xq)
{
    const block_format f = format_of(type);
    if (lq_act_bytes(type, k) == 0)
        return;
    if (is_dense(type))
        memcpy(xq, x, (size_t)k * sizeof(float));
    else if (f.block == 32)
        quantize_act32(x, k / 32, (lq_act32 *)xq);
    else
        quantize_act256(x, k / 256, (lq_act256 *)xq);
}

/* ---- fast mode: weight blocks as small integers ------------------------------------ */
/* Decoded once per block for all rows of x, as int16 so that the per-row dot products are
 * int16 x int16 sums (one pmaddwd per 8 values on SSE2, smlal on NEON). */

/* A 32-element block: w = d * q + m (m = 0 for formats without a minimum). */
typedef struct {
    float d, m;
    int16_t q[32];
} blk32;

/* A 256-element block: w = d * q - dmin * mn[g] for element e of group g = e / 16, with q
 * the code times its group's integer scale (at most 128 * 32 = 4096 in magnitude, Q6_K),
 * so that sum(q * x) over the block is llama.cpp's sum over groups of sc * sum(code * x),
 * the same integer. dmin = 0 and mn = 0 for Q3_K and Q6_K. */
typedef struct {
    float d, dmin;
    int16_t mn[16];
    int16_t q[256];
} blk256;

static void fq_q4_0(const uint8_t *LQ_RESTRICT b, int nb, blk32 *LQ_RESTRICT o)
{
    for (int i = 0; i < nb; i++, b += 18, o++) {
        o->d = f16_to_f32(rd16(b));
        o->m = 0.0f;
        for (int l = 0; l < 16; l++) {
            o->q[l] = (int16_t)((b[2 + l] & 0x0f) - 8);
            o->q[l + 16] = (int16_t)((b[2 + l] >> 4) - 8);
        }
    }
}

static void fq_q4_1(const uint8_t *LQ_RESTRICT b, int nb, blk32 *LQ_RESTRICT o)
{
    for (int i = 0; i < nb; i++, b += 20, o++) {
        o->d = f16_to_f32(rd16(b));
        o->m = f16_to_f32(rd16(b + 2));
        for (int l = 0; l < 16; l++) {
            o->q[l] = (int16_t)(b[4 + l] & 0x0f);
            o->q[l + 16] = (int16_t)(b[4 + l] >> 4);
        }
    }
}

static void fq_q5(const uint8_t *LQ_RESTRICT qs, uint32_t qh, int offset, blk32 *LQ_RESTRICT o)
{
    int q[32];
    q5_codes(qs, qh, q);
    for (int l = 0; l < 32; l++)
        o->q[l] = (int16_t)(q[l] - offset);
}

static void fq_q5_0(const uint8_t *LQ_RESTRICT b, int nb, blk32 *LQ_RESTRICT o)
{
    for (int i = 0; i < nb; i++, b += 22, o++) {
        o->d = f16_to_f32(rd16(b));
        o->m = 0.0f;
        fq_q5(b + 6, rd32(b + 2), 16, o);
    }
}

static void fq_q5_1(const uint8_t *LQ_RESTRICT b, int nb, blk32 *LQ_RESTRICT o)
{
    for (int i = 0; i < nb; i++, b += 24, o++) {
        o->d = f16_to_f32(rd16(b));
        o->m = f16_to_f32(rd16(b + 2));
        fq_q5(b + 8, rd32(b + 4), 0, o);
    }
}

static void fq_q8_0(const uint8_t *LQ_RESTRICT b, int nb, blk32 *LQ_RESTRICT o)
{
    for (int i = 0; i < nb; i++, b += 34, o++) {
        const int8_t *qs = (const int8_t *)(b + 2);
        o->d = f16_to_f32(rd16(b));
        o->m = 0.0f;
        for (int l = 0; l < 32; l++)
            o->q[l] = qs[l];
    }
}

static void fq_mxfp4(const uint8_t *LQ_RESTRICT b, int nb, blk32 *LQ_RESTRICT o)
{
    for (int i = 0; i < nb; i++, b += 17, o++) {
        o->d = e8m0_half(b[0]);
        o->m = 0.0f;
        for (int l = 0; l < 16; l++) {
            o->q[l] = mxfp4_values[b[1 + l] & 0x0f];
            o->q[l + 16] = mxfp4_values[b[1 + l] >> 4];
        }
    }
}

static void fq_q2_k(const uint8_t *LQ_RESTRICT b, int nb, blk256 *LQ_RESTRICT o)
{
    for (int i = 0; i < nb; i++, b += 84, o++) {
        const uint8_t *qs = b + 16;
        o->d = f16_to_f32(rd16(b + 80));
        o->dmin = f16_to_f32(rd16(b + 82));
        for (int g = 0; g < 16; g++)
            o->mn[g] = (int16_t)(b[g] >> 4);
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int half = 0; half < 2; half++) {
                    const int g = h * 8 + s * 2 + half, sc = b[g] & 0x0f;
                    const uint8_t *q = qs + h * 32 + half * 16;
                    for (int l = 0; l < 16; l++)
                        o->q[g * 16 + l] = (int16_t)(sc * ((q[l] >> (2 * s)) & 3));
                }
    }
}

static void fq_q3_k(const uint8_t *LQ_RESTRICT b, int nb, blk256 *LQ_RESTRICT o)
{
    for (int i = 0; i < nb; i++, b += 110, o++) {
        const uint8_t *hm = b, *qs = b + 32;
        int sc[16];
        q3_k_scales(b + 96, sc);
        o->d = f16_to_f32(rd16(b + 108));
        o->dmin = 0.0f;
        memset(o->mn, 0, sizeof o->mn);
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int half = 0; half < 2; half++) {
                    const int g = h * 8 + s * 2 + half, hbit = h * 4 + s;
                    const uint8_t *q = qs + h * 32 + half * 16, *hq = hm + half * 16;
                    for (int l = 0; l < 16; l++) {
                        const int v = ((q[l] >> (2 * s)) & 3) - (((hq[l] >> hbit) & 1) ? 0 : 4);
                        o->q[g * 16 + l] = (int16_t)(sc[g] * v);
                    }
                }
    }
}

/* Q4_K and Q5_K: codes of sub-block j of 32 (groups 2j, 2j + 1) at o->q + 32 j, times
 * their scale; the minimums per group. */
static void fq_k4_scales(const uint8_t *LQ_RESTRICT b, blk256 *LQ_RESTRICT o, int sc[8])
{
    int mn[8];
    k4_scale_min(b + 4, sc, mn);
    o->d = f16_to_f32(rd16(b));
    o->dmin = f16_to_f32(rd16(b + 2));
    for (int g = 0; g < 16; g++)
        o->mn[g] = (int16_t)mn[g / 2];
}

static void fq_q4_k(const uint8_t *LQ_RESTRICT b, int nb, blk256 *LQ_RESTRICT o)
{
    for (int i = 0; i < nb; i++, b += 144, o++) {
        const uint8_t *qs = b + 16;
        int sc[8];
        fq_k4_scales(b, o, sc);
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = qs + (j / 2) * 32;
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; l++)
                o->q[j * 32 + l] = (int16_t)(sc[j] * ((q[l] >> shift) & 0x0f));
        }
    }
}

static void fq_q5_k(const uint8_t *LQ_RESTRICT b, int nb, blk256 *LQ_RESTRICT o)
{
    for (int i = 0; i < nb; i++, b += 176, o++) {
        const uint8_t *qh = b + 16, *qs = b + 48;
        int sc[8];
        fq_k4_scales(b, o, sc);
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = qs + (j / 2) * 32;
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; l++) {
                const int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> j) & 1) << 4);
                o->q[j * 32 + l] = (int16_t)(sc[j] * v);
            }
        }
    }
}

static void fq_q6_k(const uint8_t *LQ_RESTRICT b, int nb, blk256 *LQ_RESTRICT o)
{
    for (int i = 0; i < nb; i++, b += 210, o++) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        o->d = f16_to_f32(rd16(b + 208));
        o->dmin = 0.0f;
        memset(o->mn, 0, sizeof o->mn);
        for (int h = 0; h < 2; h++)
            for (int t = 0; t < 4; t++)
                for (int half = 0; half < 2; half++) {
                    const int g = h * 8 + t * 2 + half;
                    const uint8_t *lo = ql + h * 64 + (t % 2) * 32 + half * 16;
                    const uint8_t *hi = qh + h * 32 + half * 16;
                    for (int l = 0; l < 16; l++) {
                        const int v = (((lo[l] >> (4 * (t / 2))) & 0x0f) | (((hi[l] >> (2 * t)) & 3) << 4)) - 32;
                        o->q[g * 16 + l] = (int16_t)(sc[g] * v);
                    }
                }
    }
}

static void decode_fast32(int type, const uint8_t *w, int nb, blk32 *o)
{
    switch (type) {
    case LQ_Q4_0: fq_q4_0(w, nb, o); break;
    case LQ_Q4_1: fq_q4_1(w, nb, o); break;
    case LQ_Q5_0: fq_q5_0(w, nb, o); break;
    case LQ_Q5_1: fq_q5_1(w, nb, o); break;
    case LQ_Q8_0: fq_q8_0(w, nb, o); break;
    case LQ_MXFP4: fq_mxfp4(w, nb, o); break;
    default: break;
    }
}

static void decode_fast256(int type, const uint8_t *w, int nb, blk256 *o)
{
    switch (type) {
    case LQ_Q2_K: fq_q2_k(w, nb, o); break;
    case LQ_Q3_K: fq_q3_k(w, nb, o); break;
    case LQ_Q4_K: fq_q4_k(w, nb, o); break;
    case LQ_Q5_K: fq_q5_k(w, nb, o); break;
    case LQ_Q6_K: fq_q6_k(w, nb, o); break;
    default: break;
    }
}

/* ---- fast mode: block dot products and the matmul ---------------------------------- */

/* One row of x's activation codes for a chunk, widened to int16 once for all weight rows. */
static void widen32(const lq_act32 *LQ_RESTRICT a, int nb, int16_t *LQ_RESTRICT out)
{
    for (int bi = 0; bi < nb; bi++)
        for (int l = 0; l < 32; l++)
            out[bi * 32 + l] = a[bi].qs[l];
}

static void widen256(const lq_act256 *LQ_RESTRICT a, int nb, int16_t *LQ_RESTRICT out)
{
    for (int bi = 0; bi < nb; bi++)
        for (int l = 0; l < 256; l++)
            out[bi * 256 + l] = a[bi].qs[l];
}

static inline int32_t dot_i16(const int16_t *LQ_RESTRICT w, const int16_t *LQ_RESTRICT x, int n)
{
    int32_t s = 0;
    for (int l = 0; l < n; l++)
        s += w[l] * x[l];
    return s;
}

/* dot32 for a panel's rows at once: the activations loaded once for all of them. Each
 * row's integer sum and float term are dot32's. */
static inline void dot32_panel(const blk32 *w0, const blk32 *w1, const blk32 *w2,
                               const blk32 *w3, const lq_act32 *a, const int16_t *LQ_RESTRICT x,
                               float out[PANEL])
{
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int l = 0; l < 32; l++) {
        const int32_t xv = x[l];
        s0 += w0->q[l] * xv;
        s1 += w1->q[l] * xv;
        s2 += w2->q[l] * xv;
        s3 += w3->q[l] * xv;
    }
    out[0] = (w0->d * a->d) * (float)s0 + w0->m * a->s;
    out[1] = (w1->d * a->d) * (float)s1 + w1->m * a->s;
    out[2] = (w2->d * a->d) * (float)s2 + w2->m * a->s;
    out[3] = (w3->d * a->d) * (float)s3 + w3->m * a->s;
}

static inline float dot32(const blk32 *w, const lq_act32 *a, const int16_t *x)
{
    const int32_t s = dot_i16(w->q, x, 32);
    return (w->d * a->d) * (float)s + w->m * a->s;
}

/* One sub-block of 32 (groups 2j, 2j + 1) of a 256-element block against its activations,
 * given its integer sum: d_x[j] * (d_w * sumi_j - dmin_w * summ_j). */
static inline float sub256_term(const blk256 *w, const lq_act256 *a, int j, int32_t sumi)
{
    const int32_t summ = w->mn[2 * j] * a->bsums[2 * j] + w->mn[2 * j + 1] * a->bsums[2 * j + 1];
    return a->d[j] * (w->d * (float)sumi - w->dmin * (float)summ);
}

/* The same, its integer sum taken here. */
static inline float dot256_sub(const blk256 *w, const lq_act256 *a, const int16_t *LQ_RESTRICT x,
                               int j)
{
    return sub256_term(w, a, j, dot_i16(w->q + 32 * j, x + 32 * j, 32));
}

/* A 256-element block: its 8 sub-blocks' terms added in order. */
static inline float dot256(const blk256 *w, const lq_act256 *a, const int16_t *x)
{
    float s = 0.0f;
    for (int j = 0; j < 8; j++)
        s += dot256_sub(w, a, x, j);
    return s;
}

/* dot256 for a panel's rows at once: the activations loaded once for all of them. Each
 * row's integer sums and float operations are dot256's. */
static inline void dot256_panel(const blk256 *const w[PANEL], const lq_act256 *a,
                                const int16_t *LQ_RESTRICT x, float out[PANEL])
{
    float s[PANEL] = {0.0f};
    for (int j = 0; j < 8; j++) {
        int32_t sumi[PANEL] = {0};
        for (int l = 32 * j; l < 32 * j + 32; l++) {
            const int32_t xv = x[l];
            for (int r = 0; r < PANEL; r++)
                sumi[r] += w[r]->q[l] * xv;
        }
        for (int r = 0; r < PANEL; r++)
            s[r] += sub256_term(w[r], a, j, sumi[r]);
    }
    for (int r = 0; r < PANEL; r++)
        out[r] = s[r];
}

static void fast32_portable(int type, int64_t k, int64_t m, const void *xq, const uint8_t *w,
                            int64_t j0, int64_t j1, float *y, int64_t ldy)
{
    enum { NB = CHUNK_FAST / 32 };
    const size_t rb = lq_row_bytes(type, k), ab = lq_act_bytes(type, k);
    const size_t bb = (size_t)format_of(type).bytes;
    blk32 wb[PANEL][NB];
    int16_t x16[CHUNK_FAST];
    float acc[ITILE][PANEL];
    for (int64_t j = j0; j < j1; j += PANEL) {
        const int np = j1 - j < PANEL ? (int)(j1 - j) : PANEL;
        for (int64_t i0 = 0; i0 < m; i0 += ITILE) {
            const int ni = m - i0 < ITILE ? (int)(m - i0) : ITILE;
            memset(acc, 0, (size_t)ni * sizeof acc[0]);
            for (int64_t c = 0; c < k; c += CHUNK_FAST) {
                const int nb = (k - c < CHUNK_FAST ? (int)(k - c) : CHUNK_FAST) / 32;
                for (int r = 0; r < np; r++)
                    decode_fast32(type, w + (size_t)(j + r) * rb + (size_t)(c / 32) * bb, nb, wb[r]);
                for (int ii = 0; ii < ni; ii++) {
                    const lq_act32 *a = (const lq_act32 *)((const uint8_t *)xq + (size_t)(i0 + ii) * ab) + c / 32;
                    widen32(a, nb, x16);
                    if (np == PANEL) {
                        for (int bi = 0; bi < nb; bi++) {
                            float t[PANEL];
                            dot32_panel(&wb[0][bi], &wb[1][bi], &wb[2][bi], &wb[3][bi], &a[bi],
                                        x16 + bi * 32, t);
                            for (int r = 0; r < PANEL; r++)
                                acc[ii][r] += t[r];
                        }
                    } else {
                        for (int r = 0; r < np; r++) {
                            float s = acc[ii][r];
                            for (int bi = 0; bi < nb; bi++)
                                s += dot32(&wb[r][bi], &a[bi], x16 + bi * 32);
                            acc[ii][r] = s;
                        }
                    }
                }
            }
            for (int ii = 0; ii < ni; ii++)
                for (int r = 0; r < np; r++)
                    y[(i0 + ii) * ldy + j + r] = acc[ii][r];
        }
    }
}

static void fast256_portable(int type, int64_t k, int64_t m, const void *xq, const uint8_t *w,
                             int64_t j0, int64_t j1, float *y, int64_t ldy)
{
    enum { NB = CHUNK_FAST / 256 };
    const size_t rb = lq_row_bytes(type, k), ab = lq_act_bytes(type, k);
    const size_t bb = (size_t)format_of(type).bytes;
    blk256 wb[PANEL][NB];
    int16_t x16[CHUNK_FAST];
    float acc[ITILE][PANEL];
    for (int64_t j = j0; j < j1; j += PANEL) {
        const int np = j1 - j < PANEL ? (int)(j1 - j) : PANEL;
        for (int64_t i0 = 0; i0 < m; i0 += ITILE) {
            const int ni = m - i0 < ITILE ? (int)(m - i0) : ITILE;
            memset(acc, 0, (size_t)ni * sizeof acc[0]);
            for (int64_t c = 0; c < k; c += CHUNK_FAST) {
                const int nb = (k - c < CHUNK_FAST ? (int)(k - c) : CHUNK_FAST) / 256;
                for (int r = 0; r < np; r++)
                    decode_fast256(type, w + (size_t)(j + r) * rb + (size_t)(c / 256) * bb, nb, wb[r]);
                for (int ii = 0; ii < ni; ii++) {
                    const lq_act256 *a = (const lq_act256 *)((const uint8_t *)xq + (size_t)(i0 + ii) * ab) + c / 256;
                    widen256(a, nb, x16);
                    if (np == PANEL) {
                        for (int bi = 0; bi < nb; bi++) {
                            const blk256 *const w4[PANEL] = {&wb[0][bi], &wb[1][bi], &wb[2][bi],
                                                             &wb[3][bi]};
                            float t[PANEL];
                            dot256_panel(w4, &a[bi], x16 + bi * 256, t);
                            for (int r = 0; r < PANEL; r++)
                                acc[ii][r] += t[r];
                        }
                    } else {
                        for (int r = 0; r < np; r++) {
                            float s = acc[ii][r];
                            for (int bi = 0; bi < nb; bi++)
                                s += dot256(&wb[r][bi], &a[bi], x16 + bi * 256);
                            acc[ii][r] = s;
                        }
                    }
                }
            }
            for (int ii = 0; ii < ni; ii++)
                for (int r = 0; r < np; r++)
                    y[(i0 + ii) * ldy + j + r] = acc[ii][r];
        }
    }
}

static void fast_portable(int type, int64_t k, int64_t m, const void *xq, const uint8_t *w,
                          int64_t j0, int64_t j1, float *y, int64_t ldy)
{
    const block_format f = format_of(type);
    if (lq_row_bytes(type, k) == 0)
        return;
    if (is_dense(type))
        exact_portable(type, k, m, (const float *)xq, w, j0, j1, y, ldy);
    else if (f.block == 32)
        fast32_portable(type, k, m, xq, w, j0, j1, y, ldy);
    else
        fast256_portable(type, k, m, xq, w, j0, j1, y, ldy);
}

/* ---- dispatch ------------------------------------------------------------------------ */

#ifdef LQ_HAVE_X86
/* LANTERN_KERNELS=portable, read once when the library loads (or, with compilers without
 * constructors, on the first call), turns the x86 kernels off. */
static int x86_enabled = -1;

static int use_x86(void)
{
    if (x86_enabled < 0) {
        const char *v = getenv("LANTERN_KERNELS");
        x86_enabled = !(v != NULL && strcmp(v, "portable") == 0);
    }
    return x86_enabled;
}

#if defined(__GNUC__)
__attribute__((constructor)) static void read_kernels_env(void) { (void)use_x86(); }
#endif
#endif

void lq_matmul_exact(int type, int64_t k, int64_t m, const float *x, const uint8_t *w,
                     int64_t j0, int64_t j1, float *y, int64_t ldy)
{
#ifdef LQ_HAVE_X86
    if (use_x86() && lq_x86_matmul_exact(type, k, m, x, w, j0, j1, y, ldy))
        return;
#endif
    exact_portable(type, k, m, x, w, j0, j1, y, ldy);
}

void lq_matmul_fast(int type, int64_t k, int64_t m, const void *xq, const uint8_t *w,
                    int64_t j0, int64_t j1, float *y, int64_t ldy)
{
#ifdef LQ_HAVE_X86
    if (use_x86() && lq_x86_matmul_fast(type, k, m, xq, w, j0, j1, y, ldy))
        return;
#endif
    fast_portable(type, k, m, xq, w, j0, j1, y, ldy);
}

const char *lq_isa(void)
{
#ifdef LQ_HAVE_X86
    if (use_x86()) {
        const char *isa = lq_x86_isa();
        if (isa != NULL)
            return isa;
    }
#endif
    return "portable";
}
