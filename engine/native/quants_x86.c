/* x86-64 SIMD kernels for Lantern's quantized matmul (contract: quants.h, quants_x86.h).
 *
 * Compiled without -mavx2 or -march flags: every function that uses wide instructions
 * carries a target attribute, and lq_x86_isa picks the widest set this CPU runs, once.
 * The kernel bodies (the second half of this file) are compiled twice, by including this
 * file into itself: once for AVX2+FMA, once for AVX-512 F+BW+VL+VNNI. The AVX-512 set
 * runs the K-quants 512 bits wide (VPDPWSSD applies the sub-block scales), the 32-element
 * formats with VPDPBUSD, and tiles more rows. Formats: Q4_K, Q6_K, Q5_0, Q8_0, Q4_0, fast
 * and exact mode; any other type returns 0 and the portable kernel runs. Built by another
 * compiler than GCC or Clang (MSVC), or for another CPU, the file holds only that answer.
 *
 * Row independence (quants.h): every y[i][j] is computed by the same sequence of
 * operations whatever m, j0 and j1 are. Rows of x are processed in tiles that share each
 * de-quantized weight block (that is what makes prefill fast) and a few rows of W that
 * share each activation load, but each (row of x, row of W) keeps its own accumulators,
 * and a tile of any size runs the same per-pair code.
 *
 * Many rows of x (prefill, from LQ_ROWS16_MIN rows), AVX-512 VNNI, Q4_K and Q6_K: 16 rows
 * of W are interleaved per register (lane j: 4 codes of row j, gathered once per
 * superblock and reused by 256 rows of x), and one VPDPBUSD against 4 activation bytes
 * broadcast makes 16 outputs' group sums; scales and float work follow per lane.
 *
 * Fast mode: the integer sums of a block are exact (as the portable kernels'); the float
 * order differs from the portable kernels'. Q4_K and Q6_K on AVX-512 VNNI: each
 * superblock's exact integer sums (Q4_K: the scaled products and the minimums' sum)
 * become one float each, added to the output's one float accumulator by fused
 * multiply-adds in superblock order, in the one-row path and, lane-wise, in the 16-row
 * kernel alike (hence the same bits). The rest: each block's scaled sum is added
 * lane-wise into 8 float lanes (fused multiply-add), summed across lanes once at the end
 * of the row. The portable kernel adds one float per block in order. Results agree to
 * float rounding.
 * Exact mode: weights are de-quantized with gguf.quants.dequantize's float32 operations in
 * its order (no fused multiply-add there), then multiplied into float32 accumulators.
 *
 * LANTERN_KERNELS (read once, when the library loads): "portable" turns these kernels off, "avx2" caps them at
 * AVX2 (to test that path on an AVX-512 CPU); otherwise the widest supported set runs.
 */
#ifndef LQ_X86_PASS

#include "quants_x86.h"

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "quants.h"

#define LQ_INLINE static inline __attribute__((always_inline))

/* GGUF block sizes in bytes (ggml-common.h). */
enum { LQ_Q4_0_BYTES = 18, LQ_Q5_0_BYTES = 22, LQ_Q8_0_BYTES = 34, LQ_Q4_K_BYTES = 144,
       LQ_Q6_K_BYTES = 210 };

/* Rows of activations one pass over W serves: they stay in L2 while W's rows stream. */
enum { LQ_CHUNK_BYTES = 192 * 1024 };

/* The many-row K-quant kernels (AVX-512 VNNI): LQ_WROWS rows of W interleaved, each
 * decoded superblock serving LQ_XROWS rows of x; used from LQ_ROWS16_MIN rows of x. */
enum { LQ_WROWS = 16, LQ_XROWS = 256, LQ_ROWS16_MIN = 16 };

static int64_t lq_chunk_rows(size_t row_bytes, int tile) {
    int64_t rows = (int64_t)(LQ_CHUNK_BYTES / row_bytes);
    rows -= rows % tile;
    return rows < tile ? tile : rows;
}

#define LQ_X86_PASS 1
#include "quants_x86.c"
#undef LQ_X86_PASS

#define LQ_X86_PASS 2
#include "quants_x86.c"
#undef LQ_X86_PASS

enum { LQ_LEVEL_NONE = 0, LQ_LEVEL_AVX2 = 1, LQ_LEVEL_VNNI = 2 };

static int lq_detect_level(void) {
    unsigned a, b, c, d;
    __builtin_cpu_init();
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C) ||
        !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return LQ_LEVEL_NONE;
    int level = LQ_LEVEL_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
        level = LQ_LEVEL_VNNI;
    const char *want = getenv("LANTERN_KERNELS");
    if (want && strcmp(want, "portable") == 0) return LQ_LEVEL_NONE;
    if (want && strcmp(want, "avx2") == 0) return LQ_LEVEL_AVX2;
    return level;
}

static int lq_level(void) {
    static int level = -1;
    int seen = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (seen < 0) {
        seen = lq_detect_level();
        __atomic_store_n(&level, seen, __ATOMIC_RELAXED);
    }
    return seen;
}

/* LANTERN_KERNELS is read when the library loads, as quants.c reads it. */
__attribute__((constructor)) static void lq_choose_at_load(void) { (void)lq_level(); }

const char *lq_x86_isa(void) {
    switch (lq_level()) {
    case LQ_LEVEL_VNNI: return "avx512-vnni";
    case LQ_LEVEL_AVX2: return "avx2";
    default: return NULL;
    }
}

int lq_x86_matmul_fast(int type, int64_t k, int64_t m, const void *xq, const uint8_t *w,
                       int64_t j0, int64_t j1, float *y, int64_t ldy) {
    switch (lq_level()) {
    case LQ_LEVEL_VNNI: return lq_fast_2(type, k, m, xq, w, j0, j1, y, ldy);
    case LQ_LEVEL_AVX2: return lq_fast_1(type, k, m, xq, w, j0, j1, y, ldy);
    default: return 0;
    }
}

int lq_x86_matmul_exact(int type, int64_t k, int64_t m, const float *x, const uint8_t *w,
                        int64_t j0, int64_t j1, float *y, int64_t ldy) {
    switch (lq_level()) {
    case LQ_LEVEL_VNNI: return lq_exact_2(type, k, m, x, w, j0, j1, y, ldy);
    case LQ_LEVEL_AVX2: return lq_exact_1(type, k, m, x, w, j0, j1, y, ldy);
    default: return 0;
    }
}

#else /* not x86-64 with GCC or Clang: no SIMD kernels here, the portable ones run */

const char *lq_x86_isa(void) { return 0; }

int lq_x86_matmul_fast(int type, int64_t k, int64_t m, const void *xq, const uint8_t *w,
                       int64_t j0, int64_t j1, float *y, int64_t ldy) {
    (void)type; (void)k; (void)m; (void)xq; (void)w; (void)j0; (void)j1; (void)y; (void)ldy;
    return 0;
}

int lq_x86_matmul_exact(int type, int64_t k, int64_t m, const float *x, const uint8_t *w,
                        int64_t j0, int64_t j1, float *y, int64_t ldy) {
    (void)type; (void)k; (void)m; (void)x; (void)w; (void)j0; (void)j1; (void)y; (void)ldy;
    return 0;
}

