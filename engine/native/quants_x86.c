/* x86-64 SIMD kernels for Lantern's quantized matmul (contract: quants.h, quants_x86.h).
 *
 * Compiled without -mavx2 or -march flags: every function that uses wide instructions
 * carries a target attribute, and lq_x86_isa picks the widest set this CPU runs, once.
 * The kernel bodies (the second half of this file) are compiled twice, by including this
 * file into itself: once for AVX2+FMA, once for AVX-512 F+BW+VL+VNNI. The AVX-512 set
 * runs the 32-element formats with VPDPBUSD and tiles more rows; the K-quants run the same
 * 256-bit kernels in both sets: their activations carry a scale per 32 values (quants.h),
 * and a superblock's eight sub-blocks of codes, transposed in units of 4 bytes once for all
 * rows of a tile, meet the activations transposed alike, so lane j of one register sums
 * sub-block j and one float operation per superblock scales all eight. Formats: Q4_K, Q6_K,
 * Q5_0, Q8_0, Q4_0, fast and exact mode; any other type returns 0 and the portable kernel
 * runs. Built by another compiler than GCC or Clang (MSVC), or for another CPU, the file
 * holds only that answer.
 *
 * Row independence (quants.h): every y[i][j] is computed by the same sequence of
 * operations whatever m, j0 and j1 are. Rows of x are processed in tiles that share each
 * de-quantized weight block (that is what makes prefill fast) and, for the 32-element
 * formats, a few rows of W that share each activation load, but each (row of x, row of W)
 * keeps its own accumulators, and a tile of any size runs the same per-pair code.
 *
 * Fast mode: the integer sums of a block of 32 are exact (as the portable kernels'); the
 * float order differs from the portable kernels'. Each block's scaled sum is added
 * lane-wise into float lanes by fused multiply-adds (K-quants: lane j per sub-block j, the
 * minimums' term a second fused multiply-add), summed across lanes once at the end of the
 * row. The portable kernel adds one float per block in order. Results agree to float
 * rounding.
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

/* Exact mode's de-quantized values are products rounded to float32, then differences
 * rounded to float32, as numpy computes them: never contracted into fused multiply-adds,
 * whatever flags the build passes (quants.c says the same for its kernels). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC optimize("fp-contract=off")
#endif

#define LQ_INLINE static inline __attribute__((always_inline))

/* GGUF block sizes in bytes (ggml-common.h). */
enum { LQ_Q4_0_BYTES = 18, LQ_Q5_0_BYTES = 22, LQ_Q8_0_BYTES = 34, LQ_Q4_K_BYTES = 144,
       LQ_Q6_K_BYTES = 210 };

/* Rows of activations one pass over W serves: they stay in L2 while W's rows stream. */
enum { LQ_CHUNK_BYTES = 192 * 1024 };

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
#define LQ_VNNI 0
#define F(name) name##_1
#else
#define LQ_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define LQ_IT 8
#define LQ_JT 2
#define LQ_KIT 8
#define LQ_VNNI 1
#define F(name) name##_2
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