#endif

#else /* LQ_X86_PASS: the kernels, compiled once per instruction set */

#if LQ_X86_PASS == 1
#define LQ_TARGET __attribute__((target("avx2,fma,f16c")))
#define LQ_IT 4 /* rows of x per tile */
#define LQ_JT 2 /* rows of W per tile (32-element formats) */
#define LQ_KIT 4 /* rows of x per tile (K-quants) */
#define LQ_KJT 1 /* rows of W per tile (K-quants) */
#define LQ_VNNI 0
#define F(name) name##_1
#define LQ_Q4_K_ROWS16 NULL
#define LQ_Q6_K_ROWS16 NULL
#else
#define LQ_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define LQ_IT 8
#define LQ_JT 2
#define LQ_KIT 8
#define LQ_KJT 2
#define LQ_VNNI 1
#define F(name) name##_2
#define LQ_Q4_K_ROWS16 F(q4_k_rows16)
#define LQ_Q6_K_ROWS16 F(q6_k_rows16)
#endif
#define LQ_FN LQ_INLINE LQ_TARGET

LQ_FN float F(half)(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

LQ_FN float F(hsum)(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#if LQ_VNNI
/* The two 256-bit halves of 16 int32 lanes added: 8 lanes. */
LQ_FN __m256i F(halves)(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}
#endif

LQ_FN __m256i F(load)(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Sums of four products u8 x s8 into each int32 lane (|s| <= 127, so no saturation). */
LQ_FN __m256i F(dot_u8s8)(__m256i u, __m256i s) {
#if LQ_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* Keeps the compiler from fusing a rounded product into a later add (exact mode). */
LQ_FN __m256 F(rounded)(__m256 v) {
    __asm__("" : "+x"(v));
    return v;
}

/* ---- 32-element blocks: signed int8 codes, one float16 scale first ---- */

LQ_FN __m256i F(codes_q8_0)(const uint8_t *b) { return F(load)(b + 2); }

LQ_FN __m256i F(codes_q4_0)(const uint8_t *b) {
    /* byte i holds element i (low nibble) and element i + 16 (high nibble) */
    const __m128i q = _mm_loadu_si128((const __m128i *)(b + 2));
    const __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q),
                                       _mm256_set1_epi8(0x0F));
    return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
}

LQ_FN __m256i F(codes_q5_0)(const uint8_t *b) {
    /* qh (4 bytes, little-endian) bit i is element i's fifth bit; value = q - 16 */
    uint32_t qh;
    memcpy(&qh, b + 2, 4);
    const __m128i q = _mm_loadu_si128((const __m128i *)(b + 6));
    const __m256i lo = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q),
                                        _mm256_set1_epi8(0x0F));
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)qh),
        _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202,
                           0x0303030303030303));
    const __m256i bit = _mm256_cmpeq_epi8(
        _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)),
        _mm256_set1_epi64x(-1));
    /* fifth bit clear: q - 16 = nibble - 16 = nibble | 0xF0 as int8 */
    return _mm256_or_si256(lo, _mm256_andnot_si256(bit, _mm256_set1_epi8((char)0xF0)));
}

typedef __m256i (*F(codes32_fn))(const uint8_t *);

/* Weight rows w[0..nj) (row_bytes apart) against rows x[0..ni) (xstride blocks apart):
 * each decoded weight block and each activation block loaded once per tile. */
LQ_FN void F(fast32_tile)(const int nj, const int ni, F(codes32_fn) codes,
                          const size_t bbytes, const int64_t nb, const uint8_t *w,
                          const size_t row_bytes, const lq_act32 *x, const int64_t xstride,
                          float *y, const int64_t ldy) {
    __m256 acc[LQ_JT][LQ_IT];
#pragma GCC unroll 8
    for (int r = 0; r < nj; r++)
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i q[LQ_JT], aq[LQ_JT];
        __m256 dw[LQ_JT];
#pragma GCC unroll 8
        for (int r = 0; r < nj; r++) {
            const uint8_t *blk = w + r * row_bytes + b * bbytes;
            q[r] = codes(blk);
            aq[r] = _mm256_sign_epi8(q[r], q[r]);
            dw[r] = _mm256_set1_ps(F(half)(blk));
        }
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) {
            const lq_act32 *xb = x + t * xstride + b;
            const __m256i xv = F(load)(xb->qs);
            const __m256 dx = _mm256_set1_ps(xb->d);
#pragma GCC unroll 8
            for (int r = 0; r < nj; r++) {
                const __m256i p = F(dot_u8s8)(aq[r], _mm256_sign_epi8(xv, q[r]));
                acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], dx), _mm256_cvtepi32_ps(p),
                                            acc[r][t]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nj; r++)
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) y[t * ldy + r] = F(hsum)(acc[r][t]);
}

LQ_FN void F(fast32)(F(codes32_fn) codes, const size_t bbytes, int64_t k, int64_t m,
                     const lq_act32 *xq, const uint8_t *w, int64_t j0, int64_t j1, float *y,
                     int64_t ldy) {
    const int64_t nb = k / 32;
    const size_t rb = (size_t)nb * bbytes;
    const int64_t chunk = lq_chunk_rows((size_t)nb * sizeof(lq_act32), LQ_IT);
    for (int64_t i0 = 0; i0 < m; i0 += chunk) {
        const int64_t i1 = i0 + chunk < m ? i0 + chunk : m;
        const int64_t tiled = i0 + (i1 - i0) / LQ_IT * LQ_IT;
        int64_t j = j0;
        for (; j + LQ_JT <= j1; j += LQ_JT)
            for (int64_t i = i0; i < tiled; i += LQ_IT)
                F(fast32_tile)(LQ_JT, LQ_IT, codes, bbytes, nb, w + j * rb, rb, xq + i * nb, nb,
                               y + i * ldy + j, ldy);
        for (; j < j1; j++)
            for (int64_t i = i0; i < tiled; i += LQ_IT)
                F(fast32_tile)(1, LQ_IT, codes, bbytes, nb, w + j * rb, rb, xq + i * nb, nb,
                               y + i * ldy + j, ldy);
        /* rows left over (all of them in a one-row decode step): one weight row at a time,
         * which streams W faster than two interleaved rows */
        for (int64_t i = tiled; i < i1; i++)
            for (j = j0; j < j1; j++)
                F(fast32_tile)(1, 1, codes, bbytes, nb, w + j * rb, rb, xq + i * nb, nb,
                               y + i * ldy + j, ldy);
    }
}

/* ---- Q4_K: 256 elements, 8 sub-blocks of 32 with 6-bit scales and minimums ---- */

/* ggml's unpacking: 12 bytes of 6-bit values into bytes sc[0..7] then mn[0..7], built in
 * registers (bytes stored as words and read back as one vector would stall the load). */
LQ_FN __m128i F(q4_k_scales_vec)(const uint8_t *s) {
    uint32_t u0, u1, u2; /* three words, not an array: an array goes through the stack */
    memcpy(&u0, s, 4);
    memcpy(&u1, s + 4, 4);
    memcpy(&u2, s + 8, 4);
    const uint32_t sc03 = u0 & 0x3f3f3f3f, mn03 = u1 & 0x3f3f3f3f;
    const uint32_t sc47 = (u2 & 0x0f0f0f0f) | (((u0 >> 6) & 0x03030303) << 4);
    const uint32_t mn47 = ((u2 >> 4) & 0x0f0f0f0f) | (((u1 >> 6) & 0x03030303) << 4);
    return _mm_set_epi32((int)mn47, (int)mn03, (int)sc47, (int)sc03);
}

LQ_FN void F(q4_k_scales)(const uint8_t *s, uint8_t sc[8], uint8_t mn[8]) {
    const __m128i v = F(q4_k_scales_vec)(s);
    _mm_storel_epi64((__m128i *)sc, v);
    _mm_storel_epi64((__m128i *)mn, _mm_unpackhi_epi64(v, v));
}

#if LQ_VNNI
/* Many rows of x (prefill): 16 rows of W at once, interleaved so that lane j of a register
 * holds row j's 4 codes of one 4-weight group; VPDPBUSD multiplies them by 4 bytes of one
 * activation row broadcast, so one instruction makes 16 outputs' group sums. */

/* One superblock of 16 rows of W, interleaved. */
typedef struct {
    __m512i q[8][8]; /* lane j of q[s][g]: codes 4g .. 4g + 3 of sub-block s, row j (bytes) */
    __m512i sc[8];   /* lane j of sc[s]: sub-block s's scale (int32) */
    __m512i mn[4];   /* lane j of mn[p]: minimums of sub-blocks 2p, 2p + 1 (int16 pair) */
    __m512 d, dmin;
} F(q4_k_rows);

LQ_FN void F(q4_k_interleave)(const uint8_t *w, const size_t rb, const int64_t sb,
                              F(q4_k_rows) *o) {
    const __m512i rows = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)rb));
    const uint8_t *b = w + sb * LQ_Q4_K_BYTES;
    const __m512i nib = _mm512_set1_epi8(0x0F), low6 = _mm512_set1_epi8(0x3F);
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++)
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m512i v = _mm512_i32gather_epi32(rows, b + 16 + 32 * p + 4 * g, 1);
            o->q[2 * p][g] = _mm512_and_si512(v, nib);
            o->q[2 * p + 1][g] = _mm512_and_si512(_mm512_srli_epi32(v, 4), nib);
        }
    const __m512i dd = _mm512_i32gather_epi32(rows, b, 1);
    o->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
    o->dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
    /* q4_k_scales_vec, lane-wise */
    const __m512i u0 = _mm512_i32gather_epi32(rows, b + 4, 1);
    const __m512i u1 = _mm512_i32gather_epi32(rows, b + 8, 1);
    const __m512i u2 = _mm512_i32gather_epi32(rows, b + 12, 1);
    const __m512i three = _mm512_set1_epi8(0x03);
    const __m512i sc03 = _mm512_and_si512(u0, low6), mn03 = _mm512_and_si512(u1, low6);
    const __m512i sc47 = _mm512_or_si512(
        _mm512_and_si512(u2, nib),
        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), three), 4));
    const __m512i mn47 = _mm512_or_si512(
        _mm512_and_si512(_mm512_srli_epi32(u2, 4), nib),
        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), three), 4));
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        o->sc[s] = _mm512_and_si512(_mm512_srli_epi32(sc03, 8 * s), _mm512_set1_epi32(0xFF));
        o->sc[s + 4] = _mm512_and_si512(_mm512_srli_epi32(sc47, 8 * s), _mm512_set1_epi32(0xFF));
    }
    /* bytes m0 m1 m2 m3 as int16 pairs (m0, m1) and (m2, m3) */
    const __m512i lo = _mm512_set1_epi32(0xFF), hi = _mm512_set1_epi32(0xFF0000);
    o->mn[0] = _mm512_or_si512(_mm512_and_si512(mn03, lo),
                               _mm512_and_si512(_mm512_slli_epi32(mn03, 8), hi));
    o->mn[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(mn03, 16), lo),
                               _mm512_and_si512(_mm512_srli_epi32(mn03, 8), hi));
    o->mn[2] = _mm512_or_si512(_mm512_and_si512(mn47, lo),
                               _mm512_and_si512(_mm512_slli_epi32(mn47, 8), hi));
    o->mn[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(mn47, 16), lo),
                               _mm512_and_si512(_mm512_srli_epi32(mn47, 8), hi));
}

/* nt rows of x (xstride superblocks apart) against one interleaved superblock: each
 * output's exact integer sums, then q4_k_scale's float operations, lane-wise. */
LQ_FN void F(q4_k_dot_rows)(const int nt, const F(q4_k_rows) *wd, const lq_act256 *x,
                            const int64_t xstride, __m512 *acc) {
    __m512i tot[4];
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) tot[t] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int s = 0; s < 8; s++) {
        __m512i dot[4];
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) dot[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m512i q = wd->q[s][g];
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                int32_t xv;
                memcpy(&xv, x[t * xstride].qs + 32 * s + 4 * g, 4);
                dot[t] = _mm512_dpbusd_epi32(dot[t], q, _mm512_set1_epi32(xv));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++)
            tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(dot[t], wd->sc[s]));
    }
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
        const lq_act256 *xb = x + t * xstride;
        const __m256i bs = F(load)(xb->bsums);
        /* int16 pairs (sum of sub-block 2p's 32 activations, of 2p + 1's) */
        const __m128i sums = _mm_hadd_epi16(_mm256_castsi256_si128(bs),
                                            _mm256_extracti128_si256(bs, 1));
        __m512i msum = _mm512_setzero_si512();
        msum = _mm512_dpwssd_epi32(msum, wd->mn[0], _mm512_broadcastd_epi32(sums));
        msum = _mm512_dpwssd_epi32(msum, wd->mn[1],
                                   _mm512_broadcastd_epi32(_mm_srli_si128(sums, 4)));
        msum = _mm512_dpwssd_epi32(msum, wd->mn[2],
                                   _mm512_broadcastd_epi32(_mm_srli_si128(sums, 8)));
        msum = _mm512_dpwssd_epi32(msum, wd->mn[3],
                                   _mm512_broadcastd_epi32(_mm_srli_si128(sums, 12)));
        const __m512 xd = _mm512_set1_ps(xb->d);
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(wd->d, xd), _mm512_cvtepi32_ps(tot[t]), acc[t]);
        acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(wd->dmin, xd), _mm512_cvtepi32_ps(msum),
                                  acc[t]);
    }
}

/* W's rows 0 .. 15 (rb bytes apart) against x's rows 0 .. ni - 1 (nsb superblocks apart). */
static LQ_TARGET void F(q4_k_rows16)(const int64_t nsb, const uint8_t *w, const size_t rb,
                                     const lq_act256 *x, const int64_t ni, float *y,
                                     const int64_t ldy) {
    F(q4_k_rows) wd;
    __m512 acc[LQ_XROWS];
    for (int64_t i0 = 0; i0 < ni; i0 += LQ_XROWS) {
        const int nt = (int)(ni - i0 < LQ_XROWS ? ni - i0 : LQ_XROWS);
        for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
        for (int64_t sb = 0; sb < nsb; sb++) {
            F(q4_k_interleave)(w, rb, sb, &wd);
            const lq_act256 *xs = x + i0 * nsb + sb;
            int t = 0;
            for (; t + 4 <= nt; t += 4) F(q4_k_dot_rows)(4, &wd, xs + t * nsb, nsb, acc + t);
            for (; t < nt; t++) F(q4_k_dot_rows)(1, &wd, xs + t * nsb, nsb, acc + t);
        }
        for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + (i0 + t) * ldy, acc[t]);
    }
}