LQ_FN __m256i F(load)(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Sums of four products u8 x s8 into each int32 lane (|s| <= 127, so no saturation). */
LQ_FN __m256i F(dot_u8s8)(__m256i u, __m256i s) {
#if LQ_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
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

/* Eight registers' 4-byte units transposed: lane j of v[c] after is lane c of v[j] before. */
LQ_FN void F(transpose8)(__m256i v[8]) {
    __m256i t[8], u[8];
#pragma GCC unroll 4
    for (int r = 0; r < 8; r += 2) {
        t[r] = _mm256_unpacklo_epi32(v[r], v[r + 1]);
        t[r + 1] = _mm256_unpackhi_epi32(v[r], v[r + 1]);
    }
#pragma GCC unroll 2
    for (int r = 0; r < 8; r += 4) {
        u[r] = _mm256_unpacklo_epi64(t[r], t[r + 2]);
        u[r + 1] = _mm256_unpackhi_epi64(t[r], t[r + 2]);
        u[r + 2] = _mm256_unpacklo_epi64(t[r + 1], t[r + 3]);
        u[r + 3] = _mm256_unpackhi_epi64(t[r + 1], t[r + 3]);
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        v[c] = _mm256_permute2x128_si256(u[c], u[c + 4], 0x20);
        v[c + 4] = _mm256_permute2x128_si256(u[c], u[c + 4], 0x31);
    }
}

/* Lane j of sums[t]: sub-block j's exact sum of codes v[j] (32 unsigned bytes each, below
 * 16: Q4_K's) times row t of x: the codes transposed once for all rows, against the
 * activations transposed alike (lq_act256's qt), so that products land in their sub-block's
 * lane with no reduction across lanes. */
LQ_FN void F(subblock_dots)(const int nt, __m256i v[8], const lq_act256 *x,
                            const int64_t xstride, __m256i sums[LQ_KIT]) {
    F(transpose8)(v);
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const int8_t *xt = x[t * xstride].qt;
#if LQ_VNNI
        __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++)
            acc = _mm256_dpbusd_epi32(acc, v[c], F(load)(xt + 32 * c));
        sums[t] = acc;
#else
        /* int16 pairs add up to at most 8 x 2 x 15 x 127: no overflow */
        __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++)
            acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(v[c], F(load)(xt + 32 * c)));
        sums[t] = _mm256_madd_epi16(acc, _mm256_set1_epi16(1));
#endif
    }
}

/* 256 bits, one row of W. Each sub-block's exact integer sum of codes times activations
 * lands in its own lane (subblock_dots), which one fused multiply-add per superblock scales
 * by d * sc_j * d_x[j], the weight's and the activations' scales of sub-block j; the
 * minimums likewise, lane j for sub-block j. */
LQ_FN void F(q4_k_tile)(const int nt, const int64_t nsb, const uint8_t *wrow,
                        const lq_act256 *x, const int64_t xstride, float *y, const int64_t ldy) {
    __m256 acc[LQ_KIT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *blk = wrow + sb * LQ_Q4_K_BYTES;
        __m256i codes[8], sums[LQ_KIT];
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            /* 32 bytes: sub-block 2p in the low nibbles, 2p + 1 in the high ones */
            const __m256i q4 = F(load)(blk + 16 + 32 * p);
            codes[2 * p] = _mm256_and_si256(q4, _mm256_set1_epi8(0x0F));
            codes[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(q4, 4), _mm256_set1_epi8(0x0F));
        }
        F(subblock_dots)(nt, codes, x + sb, xstride, sums);
        const __m128i scmn = F(q4_k_scales_vec)(blk + 4);
        const __m256 dsc = _mm256_mul_ps(_mm256_set1_ps(F(half)(blk)),
                                         _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(scmn)));
        const __m256 dmn = _mm256_mul_ps(
            _mm256_set1_ps(F(half)(blk + 2)),
            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(scmn, scmn))));
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const lq_act256 *xb = x + t * xstride + sb;
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dsc, _mm256_loadu_ps(xb->d)),
                                     _mm256_cvtepi32_ps(sums[t]), acc[t]);
            /* minimums: dmin * m_j times sub-block j's activations' sum */
            acc[t] = _mm256_fnmadd_ps(dmn, _mm256_loadu_ps(xb->s), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) y[t * ldy] = F(hsum)(acc[t]);
}

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

/* 256 bits, one row of W, as q4_k_tile: with the codes transposed, lane j of a register
 * sums sub-block j of the activations (two of Q6_K's groups of 16, their scales applied in
 * the integer sums) over the unsigned codes; the codes' offset of 32 comes off lane-wise,
 * from the activations' group sums, which leaves each sub-block's exact sum; one fused
 * multiply-add per superblock scales lane j by d * d_x[j]. */
LQ_FN void F(q6_k_tile)(const int nt, const int64_t nsb, const uint8_t *wrow,
                        const lq_act256 *x, const int64_t xstride, float *y, const int64_t ldy) {
    __m256 acc[LQ_KIT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *blk = wrow + sb * LQ_Q6_K_BYTES;
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(blk + 192));
        const __m256i scales = _mm256_cvtepi8_epi16(sc8); /* word g: group g's scale */
        __m256i codes[8], sums[LQ_KIT];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int n = 0; n < 4; n++) codes[4 * h + n] = F(q6_k_codes)(blk, h, n);
        F(transpose8)(codes);
        /* lane j: (sc_2j, sc_2j) for codes 0..15 of its sub-block, then sc_2j+1 */
        const __m256i first = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(scales, 0xA0), 0xA0);
        const __m256i second = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(scales, 0xF5), 0xF5);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const int8_t *xt = x[t * xstride + sb].qt;
            __m256i tot = _mm256_setzero_si256();
            /* int16 pairs of two units add up to at most 2 x 2 x 63 x 127: no overflow */