/* 512 bits: one pair of sub-blocks (64 weights) per instruction, VPDPWSSD applying the
 * scales. For superblock sb, h[r][t] gets hadd(total's 8 lanes, msum's 8 lanes): the two
 * exact integer sums of (row t of x, row r of W), 4 lanes each. nj rows of W share each
 * activation load, ni rows of x each decoded weight. */
LQ_FN void F(q4_k_sums)(const int nj, const int ni, const int64_t sb, const uint8_t *w,
                        const size_t rb, const lq_act256 *x, const int64_t xstride,
                        __m256i h[LQ_KJT][LQ_KIT]) {
    __m512i sumi[LQ_KJT][LQ_KIT];
    __m512i scm[LQ_KJT]; /* int16 lanes: the 8 scales, then the 8 minimums */
#pragma GCC unroll 8
    for (int r = 0; r < nj; r++) {
        scm[r] = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(
            _mm256_setzero_si256(), F(q4_k_scales_vec)(w + r * rb + sb * LQ_Q4_K_BYTES + 4),
            0));
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) sumi[r][t] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        /* scale of sub-block 2p for the low 32 products, 2p + 1 for the high ones */
        const __m512i pick = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * p)),
                                                _mm256_set1_epi16((short)(2 * p + 1)), 1);
        __m512i q[LQ_KJT], s[LQ_KJT];
#pragma GCC unroll 8
        for (int r = 0; r < nj; r++) {
            const __m256i q4 = F(load)(w + r * rb + sb * LQ_Q4_K_BYTES + 16 + 32 * p);
            const __m256i nib = _mm256_set1_epi8(0x0F);
            q[r] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(q4, nib)),
                                      _mm256_and_si256(_mm256_srli_epi16(q4, 4), nib), 1);
            s[r] = _mm512_permutexvar_epi16(pick, scm[r]);
        }
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) {
            const __m512i xs = _mm512_loadu_si512(x[t * xstride + sb].qs + 64 * p);
#pragma GCC unroll 8
            for (int r = 0; r < nj; r++)
                sumi[r][t] = _mm512_dpwssd_epi32(sumi[r][t], _mm512_maddubs_epi16(q[r], xs), s[r]);
        }
    }
    /* [m0, m0, m1, m1, ...]: against the 16 bsums, m_s times its sub-block's sum */
    const __m512i minpick = _mm512_castsi256_si512(
        _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
#pragma GCC unroll 8
    for (int r = 0; r < nj; r++) {
        const __m256i mins = _mm512_castsi512_si256(_mm512_permutexvar_epi16(minpick, scm[r]));
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++)
            h[r][t] = _mm256_hadd_epi32(
                F(halves)(sumi[r][t]), _mm256_madd_epi16(mins, F(load)(x[t * xstride + sb].bsums)));
    }
}

/* A Q4_K superblock's float work for one (row of x, row of W): acc plus (d * xd) * total
 * minus (dmin * xd) * msum, two fused multiply-adds of the exact integer sums. The 16-row
 * kernel above does these same operations per lane, so every path gives the same bits. */
LQ_FN float F(q4_k_scale)(float acc, const uint8_t *blk, float xd, float total, float msum) {
    acc = __builtin_fmaf(F(half)(blk) * xd, total, acc);
    return __builtin_fmaf(-(F(half)(blk + 2) * xd), msum, acc);
}

/* Each (row of x, row of W) adds one float per superblock, q4_k_scale. */
LQ_FN void F(q4_k_tile)(const int nj, const int ni, const int64_t nsb, const uint8_t *w,
                        const size_t rb, const lq_act256 *x, const int64_t xstride, float *y,
                        const int64_t ldy) {
    float acc[LQ_KJT][LQ_KIT];
    __m256i ha[LQ_KJT][LQ_KIT], hb[LQ_KJT][LQ_KIT];
#pragma GCC unroll 8
    for (int r = 0; r < nj; r++)
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) acc[r][t] = 0.0f;
    /* two rows of W: their four sums of one superblock come out of one reduction */
    for (int64_t sb = 0; nj == 2 && sb < nsb; sb++) {
        F(q4_k_sums)(nj, ni, sb, w, rb, x, xstride, ha);
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) {
            const __m256i hh = _mm256_hadd_epi32(ha[0][t], ha[1][t]);
            /* total, msum of row 0 of W, then of row 1 */
            const __m128 f = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(hh),
                                                           _mm256_extracti128_si256(hh, 1)));
            const uint8_t *blk = w + sb * LQ_Q4_K_BYTES;
            const float xd = x[t * xstride + sb].d;
            acc[0][t] = F(q4_k_scale)(acc[0][t], blk, xd, _mm_cvtss_f32(f),
                                      _mm_cvtss_f32(_mm_movehdup_ps(f)));
            acc[1][t] = F(q4_k_scale)(acc[1][t], blk + rb, xd, _mm_cvtss_f32(_mm_movehl_ps(f, f)),
                                      _mm_cvtss_f32(_mm_shuffle_ps(f, f, 3)));
        }
    }
    /* one row of W: two superblocks' four sums out of one reduction */
    for (int64_t sb = 0; nj == 1 && sb < nsb; sb += 2) {
        const int two = sb + 1 < nsb;
        F(q4_k_sums)(nj, ni, sb, w, rb, x, xstride, ha);
        if (two)
            F(q4_k_sums)(nj, ni, sb + 1, w, rb, x, xstride, hb);
        else /* the last, alone */
#pragma GCC unroll 8
            for (int r = 0; r < nj; r++)
#pragma GCC unroll 8
                for (int t = 0; t < ni; t++) hb[r][t] = ha[r][t];
#pragma GCC unroll 8
        for (int r = 0; r < nj; r++)
#pragma GCC unroll 8
            for (int t = 0; t < ni; t++) {
                const __m256i hh = _mm256_hadd_epi32(ha[r][t], hb[r][t]);
                /* total, msum of superblock sb, then of sb + 1 */
                const __m128 f = _mm_cvtepi32_ps(_mm_add_epi32(
                    _mm256_castsi256_si128(hh), _mm256_extracti128_si256(hh, 1)));
                const uint8_t *blk = w + r * rb + sb * LQ_Q4_K_BYTES;
                const lq_act256 *xb = x + t * xstride + sb;
                acc[r][t] = F(q4_k_scale)(acc[r][t], blk, xb->d, _mm_cvtss_f32(f),
                                          _mm_cvtss_f32(_mm_movehdup_ps(f)));
                if (two)
                    acc[r][t] = F(q4_k_scale)(acc[r][t], blk + LQ_Q4_K_BYTES, xb[1].d,
                                              _mm_cvtss_f32(_mm_movehl_ps(f, f)),
                                              _mm_cvtss_f32(_mm_shuffle_ps(f, f, 3)));
            }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nj; r++)
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) y[t * ldy + r] = acc[r][t];
}

#else
/* 256 bits, one row of W (nj is 1). */
LQ_FN void F(q4_k_tile)(const int nj, const int nt, const int64_t nsb, const uint8_t *wrow,
                        const size_t rb, const lq_act256 *x, const int64_t xstride, float *y,
                        const int64_t ldy) {
    (void)nj;
    (void)rb;
    __m256 acc[LQ_KIT];
    __m256i sumi[LQ_KIT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *blk = wrow + sb * LQ_Q4_K_BYTES;
        const __m128i scmn = F(q4_k_scales_vec)(blk + 4);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(scmn, scmn));
        /* the 8 scales as words in both halves: each sub-block's is shuffled out of a
         * register (no store and byte reloads per sub-block) */
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scmn));
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            /* 32 bytes: sub-block 2p in the low nibbles, 2p + 1 in the high ones */
            const __m256i q4 = F(load)(blk + 16 + 32 * p);
            const __m256i lo = _mm256_and_si256(q4, _mm256_set1_epi8(0x0F));
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), _mm256_set1_epi8(0x0F));
            const __m256i slo = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0404 * p)));
            const __m256i shi = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0302 + 0x0404 * p)));
#pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const int8_t *xs = x[t * xstride + sb].qs + 64 * p;
                const __m256i a = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, F(load)(xs)), slo);
                const __m256i b = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, F(load)(xs + 32)), shi);
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(a, b));
            }
        }
        const float d = F(half)(blk), dmin = F(half)(blk + 2);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const lq_act256 *xb = x + t * xstride + sb;
            /* minimums: m_s times the sum of the sub-block's 32 activations */
            const __m256i bs = F(load)(xb->bsums);
            const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs),
                                                 _mm256_extracti128_si256(bs, 1));
            const __m256i msum = _mm256_inserti128_si256(
                _mm256_setzero_si256(), _mm_madd_epi16(mins, pairs), 0);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(sumi[t]),
                                     acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * xb->d), _mm256_cvtepi32_ps(msum),
                                      acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) y[t * ldy] = F(hsum)(acc[t]);
}

#endif

/* ---- Q6_K: 256 elements, 16 sub-blocks of 16 with int8 scales, codes q - 32 ---- */

/* Elements 128h + 32n .. + 31 as unsigned codes 0..63. */
LQ_FN __m256i F(q6_k_codes)(const uint8_t *blk, int h, int n) {
    __m256i lo = F(load)(blk + 64 * h + 32 * (n & 1));
    if (n >= 2) lo = _mm256_srli_epi16(lo, 4);
    lo = _mm256_and_si256(lo, _mm256_set1_epi8(0x0F));
    __m256i hi = _mm256_srli_epi16(F(load)(blk + 128 + 32 * h), 2 * n);
    hi = _mm256_slli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(0x03)), 4);
    return _mm256_or_si256(lo, hi);
}

#if LQ_VNNI
/* Scales of sub-blocks g .. g + 3 for the 32 int16 lanes of a 64-weight product, picked
 * from the 16 scales as int16 (lanes 0..15 of sc16). */
LQ_FN __m512i F(q6_k_scales4)(__m512i sc16, int g) {
    const __m512i idx = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16((short)(g + 1)),
                                                _mm_set1_epi16((short)g))),
        _mm256_set_m128i(_mm_set1_epi16((short)(g + 3)), _mm_set1_epi16((short)(g + 2))), 1);
    return _mm512_permutexvar_epi16(idx, sc16);
}

/* For superblock sb, h[r][t] gets the exact integer sum of (row t of x, row r of W) in 8
 * lanes: the codes' products, scaled, less their offset 32. */
LQ_FN void F(q6_k_sums)(const int nj, const int ni, const int64_t sb, const uint8_t *w,
                        const size_t rb, const lq_act256 *x, const int64_t xstride,
                        __m256i h8[LQ_KJT][LQ_KIT]) {
    __m512i sumi[LQ_KJT][LQ_KIT];
    const __m512i nib = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(0x03);
    const __m512i shift_a = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i shift_b = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
#pragma GCC unroll 8
    for (int r = 0; r < nj; r++)
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) sumi[r][t] = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        /* a: elements 128h .. + 63, b: 128h + 64 .. + 127, as unsigned codes 0..63 */
        __m512i a[LQ_KJT], b[LQ_KJT], sa[LQ_KJT], sb4[LQ_KJT];
#pragma GCC unroll 8
        for (int r = 0; r < nj; r++) {
            const uint8_t *blk = w + r * rb + sb * LQ_Q6_K_BYTES;
            const __m512i ql = _mm512_loadu_si512(blk + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(F(load)(blk + 128 + 32 * h));
            const __m512i sc16 = _mm512_castsi256_si512(
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192))));
            a[r] = _mm512_or_si512(
                _mm512_and_si512(ql, nib),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_a), two), 4));
            b[r] = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(ql, 4), nib),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_b), two), 4));
            sa[r] = F(q6_k_scales4)(sc16, 8 * h);
            sb4[r] = F(q6_k_scales4)(sc16, 8 * h + 4);
        }
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) {
            const int8_t *xs = x[t * xstride + sb].qs + 128 * h;
            const __m512i x0 = _mm512_loadu_si512(xs), x1 = _mm512_loadu_si512(xs + 64);
#pragma GCC unroll 8
            for (int r = 0; r < nj; r++) {
                sumi[r][t] = _mm512_dpwssd_epi32(sumi[r][t], _mm512_maddubs_epi16(a[r], x0), sa[r]);
                sumi[r][t] = _mm512_dpwssd_epi32(sumi[r][t], _mm512_maddubs_epi16(b[r], x1), sb4[r]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nj; r++) {
        const uint8_t *blk = w + r * rb + sb * LQ_Q6_K_BYTES;
        const __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) {
            /* the codes' offset: 32 * sum over sub-blocks of scale * activation sum */
            const __m256i off = _mm256_slli_epi32(
                _mm256_madd_epi16(scales, F(load)(x[t * xstride + sb].bsums)), 5);
            h8[r][t] = _mm256_sub_epi32(F(halves)(sumi[r][t]), off);
        }
    }
}

/* Per superblock one float operation per (row of x, row of W), acc + (d * xd) * total,
 * as the 16-row kernel does per lane. */