#pragma GCC unroll 4
            for (int c = 0; c < 8; c += 2) {
                const __m256i p16 = _mm256_add_epi16(
                    _mm256_maddubs_epi16(codes[c], F(load)(xt + 32 * c)),
                    _mm256_maddubs_epi16(codes[c + 1], F(load)(xt + 32 * c + 32)));
                tot = _mm256_add_epi32(tot, _mm256_madd_epi16(p16, c < 4 ? first : second));
            }
            sums[t] = tot;
        }
        const __m256 d = _mm256_set1_ps(F(half)(blk + 208));
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const lq_act256 *xb = x + t * xstride + sb;
            /* the offset, lane j: 32 * (sc_2j * sum_2j + sc_2j+1 * sum_2j+1) */
            const __m256i off = _mm256_madd_epi16(scales, F(load)(xb->bsums));
            const __m256i total = _mm256_sub_epi32(sums[t], _mm256_slli_epi32(off, 5));
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_loadu_ps(xb->d)),
                                     _mm256_cvtepi32_ps(total), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) y[t * ldy] = F(hsum)(acc[t]);
}

typedef void (*F(tile256_fn))(int, int64_t, const uint8_t *, const lq_act256 *, int64_t,
                              float *, int64_t);

LQ_FN void F(fast256)(F(tile256_fn) tile, const size_t bbytes, int64_t k, int64_t m,
                      const lq_act256 *xq, const uint8_t *w, int64_t j0, int64_t j1, float *y,
                      int64_t ldy) {
    const int64_t nsb = k / 256;
    const size_t rb = (size_t)nsb * bbytes;
    const int64_t chunk = lq_chunk_rows((size_t)nsb * sizeof(lq_act256), LQ_KIT);
    for (int64_t i0 = 0; i0 < m; i0 += chunk) {
        const int64_t i1 = i0 + chunk < m ? i0 + chunk : m;
        const int64_t tiled = i0 + (i1 - i0) / LQ_KIT * LQ_KIT;
        for (int64_t j = j0; j < j1; j++)
            for (int64_t i = i0; i < tiled; i += LQ_KIT)
                tile(LQ_KIT, nsb, w + j * rb, xq + i * nsb, nsb, y + i * ldy + j, ldy);
        /* rows left over (all of them in a one-row decode step): one weight row at a time */
        for (int64_t i = tiled; i < i1; i++)
            for (int64_t j = j0; j < j1; j++)
                tile(1, nsb, w + j * rb, xq + i * nsb, nsb, y + i * ldy + j, ldy);
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
        F(fast256)(F(q4_k_tile), LQ_Q4_K_BYTES, k, m, xq, w, j0, j1, y, ldy);
        return 1;
    case LQ_Q6_K:
        if (k % 256) return 0;
        F(fast256)(F(q6_k_tile), LQ_Q6_K_BYTES, k, m, xq, w, j0, j1, y, ldy);
        return 1;
    default:
        return 0;
    }
}

/* ---- exact mode: weights as float32, exactly gguf's de-quantized values ----
 * A unit is a block of 32 (the 32-element formats) or a superblock of 256 (the K-quants).
 * Its scales are unpacked and multiplied out once per unit (a[], b[] below), then each
 * group of 32 weights is de-quantized into four registers, once for all rows of a tile. */

/* gguf's products: a[i] = d * sc_i (Q6_K: per 16 weights), b[i] = dmin * m_i (Q4_K) */
typedef void (*F(scales_fn))(const uint8_t *unit, float a[16], float b[8]);
/* group g of the unit (32 weights) as floats into out[4] */
typedef void (*F(group_fn))(const uint8_t *unit, int g, const float *a, const float *b,
                            __m256 out[4]);