LQ_FN void F(q6_k_tile)(const int nj, const int ni, const int64_t nsb, const uint8_t *w,
                        const size_t rb, const lq_act256 *x, const int64_t xstride, float *y,
                        const int64_t ldy) {
    float acc[LQ_KJT][LQ_KIT];
    __m256i ha[LQ_KJT][LQ_KIT], hb[LQ_KJT][LQ_KIT];
#pragma GCC unroll 8
    for (int r = 0; r < nj; r++)
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) acc[r][t] = 0.0f;
    /* two rows of W: their sums of one superblock out of one reduction */
    for (int64_t sb = 0; nj == 2 && sb < nsb; sb++) {
        F(q6_k_sums)(nj, ni, sb, w, rb, x, xstride, ha);
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) {
            const __m256i hh = _mm256_hadd_epi32(ha[0][t], ha[1][t]);
            const __m128i q = _mm_add_epi32(_mm256_castsi256_si128(hh),
                                            _mm256_extracti128_si256(hh, 1));
            /* total of row 0 of W, of row 1, again */
            const __m128 f = _mm_cvtepi32_ps(_mm_hadd_epi32(q, q));
            const uint8_t *blk = w + sb * LQ_Q6_K_BYTES;
            const float xd = x[t * xstride + sb].d;
            acc[0][t] = __builtin_fmaf(F(half)(blk + 208) * xd, _mm_cvtss_f32(f), acc[0][t]);
            acc[1][t] = __builtin_fmaf(F(half)(blk + rb + 208) * xd,
                                       _mm_cvtss_f32(_mm_movehdup_ps(f)), acc[1][t]);
        }
    }
    /* one row of W: two superblocks' sums out of one reduction */
    for (int64_t sb = 0; nj == 1 && sb < nsb; sb += 2) {
        const int two = sb + 1 < nsb;
        F(q6_k_sums)(nj, ni, sb, w, rb, x, xstride, ha);
        if (two)
            F(q6_k_sums)(nj, ni, sb + 1, w, rb, x, xstride, hb);
        else /* the last, alone */
#pragma GCC unroll 8
            for (int r = 0; r < nj; r++)
#pragma GCC unroll 8
                for (int t = 0; t < ni; t++) hb[r][t] = ha[r][t];
#pragma GCC unroll 8
        for (int r = 0; r < nj; r++)
#pragma GCC unroll 8
            for (int t = 0; t < ni; t++) {
                const __m256i hh = _mm256_hadd_epi32(ha[r][t], hb[r][t]);
                const __m128i q = _mm_add_epi32(_mm256_castsi256_si128(hh),
                                                _mm256_extracti128_si256(hh, 1));
                /* total of superblock sb, of sb + 1, again */
                const __m128 f = _mm_cvtepi32_ps(_mm_hadd_epi32(q, q));
                const uint8_t *blk = w + r * rb + sb * LQ_Q6_K_BYTES;
                const lq_act256 *xb = x + t * xstride + sb;
                acc[r][t] = __builtin_fmaf(F(half)(blk + 208) * xb->d, _mm_cvtss_f32(f),
                                           acc[r][t]);
                if (two)
                    acc[r][t] = __builtin_fmaf(F(half)(blk + LQ_Q6_K_BYTES + 208) * xb[1].d,
                                               _mm_cvtss_f32(_mm_movehdup_ps(f)), acc[r][t]);
            }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nj; r++)
#pragma GCC unroll 8
        for (int t = 0; t < ni; t++) y[t * ldy + r] = acc[r][t];
}

/* One superblock of 16 rows of W, interleaved (as F(q4_k_rows)). */
typedef struct {
    __m512i q[16][4]; /* lane j of q[s][g]: codes 4g .. 4g + 3 of sub-block s (0..63) */
    __m512i sc[16];   /* lane j of sc[s]: sub-block s's scale (int32) */
    __m512i scp[8];   /* lane j of scp[p]: scales of sub-blocks 2p, 2p + 1 (int16 pair) */
    __m512 d;
} F(q6_k_rows);

LQ_FN void F(q6_k_interleave)(const uint8_t *w, const size_t rb, const int64_t sb,
                              F(q6_k_rows) *o) {
    const __m512i rows = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)rb));
    const uint8_t *b = w + sb * LQ_Q6_K_BYTES;
    const __m512i nib = _mm512_set1_epi8(0x0F), three = _mm512_set1_epi8(0x03);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            /* elements 128h + 32n + 4g .. + 3, n = 0..3: sub-block 8h + 2n + g / 4 */
            const __m512i l0 = _mm512_i32gather_epi32(rows, b + 64 * h + 4 * g, 1);
            const __m512i l1 = _mm512_i32gather_epi32(rows, b + 64 * h + 32 + 4 * g, 1);
            const __m512i hi = _mm512_i32gather_epi32(rows, b + 128 + 32 * h + 4 * g, 1);
#pragma GCC unroll 4
            for (int n = 0; n < 4; n++) {
                __m512i lo = n & 1 ? l1 : l0;
                if (n >= 2) lo = _mm512_srli_epi32(lo, 4);
                const __m512i top = _mm512_slli_epi32(
                    _mm512_and_si512(_mm512_srli_epi32(hi, 2 * n), three), 4);
                o->q[8 * h + 2 * n + g / 4][g % 4] = _mm512_or_si512(_mm512_and_si512(lo, nib), top);
            }
        }
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
        const __m512i v = _mm512_i32gather_epi32(rows, b + 192 + 4 * u, 1); /* 4 int8 scales */
#pragma GCC unroll 4
        for (int s = 0; s < 4; s++)
            o->sc[4 * u + s] = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * s), 24);
        /* int16 pairs: (scale 4u, 4u + 1), (4u + 2, 4u + 3) */
        const __m512i low16 = _mm512_set1_epi32(0xFFFF);
        o->scp[2 * u] = _mm512_or_si512(_mm512_and_si512(o->sc[4 * u], low16),
                                        _mm512_slli_epi32(o->sc[4 * u + 1], 16));
        o->scp[2 * u + 1] = _mm512_or_si512(_mm512_and_si512(o->sc[4 * u + 2], low16),
                                            _mm512_slli_epi32(o->sc[4 * u + 3], 16));
    }
    o->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(
        _mm512_i32gather_epi32(rows, b + 208, 1)));
}

LQ_FN void F(q6_k_dot_rows)(const int nt, const F(q6_k_rows) *wd, const lq_act256 *x,
                            const int64_t xstride, __m512 *acc) {
    __m512i tot[4];
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) tot[t] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int s = 0; s < 16; s++) {
        __m512i dot[4];
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++) dot[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m512i q = wd->q[s][g];
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                int32_t xv;
                memcpy(&xv, x[t * xstride].qs + 16 * s + 4 * g, 4);
                dot[t] = _mm512_dpbusd_epi32(dot[t], q, _mm512_set1_epi32(xv));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++)
            tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(dot[t], wd->sc[s]));
    }
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
        const lq_act256 *xb = x + t * xstride;
        __m512i off = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) {
            int32_t pair;
            memcpy(&pair, xb->bsums + 2 * p, 4);
            off = _mm512_dpwssd_epi32(off, wd->scp[p], _mm512_set1_epi32(pair));
        }
        const __m512i total = _mm512_sub_epi32(tot[t], _mm512_slli_epi32(off, 5));
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(wd->d, _mm512_set1_ps(xb->d)),
                                 _mm512_cvtepi32_ps(total), acc[t]);
    }
}