LQ_FN void F(int8_to_floats)(__m256i q, __m256 scale, __m256 out[4]) {
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    out[0] = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)));
    out[1] = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))));
    out[2] = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)));
    out[3] = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))));
}

/* 32-element formats: d, first in the block */
LQ_FN void F(scales_d)(const uint8_t *b, float a[16], float m[8]) {
    (void)m;
    a[0] = F(half)(b);
}

/* gguf: d * q */
LQ_FN void F(exact_q8_0)(const uint8_t *b, int g, const float *a, const float *m,
                         __m256 out[4]) {
    (void)g; (void)m;
    F(int8_to_floats)(F(codes_q8_0)(b), _mm256_set1_ps(a[0]), out);
}

LQ_FN void F(exact_q4_0)(const uint8_t *b, int g, const float *a, const float *m,
                         __m256 out[4]) {
    (void)g; (void)m;
    F(int8_to_floats)(F(codes_q4_0)(b), _mm256_set1_ps(a[0]), out);
}

LQ_FN void F(exact_q5_0)(const uint8_t *b, int g, const float *a, const float *m,
                         __m256 out[4]) {
    (void)g; (void)m;
    F(int8_to_floats)(F(codes_q5_0)(b), _mm256_set1_ps(a[0]), out);
}

LQ_FN void F(scales_q4_k)(const uint8_t *blk, float a[16], float b[8]) {
    const float d = F(half)(blk), dmin = F(half)(blk + 2);
    uint8_t sc[8], mn[8];
    F(q4_k_scales)(blk + 4, sc, mn);
    for (int s = 0; s < 8; s++) {
        a[s] = d * (float)sc[s];
        b[s] = dmin * (float)mn[s];
    }
}

/* gguf: (d * sc) * q - (dmin * m), each product rounded to float32 */
LQ_FN void F(exact_q4_k)(const uint8_t *blk, int s, const float *a, const float *b,
                         __m256 out[4]) {
    __m128i q = _mm_loadu_si128((const __m128i *)(blk + 16 + 32 * (s / 2)));
    __m128i q2 = _mm_loadu_si128((const __m128i *)(blk + 32 + 32 * (s / 2)));
    if (s & 1) {
        q = _mm_srli_epi16(q, 4);
        q2 = _mm_srli_epi16(q2, 4);
    }
    const __m256i codes = _mm256_and_si256(_mm256_set_m128i(q2, q), _mm256_set1_epi8(0x0F));
    F(int8_to_floats)(codes, _mm256_set1_ps(a[s]), out);
    const __m256 dm = _mm256_set1_ps(b[s]);
    out[0] = _mm256_sub_ps(out[0], dm);  /* written out: a loop here went through memory */
    out[1] = _mm256_sub_ps(out[1], dm);
    out[2] = _mm256_sub_ps(out[2], dm);
    out[3] = _mm256_sub_ps(out[3], dm);
}

LQ_FN void F(scales_q6_k)(const uint8_t *blk, float a[16], float b[8]) {
    (void)b;
    const float d = F(half)(blk + 208);
    const int8_t *sc = (const int8_t *)(blk + 192);
    for (int i = 0; i < 16; i++) a[i] = d * (float)sc[i];
}

/* gguf: (d * sc) * (q - 32), sc per 16 elements */
LQ_FN void F(exact_q6_k)(const uint8_t *blk, int g, const float *a, const float *b,
                         __m256 out[4]) {
    (void)b;
    const int h = g / 4, n = g % 4;
    const __m256i q = _mm256_sub_epi8(F(q6_k_codes)(blk, h, n), _mm256_set1_epi8(32));
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m256 first = _mm256_set1_ps(a[8 * h + 2 * n]);
    const __m256 second = _mm256_set1_ps(a[8 * h + 2 * n + 1]);
    out[0] = _mm256_mul_ps(first, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)));
    out[1] = _mm256_mul_ps(first, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))));
    out[2] = _mm256_mul_ps(second, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)));
    out[3] = _mm256_mul_ps(second, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))));
}

/* Row wrow of W (units of ``unit`` weights, ubytes each) against rows x[0..nt). Per pair,
 * the same fused multiply-adds in the same order whatever nt is: four per 32 weights into
 * two accumulators, summed across lanes at the end. */