static LQ_TARGET void F(q6_k_rows16)(const int64_t nsb, const uint8_t *w, const size_t rb,
                                     const lq_act256 *x, const int64_t ni, float *y,
                                     const int64_t ldy) {
    F(q6_k_rows) wd;
    __m512 acc[LQ_XROWS];
    for (int64_t i0 = 0; i0 < ni; i0 += LQ_XROWS) {
        const int nt = (int)(ni - i0 < LQ_XROWS ? ni - i0 : LQ_XROWS);
        for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
        for (int64_t sb = 0; sb < nsb; sb++) {
            F(q6_k_interleave)(w, rb, sb, &wd);
            const lq_act256 *xs = x + i0 * nsb + sb;
            int t = 0;
            for (; t + 4 <= nt; t += 4) F(q6_k_dot_rows)(4, &wd, xs + t * nsb, nsb, acc + t);
            for (; t < nt; t++) F(q6_k_dot_rows)(1, &wd, xs + t * nsb, nsb, acc + t);
        }
        for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + (i0 + t) * ldy, acc[t]);
    }
}

#else
/* 256 bits, one row of W (nj is 1). */
LQ_FN void F(q6_k_tile)(const int nj, const int nt, const int64_t nsb, const uint8_t *wrow,
                        const size_t rb, const lq_act256 *x, const int64_t xstride, float *y,
                        const int64_t ldy) {
    (void)nj;
    (void)rb;
    __m256 acc[LQ_KIT];
    __m256i sumi[LQ_KIT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *blk = wrow + sb * LQ_Q6_K_BYTES;
        const int8_t *sc = (const int8_t *)(blk + 192);
        /* the 16 scales as words, 8 at a time in both halves: sub-blocks g (low half) and
         * g + 1 (high half) are shuffled out of a register, not loaded byte by byte */
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)sc);
        const __m256i sc16[2] = {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc8)),
                                 _mm256_broadcastsi128_si256(
                                     _mm_cvtepi8_epi16(_mm_unpackhi_epi64(sc8, sc8)))};
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
#pragma GCC unroll 4
            for (int n = 0; n < 4; n++) {
                const __m256i q = F(q6_k_codes)(blk, h, n);
                const __m256i s = _mm256_shuffle_epi8(
                    sc16[h], _mm256_set_m128i(_mm_set1_epi16((short)(0x0302 + 0x0404 * n)),
                                              _mm_set1_epi16((short)(0x0100 + 0x0404 * n))));
#pragma GCC unroll 8
                for (int t = 0; t < nt; t++) {
                    const __m256i xs = F(load)(x[t * xstride + sb].qs + 128 * h + 32 * n);
                    sumi[t] = _mm256_add_epi32(
                        sumi[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xs), s));
                }
            }
        }
        const __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        const float d = F(half)(blk + 208);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const lq_act256 *xb = x + t * xstride + sb;
            /* the codes' offset: 32 * sum over sub-blocks of scale * activation sum */
            const __m256i off = _mm256_madd_epi16(scales, F(load)(xb->bsums));
            const __m256i total = _mm256_sub_epi32(sumi[t], _mm256_slli_epi32(off, 5));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(total), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) y[t * ldy] = F(hsum)(acc[t]);
}

#endif

typedef void (*F(tile256_fn))(int, int, int64_t, const uint8_t *, size_t, const lq_act256 *,
                              int64_t, float *, int64_t);

/* Rows of W 0 .. 15 against ni rows of x, for the many-row products (NULL: none). */
typedef void (*F(rows16_fn))(int64_t, const uint8_t *, size_t, const lq_act256 *, int64_t,
                             float *, int64_t);

LQ_FN void F(fast256)(F(tile256_fn) tile, F(rows16_fn) rows16, const size_t bbytes,
                      int64_t k, int64_t m, const lq_act256 *xq, const uint8_t *w, int64_t j0,
                      int64_t j1, float *y, int64_t ldy) {
    const int64_t nsb = k / 256;
    const size_t rb = (size_t)nsb * bbytes;
    const int64_t chunk = lq_chunk_rows((size_t)nsb * sizeof(lq_act256), LQ_KIT);
    /* many rows: whole groups of LQ_WROWS rows of W by the 16-row kernel, LQ_XROWS rows of
     * x at a time (they stay in L2 while W's rows stream) */
    const int64_t jr = rows16 && m >= LQ_ROWS16_MIN ? j0 + (j1 - j0) / LQ_WROWS * LQ_WROWS : j0;
    for (int64_t i0 = 0; i0 < m && jr > j0; i0 += LQ_XROWS)
        for (int64_t j = j0; j < jr; j += LQ_WROWS)
            rows16(nsb, w + j * rb, rb, xq + i0 * nsb, m - i0 < LQ_XROWS ? m - i0 : LQ_XROWS,
                   y + i0 * ldy + j, ldy);
    /* the rest: the same float operations per output, in tiles */
    for (int64_t i0 = 0; i0 < m; i0 += chunk) {
        const int64_t i1 = i0 + chunk < m ? i0 + chunk : m;
        int64_t j = jr;
        const int64_t tiled = i0 + (i1 - i0) / LQ_KIT * LQ_KIT;
        for (; j + LQ_KJT <= j1; j += LQ_KJT)
            for (int64_t i = i0; i < tiled; i += LQ_KIT)
                tile(LQ_KJT, LQ_KIT, nsb, w + j * rb, rb, xq + i * nsb, nsb, y + i * ldy + j, ldy);
        for (; j < j1; j++)
            for (int64_t i = i0; i < tiled; i += LQ_KIT)
                tile(1, LQ_KIT, nsb, w + j * rb, rb, xq + i * nsb, nsb, y + i * ldy + j, ldy);
        /* rows left over (all of them in a one-row decode step): one weight row at a time */
        for (int64_t i = tiled; i < i1; i++)
            for (j = jr; j < j1; j++)
                tile(1, 1, nsb, w + j * rb, rb, xq + i * nsb, nsb, y + i * ldy + j, ldy);
    }
}

LQ_TARGET static int F(lq_fast)(int type, int64_t k, int64_t m, const void *xq,
                                const uint8_t *w, int64_t j0, int64_t j1, float *y,
                                int64_t ldy) {
    switch (type) {
    case LQ_Q8_0:
        if (k % 32) return 0;
        F(fast32)(F(codes_q8_0), LQ_Q8_0_BYTES, k, m, xq, w, j0, j1, y, ldy);
        return 1;
    case LQ_Q5_0:
        if (k % 32) return 0;
        F(fast32)(F(codes_q5_0), LQ_Q5_0_BYTES, k, m, xq, w, j0, j1, y, ldy);
        return 1;
    case LQ_Q4_0:
        if (k % 32) return 0;
        F(fast32)(F(codes_q4_0), LQ_Q4_0_BYTES, k, m, xq, w, j0, j1, y, ldy);
        return 1;
    case LQ_Q4_K:
        if (k % 256) return 0;
        F(fast256)(F(q4_k_tile), LQ_Q4_K_ROWS16, LQ_Q4_K_BYTES, k, m, xq, w, j0, j1, y, ldy);
        return 1;
    case LQ_Q6_K:
        if (k % 256) return 0;
        F(fast256)(F(q6_k_tile), LQ_Q6_K_ROWS16, LQ_Q6_K_BYTES, k, m, xq, w, j0, j1, y, ldy);
        return 1;
    default:
        return 0;
    }
}

/* ---- exact mode: 32 weights at a time as float32, exactly gguf's de-quantized values ---- */

LQ_FN void F(int8_to_floats)(__m256i q, __m256 scale, __m256 out[4]) {
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    out[0] = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)));
    out[1] = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))));
    out[2] = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)));
    out[3] = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))));
}

/* gguf: d * q */
LQ_FN void F(exact_q8_0)(const uint8_t *row, int64_t g, __m256 out[4]) {
    const uint8_t *b = row + g * LQ_Q8_0_BYTES;
    F(int8_to_floats)(F(codes_q8_0)(b), _mm256_set1_ps(F(half)(b)), out);
}

LQ_FN void F(exact_q4_0)(const uint8_t *row, int64_t g, __m256 out[4]) {
    const uint8_t *b = row + g * LQ_Q4_0_BYTES;
    F(int8_to_floats)(F(codes_q4_0)(b), _mm256_set1_ps(F(half)(b)), out);
}

LQ_FN void F(exact_q5_0)(const uint8_t *row, int64_t g, __m256 out[4]) {
    const uint8_t *b = row + g * LQ_Q5_0_BYTES;
    F(int8_to_floats)(F(codes_q5_0)(b), _mm256_set1_ps(F(half)(b)), out);
}

/* gguf: (d * sc) * q - (dmin * m), each product rounded to float32 */
LQ_FN void F(exact_q4_k)(const uint8_t *row, int64_t g, __m256 out[4]) {
    const uint8_t *blk = row + (g / 8) * LQ_Q4_K_BYTES;
    const int s = (int)(g % 8);
    uint8_t sc[8], mn[8];
    F(q4_k_scales)(blk + 4, sc, mn);
    const __m256 dsc = _mm256_set1_ps(F(half)(blk) * (float)sc[s]);
    const __m256 dm = _mm256_set1_ps(F(half)(blk + 2) * (float)mn[s]);
    __m128i q = _mm_loadu_si128((const __m128i *)(blk + 16 + 32 * (s / 2)));
    __m128i q2 = _mm_loadu_si128((const __m128i *)(blk + 32 + 32 * (s / 2)));
    if (s & 1) {
        q = _mm_srli_epi16(q, 4);
        q2 = _mm_srli_epi16(q2, 4);
    }
    const __m256i codes = _mm256_and_si256(_mm256_set_m128i(q2, q), _mm256_set1_epi8(0x0F));
    F(int8_to_floats)(codes, dsc, out);
    for (int i = 0; i < 4; i++) out[i] = _mm256_sub_ps(F(rounded)(out[i]), dm);
}

/* gguf: (d * sc) * (q - 32), sc per 16 elements */
LQ_FN void F(exact_q6_k)(const uint8_t *row, int64_t g, __m256 out[4]) {
    const uint8_t *blk = row + (g / 8) * LQ_Q6_K_BYTES;
    const int h = (int)(g % 8) / 4, n = (int)(g % 4);
    const int8_t *sc = (const int8_t *)(blk + 192) + 8 * h + 2 * n;
    const float d = F(half)(blk + 208);
    const __m256i q = _mm256_sub_epi8(F(q6_k_codes)(blk, h, n), _mm256_set1_epi8(32));
    __m256 first[4], second[4];
    F(int8_to_floats)(q, _mm256_set1_ps(d * (float)sc[0]), first);
    F(int8_to_floats)(q, _mm256_set1_ps(d * (float)sc[1]), second);
    out[0] = first[0];
    out[1] = first[1];
    out[2] = second[2];
    out[3] = second[3];
}

typedef void (*F(exact_fn))(const uint8_t *, int64_t, __m256 *);

LQ_FN void F(exact_tile)(const int nt, F(exact_fn) weights, const int64_t k,
                         const uint8_t *wrow, const float *x, float *y, const int64_t ldy) {
    __m256 a0[LQ_IT], a1[LQ_IT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) a0[t] = a1[t] = _mm256_setzero_ps();
    for (int64_t g = 0; g < k / 32; g++) {
        __m256 wv[4];
        weights(wrow, g, wv);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const float *xr = x + t * k + 32 * g;
            a0[t] = _mm256_fmadd_ps(wv[0], _mm256_loadu_ps(xr), a0[t]);
            a1[t] = _mm256_fmadd_ps(wv[1], _mm256_loadu_ps(xr + 8), a1[t]);
            a0[t] = _mm256_fmadd_ps(wv[2], _mm256_loadu_ps(xr + 16), a0[t]);
            a1[t] = _mm256_fmadd_ps(wv[3], _mm256_loadu_ps(xr + 24), a1[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) y[t * ldy] = F(hsum)(_mm256_add_ps(a0[t], a1[t]));
}

LQ_FN void F(exact)(F(exact_fn) weights, const size_t row_bytes, int64_t k, int64_t m,
                    const float *x, const uint8_t *w, int64_t j0, int64_t j1, float *y,
                    int64_t ldy) {
    const int64_t chunk = lq_chunk_rows((size_t)k * sizeof(float), LQ_IT);
    for (int64_t i0 = 0; i0 < m; i0 += chunk) {
        const int64_t i1 = i0 + chunk < m ? i0 + chunk : m;
        for (int64_t j = j0; j < j1; j++) {
            const uint8_t *wrow = w + j * row_bytes;
            int64_t i = i0;
            for (; i + LQ_IT <= i1; i += LQ_IT)
                F(exact_tile)(LQ_IT, weights, k, wrow, x + i * k, y + i * ldy + j, ldy);
            for (; i < i1; i++)
                F(exact_tile)(1, weights, k, wrow, x + i * k, y + i * ldy + j, ldy);
        }
    }
}

LQ_TARGET static int F(lq_exact)(int type, int64_t k, int64_t m, const float *x,
                                 const uint8_t *w, int64_t j0, int64_t j1, float *y,
                                 int64_t ldy) {
    switch (type) {
    case LQ_Q8_0:
        if (k % 32) return 0;
        F(exact)(F(exact_q8_0), (size_t)(k / 32) * LQ_Q8_0_BYTES, k, m, x, w, j0, j1, y, ldy);
        return 1;
    case LQ_Q5_0:
        if (k % 32) return 0;
        F(exact)(F(exact_q5_0), (size_t)(k / 32) * LQ_Q5_0_BYTES, k, m, x, w, j0, j1, y, ldy);
        return 1;
    case LQ_Q4_0:
        if (k % 32) return 0;
        F(exact)(F(exact_q4_0), (size_t)(k / 32) * LQ_Q4_0_BYTES, k, m, x, w, j0, j1, y, ldy);
        return 1;
    case LQ_Q4_K:
        if (k % 256) return 0;
        F(exact)(F(exact_q4_k), (size_t)(k / 256) * LQ_Q4_K_BYTES, k, m, x, w, j0, j1, y, ldy);
        return 1;
    case LQ_Q6_K:
        if (k % 256) return 0;
        F(exact)(F(exact_q6_k), (size_t)(k / 256) * LQ_Q6_K_BYTES, k, m, x, w, j0, j1, y, ldy);
        return 1;
    default:
        return 0;
    }
}

#undef LQ_TARGET
#undef LQ_IT
#undef LQ_JT
#undef LQ_KJT
#undef LQ_KIT
#undef LQ_VNNI
#undef LQ_Q4_K_ROWS16
#undef LQ_Q6_K_ROWS16
#undef F
#undef LQ_FN

#endif /* LQ_X86_PASS */