LQ_FN void F(exact_tile)(const int nt, F(scales_fn) scales, F(group_fn) group, const int unit,
                         const size_t ubytes, const int64_t k, const uint8_t *wrow,
                         const float *x, float *y, const int64_t ldy) {
    __m256 a0[LQ_IT], a1[LQ_IT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) a0[t] = a1[t] = _mm256_setzero_ps();
    for (int64_t u = 0; u < k / unit; u++) {
        const uint8_t *blk = wrow + u * ubytes;
        float a[16], b[8];
        scales(blk, a, b);
        for (int g = 0; g < unit / 32; g++) {
            __m256 wv[4];
            group(blk, g, a, b, wv);
#pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const float *xr = x + t * k + u * unit + 32 * g;
                a0[t] = _mm256_fmadd_ps(wv[0], _mm256_loadu_ps(xr), a0[t]);
                a1[t] = _mm256_fmadd_ps(wv[1], _mm256_loadu_ps(xr + 8), a1[t]);
                a0[t] = _mm256_fmadd_ps(wv[2], _mm256_loadu_ps(xr + 16), a0[t]);
                a1[t] = _mm256_fmadd_ps(wv[3], _mm256_loadu_ps(xr + 24), a1[t]);
            }
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) y[t * ldy] = F(hsum)(_mm256_add_ps(a0[t], a1[t]));
}

LQ_FN void F(exact)(F(scales_fn) scales, F(group_fn) group, const int unit, const size_t ubytes,
                    int64_t k, int64_t m, const float *x, const uint8_t *w, int64_t j0,
                    int64_t j1, float *y, int64_t ldy) {
    const size_t row_bytes = (size_t)(k / unit) * ubytes;
    const int64_t chunk = lq_chunk_rows((size_t)k * sizeof(float), LQ_IT);
    for (int64_t i0 = 0; i0 < m; i0 += chunk) {
        const int64_t i1 = i0 + chunk < m ? i0 + chunk : m;
        for (int64_t j = j0; j < j1; j++) {
            const uint8_t *wrow = w + j * row_bytes;
            int64_t i = i0;
            for (; i + LQ_IT <= i1; i += LQ_IT)
                F(exact_tile)(LQ_IT, scales, group, unit, ubytes, k, wrow, x + i * k,
                              y + i * ldy + j, ldy);
            for (; i < i1; i++)
                F(exact_tile)(1, scales, group, unit, ubytes, k, wrow, x + i * k,
                              y + i * ldy + j, ldy);
        }
    }
}

LQ_TARGET static int F(lq_exact)(int type, int64_t k, int64_t m, const float *x,
                                 const uint8_t *w, int64_t j0, int64_t j1, float *y,
                                 int64_t ldy) {
    switch (type) {
    case LQ_Q8_0:
        if (k % 32) return 0;
        F(exact)(F(scales_d), F(exact_q8_0), 32, LQ_Q8_0_BYTES, k, m, x, w, j0, j1,
                 y, ldy);
        return 1;
    case LQ_Q5_0:
        if (k % 32) return 0;
        F(exact)(F(scales_d), F(exact_q5_0), 32, LQ_Q5_0_BYTES, k, m, x, w, j0, j1,
                 y, ldy);
        return 1;
    case LQ_Q4_0:
        if (k % 32) return 0;
        F(exact)(F(scales_d), F(exact_q4_0), 32, LQ_Q4_0_BYTES, k, m, x, w, j0, j1,
                 y, ldy);
        return 1;
    case LQ_Q4_K:
        if (k % 256) return 0;
        F(exact)(F(scales_q4_k), F(exact_q4_k), 256, LQ_Q4_K_BYTES, k, m, x, w, j0, j1,
                 y, ldy);
        return 1;
    case LQ_Q6_K:
        if (k % 256) return 0;
        F(exact)(F(scales_q6_k), F(exact_q6_k), 256, LQ_Q6_K_BYTES, k, m, x, w, j0, j1,
                 y, ldy);
        return 1;
    default:
        return 0;
    }
}

#undef LQ_TARGET
#undef LQ_IT
#undef LQ_JT
#undef LQ_KIT
#undef LQ_VNNI
#undef F
#undef LQ_FN

#endif /* LQ_X86_PASS */
