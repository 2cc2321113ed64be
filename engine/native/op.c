/* Lantern's ONNX Runtime custom-op library: lantern.GgufMatMul, y = x @ W.T where W is a
 * GGUF tensor's bytes exactly as they lie in the file, and lantern.GgufMoE, the same product
 * with one of a 3-D tensor's expert matrices chosen per row (quants.h computes; this file
 * checks shapes, finds the experts, quantizes activations and spreads output columns over
 * ONNX Runtime's own thread pool).
 *
 * ONNX Runtime's C headers are not shipped with its wheel, so the few pieces of its stable
 * C ABI used here are declared below: OrtApi is a table of function pointers whose indices
 * never change between versions, OrtCustomOp a struct of function pointers read up to its
 * `version`.
 *
 * Inputs:  x float [..., k]; w uint8, the tensor's bytes ([experts,] n rows of
 *          lq_row_bytes(type, k)); optional expert index (int32 or int64, one element).
 * Attrs:   type (GGML type id), k, n, mode (0 exact, 1 fast), experts (0: w is one matrix).
 * Output:  y float [..., n].
 *
 * lantern.GgufMoE (a mixture-of-experts layer's expert matmuls; same attributes, experts > 0):
 * Inputs:  x float [..., k] (one row per token, shared by its experts) or [..., top_k, k]
 *          (one row per chosen expert, e.g. the down projection's); w as above, all experts;
 *          ids int64 or int32 [..., top_k]: the experts each token chose.
 * Output:  y float [..., top_k, n]: y[t, s] = x's row for (t, s) @ W[ids[t, s]].T.
 * Rows are grouped by expert, so each chosen expert's matrix is read once per call and the
 * others not at all.
 *
 * Every y[i][j] is computed by the same code whatever the number of rows (quants.h), and
 * the column chunks handed to the threads do not depend on it either: a row of GgufMoE
 * equals GgufMatMul's for the same expert, whichever other rows share the call.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quants.h"

#if defined(_WIN32)
#define LANTERN_EXPORT __declspec(dllexport)
#else
#define LANTERN_EXPORT __attribute__((visibility("default")))
#endif

/* ---- the slice of ONNX Runtime's C API this library uses ---------------------------- */

typedef struct OrtStatus OrtStatus;
typedef struct OrtApi OrtApi;
typedef struct OrtValue OrtValue;
typedef struct OrtKernelInfo OrtKernelInfo;
typedef struct OrtKernelContext OrtKernelContext;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtCustomOpDomain OrtCustomOpDomain;
typedef struct OrtTensorTypeAndShapeInfo OrtTensorTypeAndShapeInfo;

typedef struct OrtApiBase {
    const OrtApi *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
} OrtApiBase;

enum { ORT_OK = 0, ORT_FAIL = 1, ORT_INVALID_ARGUMENT = 2 };
enum { T_UNDEFINED = 0, T_FLOAT = 1, T_UINT8 = 2, T_INT32 = 6, T_INT64 = 7 };
enum { IO_REQUIRED = 0, IO_OPTIONAL = 1 };

/* Version 16 is the first with KernelContext_ParallelFor and KernelComputeV2. */
#define ORT_API_NEEDED 16

struct OrtCustomOp {
    uint32_t version;
    void *(*CreateKernel)(const struct OrtCustomOp *, const OrtApi *, const OrtKernelInfo *);
    const char *(*GetName)(const struct OrtCustomOp *);
    const char *(*GetExecutionProviderType)(const struct OrtCustomOp *);
    int (*GetInputType)(const struct OrtCustomOp *, size_t index);
    size_t (*GetInputTypeCount)(const struct OrtCustomOp *);
    int (*GetOutputType)(const struct OrtCustomOp *, size_t index);
    size_t (*GetOutputTypeCount)(const struct OrtCustomOp *);
    void (*KernelCompute)(void *kernel, OrtKernelContext *);
    void (*KernelDestroy)(void *kernel);
    int (*GetInputCharacteristic)(const struct OrtCustomOp *, size_t index);
    int (*GetOutputCharacteristic)(const struct OrtCustomOp *, size_t index);
    int (*GetInputMemoryType)(const struct OrtCustomOp *, size_t index);
    int (*GetVariadicInputMinArity)(const struct OrtCustomOp *);
    int (*GetVariadicInputHomogeneity)(const struct OrtCustomOp *);
    int (*GetVariadicOutputMinArity)(const struct OrtCustomOp *);
    int (*GetVariadicOutputHomogeneity)(const struct OrtCustomOp *);
    OrtStatus *(*CreateKernelV2)(const struct OrtCustomOp *, const OrtApi *,
                                 const OrtKernelInfo *, void **kernel);
    OrtStatus *(*KernelComputeV2)(void *kernel, OrtKernelContext *);
    /* later fields (shape inference, opset range, in-place, aliases): read only when
     * `version` is above 16, which this library never claims */
};

/* OrtApi entries by their fixed index (onnxruntime_c_api.h; one pointer each). */
#define API_FN(api, index, type) ((type)(((void *const *)(api))[index]))
#define CreateStatus(a) API_FN(a, 0, OrtStatus *(*)(int, const char *))
#define CreateCustomOpDomain(a) API_FN(a, 26, OrtStatus *(*)(const char *, OrtCustomOpDomain **))
#define CustomOpDomain_Add(a) \
    API_FN(a, 27, OrtStatus *(*)(OrtCustomOpDomain *, const struct OrtCustomOp *))
#define AddCustomOpDomain(a) \
    API_FN(a, 28, OrtStatus *(*)(OrtSessionOptions *, OrtCustomOpDomain *))
#define GetTensorMutableData(a) API_FN(a, 51, OrtStatus *(*)(OrtValue *, void **))
#define GetTensorElementType(a) \
    API_FN(a, 60, OrtStatus *(*)(const OrtTensorTypeAndShapeInfo *, int *))
#define GetDimensionsCount(a) \
    API_FN(a, 61, OrtStatus *(*)(const OrtTensorTypeAndShapeInfo *, size_t *))
#define GetDimensions(a) \
    API_FN(a, 62, OrtStatus *(*)(const OrtTensorTypeAndShapeInfo *, int64_t *, size_t))
#define GetTensorTypeAndShape(a) \
    API_FN(a, 65, OrtStatus *(*)(const OrtValue *, OrtTensorTypeAndShapeInfo **))
#define KernelInfoGetAttribute_int64(a) \
    API_FN(a, 86, OrtStatus *(*)(const OrtKernelInfo *, const char *, int64_t *))
#define KernelContext_GetInputCount(a) \
    API_FN(a, 88, OrtStatus *(*)(const OrtKernelContext *, size_t *))
#define KernelContext_GetInput(a) \
    API_FN(a, 90, OrtStatus *(*)(const OrtKernelContext *, size_t, const OrtValue **))
#define KernelContext_GetOutput(a) \
    API_FN(a, 91, OrtStatus *(*)(OrtKernelContext *, size_t, const int64_t *, size_t, OrtValue **))
#define ReleaseStatus(a) API_FN(a, 93, void (*)(OrtStatus *))
#define ReleaseTensorTypeAndShapeInfo(a) API_FN(a, 99, void (*)(OrtTensorTypeAndShapeInfo *))
#define KernelContext_ParallelFor(a) \
    API_FN(a, 274, OrtStatus *(*)(const OrtKernelContext *, void (*)(void *, size_t), size_t, \
                                  size_t, void *))

#define TRY(expr)                              \
    do {                                       \
        OrtStatus *status_ = (expr);           \
        if (status_ != NULL) return status_;   \
    } while (0)

/* ---- the op ------------------------------------------------------------------------- */

#define MAX_RANK 8
/* -D overrides: benchmarks.decode_ops builds variants */
#ifndef COLUMN_CHUNK
#define COLUMN_CHUNK 64  /* output columns per task: fixed, so no row depends on m */
#endif
/* A product reading fewer weight bytes (times rows of x) runs on the calling thread alone:
 * waking a pool thread that sleeps costs more than it brings (a one-token step's k and v
 * projections). Who computes a column never changes its bits. */
#ifndef SERIAL_BYTES
#define SERIAL_BYTES (512 * 1024)
#endif
#define SERIAL_ROWS 8  /* fewer rows of x are quantized on the calling thread */

typedef struct {
    const OrtApi *api;
    int type;
    int64_t k, n, experts;
    int fast;
    size_t row_bytes, act_bytes;
} GgufMatMul;

static OrtStatus *fail(const OrtApi *api, const char *fmt, ...) {
    char msg[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(msg, sizeof msg, fmt, args);
    va_end(args);
    return CreateStatus(api)(ORT_INVALID_ARGUMENT, msg);
}

static OrtStatus *get_int(const OrtApi *api, const OrtKernelInfo *info, const char *name,
                          int64_t *out) {
    OrtStatus *status = KernelInfoGetAttribute_int64(api)(info, name, out);
    if (status == NULL) return NULL;
    ReleaseStatus(api)(status);
    return fail(api, "GgufMatMul: the int attribute '%s' is missing", name);
}

static OrtStatus *create_kernel(const struct OrtCustomOp *op, const OrtApi *api,
                                const OrtKernelInfo *info, void **kernel) {
    (void)op;
    int64_t type, k, n, mode, experts;
    TRY(get_int(api, info, "type", &type));
    TRY(get_int(api, info, "k", &k));
    TRY(get_int(api, info, "n", &n));
    TRY(get_int(api, info, "mode", &mode));
    TRY(get_int(api, info, "experts", &experts));
    if (mode != 0 && mode != 1) return fail(api, "GgufMatMul: mode is %lld, not 0 (exact) or 1 (fast)", (long long)mode);
    if (k <= 0 || n <= 0 || experts < 0)
        return fail(api, "GgufMatMul: k=%lld, n=%lld, experts=%lld: k and n must be positive, experts not negative",
                    (long long)k, (long long)n, (long long)experts);
    size_t row_bytes = lq_row_bytes((int)type, k);
    size_t act_bytes = mode ? lq_act_bytes((int)type, k) : 0;
    if (row_bytes == 0 || (mode && act_bytes == 0))
        return fail(api, "GgufMatMul: GGML type %lld with k=%lld is not supported (unknown type, "
                    "or k not a whole number of its blocks)", (long long)type, (long long)k);
    GgufMatMul *self = calloc(1, sizeof *self);
    if (self == NULL) return CreateStatus(api)(ORT_FAIL, "GgufMatMul: out of memory");
    *self = (GgufMatMul){api, (int)type, k, n, experts, (int)mode, row_bytes, act_bytes};
    *kernel = self;
    return NULL;
}

static void destroy_kernel(void *kernel) { free(kernel); }

/* A tensor's element type and shape (rank <= MAX_RANK). */
static OrtStatus *describe(const OrtApi *api, const OrtValue *value, const char *what,
                           int *type, int64_t *dims, size_t *rank) {
    OrtTensorTypeAndShapeInfo *info;
    TRY(GetTensorTypeAndShape(api)(value, &info));
    OrtStatus *status = GetTensorElementType(api)(info, type);
    if (status == NULL) status = GetDimensionsCount(api)(info, rank);
    if (status == NULL && *rank > MAX_RANK)
        status = fail(api, "GgufMatMul: %s has rank %zu, more than %d", what, *rank, MAX_RANK);
    if (status == NULL) status = GetDimensions(api)(info, dims, *rank);
    ReleaseTensorTypeAndShapeInfo(api)(info);
    return status;
}

static OrtStatus *data_of(const OrtApi *api, const OrtValue *value, void **data) {
    return GetTensorMutableData(api)((OrtValue *)value, data);
}

/* Which expert of a 3-D weight: the optional third input, one int32 or int64. */
static OrtStatus *expert_index(const OrtApi *api, const OrtKernelContext *ctx,
                               const GgufMatMul *self, int64_t *expert) {
    size_t count = 0;
    const OrtValue *value = NULL;
    TRY(KernelContext_GetInputCount(api)(ctx, &count));
    if (count > 2) TRY(KernelContext_GetInput(api)(ctx, 2, &value));
    *expert = 0;
    if (self->experts == 0) {
        if (value != NULL)
            return fail(api, "GgufMatMul: an expert index was given but the weight has no "
                        "experts (attribute experts=0)");
        return NULL;
    }
    if (value == NULL)
        return fail(api, "GgufMatMul: the weight holds %lld experts but no expert index was given",
                    (long long)self->experts);
    int type;
    int64_t dims[MAX_RANK];
    size_t rank, elements = 1;
    void *data;
    TRY(describe(api, value, "the expert index", &type, dims, &rank));
    for (size_t d = 0; d < rank; d++) elements *= (size_t)dims[d];
    if (elements != 1 || (type != T_INT32 && type != T_INT64))
        return fail(api, "GgufMatMul: the expert index must be one int32 or int64 value");
    TRY(data_of(api, value, &data));
    *expert = type == T_INT32 ? *(const int32_t *)data : *(const int64_t *)data;
    if (*expert < 0 || *expert >= self->experts)
        return fail(api, "GgufMatMul: expert index %lld is outside 0..%lld", (long long)*expert,
                    (long long)self->experts - 1);
    return NULL;
}

typedef struct {
    const GgufMatMul *op;
    int64_t m;
    const float *x;
    const uint8_t *w;  /* the chosen expert's n rows */
    void *xq;          /* fast mode: m rows of quantized activations */
    float *y;
} Task;

static void quantize_row(void *data, size_t i) {
    const Task *t = data;
    lq_quantize_act(t->op->type, t->op->k, t->x + i * t->op->k,
                    (uint8_t *)t->xq + i * t->op->act_bytes);
}

static void column_chunk(void *data, size_t chunk) {
    const Task *t = data;
    const GgufMatMul *op = t->op;
    int64_t j0 = (int64_t)chunk * COLUMN_CHUNK;
    int64_t j1 = j0 + COLUMN_CHUNK < op->n ? j0 + COLUMN_CHUNK : op->n;
    if (op->fast)
        lq_matmul_fast(op->type, op->k, t->m, t->xq, t->w, j0, j1, t->y, op->n);
    else
        lq_matmul_exact(op->type, op->k, t->m, t->x, t->w, j0, j1, t->y, op->n);
}

static OrtStatus *compute(void *kernel, OrtKernelContext *ctx) {
    const GgufMatMul *self = kernel;
    const OrtApi *api = self->api;
    const OrtValue *x_value, *w_value;
    TRY(KernelContext_GetInput(api)(ctx, 0, &x_value));
    TRY(KernelContext_GetInput(api)(ctx, 1, &w_value));

    int x_type, w_type;
    int64_t dims[MAX_RANK], w_dims[MAX_RANK];
    size_t rank, w_rank;
    TRY(describe(api, x_value, "x", &x_type, dims, &rank));
    TRY(describe(api, w_value, "w", &w_type, w_dims, &w_rank));
    if (x_type != T_FLOAT) return fail(api, "GgufMatMul: x must be float32");
    if (rank == 0 || dims[rank - 1] != self->k)
        return fail(api, "GgufMatMul: x's last dimension must be k=%lld", (long long)self->k);
    if (w_type != T_UINT8) return fail(api, "GgufMatMul: w must be uint8 (the GGUF tensor's bytes)");
    size_t w_bytes = 1;
    for (size_t d = 0; d < w_rank; d++) w_bytes *= (size_t)w_dims[d];
    size_t matrix_bytes = (size_t)self->n * self->row_bytes;
    size_t want = matrix_bytes * (size_t)(self->experts ? self->experts : 1);
    if (w_bytes != want)
        return fail(api, "GgufMatMul: w holds %zu bytes; GGML type %d with k=%lld, n=%lld%s "
                    "needs %zu", w_bytes, self->type, (long long)self->k, (long long)self->n,
                    self->experts ? " per expert" : "", want);
    int64_t expert;
    TRY(expert_index(api, ctx, self, &expert));

    int64_t m = 1;
    for (size_t d = 0; d + 1 < rank; d++) m *= dims[d];
    dims[rank - 1] = self->n;
    OrtValue *y_value;
    void *x, *w, *y;
    TRY(KernelContext_GetOutput(api)(ctx, 0, dims, rank, &y_value));
    if (m == 0) return NULL;
    TRY(data_of(api, x_value, &x));
    TRY(data_of(api, w_value, &w));
    TRY(data_of(api, y_value, &y));

    Task task = {self, m, x, (const uint8_t *)w + (size_t)expert * matrix_bytes, NULL, y};
    if (self->fast) {
        task.xq = malloc((size_t)m * self->act_bytes);
        if (task.xq == NULL) return CreateStatus(api)(ORT_FAIL, "GgufMatMul: out of memory");
    }
    OrtStatus *status = NULL;
    if (self->fast && m < SERIAL_ROWS)
        for (int64_t i = 0; i < m; i++) quantize_row(&task, (size_t)i);
    else if (self->fast)
        status = KernelContext_ParallelFor(api)(ctx, quantize_row, (size_t)m, 0, &task);
    size_t chunks = (size_t)((self->n + COLUMN_CHUNK - 1) / COLUMN_CHUNK);
    if (status == NULL && (size_t)m * matrix_bytes < SERIAL_BYTES)
        for (size_t c = 0; c < chunks; c++) column_chunk(&task, c);
    else if (status == NULL)
        status = KernelContext_ParallelFor(api)(ctx, column_chunk, chunks, 0, &task);
    free(task.xq);
    return status;
}


/* ---- the mixture-of-experts op ------------------------------------------------------ */

typedef struct {
    int64_t expert, first, count;  /* rows first..first+count of the grouped buffers */
} Group;

typedef struct {
    const GgufMatMul *op;
    const uint8_t *w;     /* all experts, one matrix after the other */
    const Group *groups;  /* the experts chosen at least once */
    size_t chunks;        /* column chunks per expert */
    const void *xg;       /* rows grouped by expert: float32 (exact) or quantized (fast) */
    size_t xg_bytes;      /* bytes of one row of xg */
    float *yg;            /* outputs in the grouped order */
} MoeTask;

static void moe_chunk(void *data, size_t index) {
    const MoeTask *t = data;
    const GgufMatMul *op = t->op;
    const Group *g = &t->groups[index / t->chunks];
    int64_t j0 = (int64_t)(index % t->chunks) * COLUMN_CHUNK;
    int64_t j1 = j0 + COLUMN_CHUNK < op->n ? j0 + COLUMN_CHUNK : op->n;
    const uint8_t *w = t->w + (size_t)g->expert * (size_t)op->n * op->row_bytes;
    const uint8_t *x = (const uint8_t *)t->xg + (size_t)g->first * t->xg_bytes;
    float *y = t->yg + (size_t)g->first * (size_t)op->n;
    if (op->fast)
        lq_matmul_fast(op->type, op->k, g->count, x, w, j0, j1, y, op->n);
    else
        lq_matmul_exact(op->type, op->k, g->count, (const float *)x, w, j0, j1, y, op->n);
}

typedef struct {
    const GgufMatMul *op;
    const float *x;
    uint8_t *xq;
} QuantizeTask;

static void moe_quantize_row(void *data, size_t i) {
    const QuantizeTask *t = data;
    lq_quantize_act(t->op->type, t->op->k, t->x + i * t->op->k, t->xq + i * t->op->act_bytes);
}

/* The expert ids as int64, each checked against the number of experts. */
static OrtStatus *read_ids(const OrtApi *api, const OrtValue *value, const GgufMatMul *self,
                           int64_t *ids, size_t count) {
    int type;
    int64_t dims[MAX_RANK];
    size_t rank;
    void *data;
    TRY(describe(api, value, "ids", &type, dims, &rank));
    TRY(data_of(api, value, &data));
    for (size_t i = 0; i < count; i++) {
        ids[i] = type == T_INT32 ? ((const int32_t *)data)[i] : ((const int64_t *)data)[i];
        if (ids[i] < 0 || ids[i] >= self->experts)
            return fail(api, "GgufMoE: expert id %lld is outside 0..%lld", (long long)ids[i],
                        (long long)self->experts - 1);
    }
    return NULL;
}

/* Grouping: slot s (of t = tokens * top_k) goes to position place[s] of the grouped order,
 * experts in ascending order, each expert's slots in their own order. */
static OrtStatus *run_moe(const GgufMatMul *self, OrtKernelContext *ctx, const float *x,
                          const uint8_t *w, const int64_t *ids, size_t slots, size_t top_k,
                          int row_per_slot, float *y) {
    const OrtApi *api = self->api;
    size_t experts = (size_t)self->experts, n = (size_t)self->n, k = (size_t)self->k;
    size_t x_rows = row_per_slot ? slots : slots / top_k;
    size_t xg_bytes = self->fast ? self->act_bytes : k * sizeof(float);
    int64_t *first = calloc(experts + 1, sizeof *first);
    size_t *place = malloc(slots * sizeof *place);
    Group *groups = malloc(experts * sizeof *groups);
    uint8_t *xq = self->fast ? malloc(x_rows * self->act_bytes) : NULL;
    uint8_t *xg = malloc(slots * xg_bytes);
    float *yg = malloc(slots * n * sizeof *yg);
    OrtStatus *status = NULL;
    if (!first || !place || !groups || (self->fast && !xq) || !xg || !yg) {
        status = CreateStatus(api)(ORT_FAIL, "GgufMoE: out of memory");
        goto done;
    }
    for (size_t s = 0; s < slots; s++) first[ids[s] + 1]++;
    size_t used = 0;
    for (size_t e = 0; e < experts; e++) {
        if (first[e + 1] > 0) groups[used++] = (Group){(int64_t)e, first[e], first[e + 1]};
        first[e + 1] += first[e];
    }
    for (size_t s = 0; s < slots; s++) place[s] = (size_t)first[ids[s]]++;

    const uint8_t *rows = (const uint8_t *)x;  /* the rows gathered from: x, or x quantized */
    if (self->fast) {
        QuantizeTask q = {self, x, xq};
        status = KernelContext_ParallelFor(api)(ctx, moe_quantize_row, x_rows, 0, &q);
        if (status != NULL) goto done;
        rows = xq;
    }
    for (size_t s = 0; s < slots; s++) {
        size_t row = row_per_slot ? s : s / top_k;
        memcpy(xg + place[s] * xg_bytes, rows + row * xg_bytes, xg_bytes);
    }
    size_t chunks = (n + COLUMN_CHUNK - 1) / COLUMN_CHUNK;
    MoeTask task = {self, w, groups, chunks, xg, xg_bytes, yg};
    status = KernelContext_ParallelFor(api)(ctx, moe_chunk, used * chunks, 0, &task);
    if (status != NULL) goto done;
    for (size_t s = 0; s < slots; s++)
        memcpy(y + s * n, yg + place[s] * n, n * sizeof *y);
done:
    free(first);
    free(place);
    free(groups);
    free(xq);
    free(xg);
    free(yg);
    return status;
}

static OrtStatus *compute_moe(void *kernel, OrtKernelContext *ctx) {
    const GgufMatMul *self = kernel;
    const OrtApi *api = self->api;
    const OrtValue *x_value, *w_value, *ids_value;
    TRY(KernelContext_GetInput(api)(ctx, 0, &x_value));
    TRY(KernelContext_GetInput(api)(ctx, 1, &w_value));
    TRY(KernelContext_GetInput(api)(ctx, 2, &ids_value));

    int x_type, w_type, ids_type;
    int64_t dims[MAX_RANK], w_dims[MAX_RANK], ids_dims[MAX_RANK + 1];
    size_t rank, w_rank, ids_rank;
    TRY(describe(api, x_value, "x", &x_type, dims, &rank));
    TRY(describe(api, w_value, "w", &w_type, w_dims, &w_rank));
    TRY(describe(api, ids_value, "ids", &ids_type, ids_dims, &ids_rank));
    if (self->experts == 0) return fail(api, "GgufMoE: the attribute experts must be positive");
    if (x_type != T_FLOAT) return fail(api, "GgufMoE: x must be float32");
    if (rank == 0 || dims[rank - 1] != self->k)
        return fail(api, "GgufMoE: x's last dimension must be k=%lld", (long long)self->k);
    if (w_type != T_UINT8) return fail(api, "GgufMoE: w must be uint8 (the GGUF tensor's bytes)");
    if (ids_type != T_INT32 && ids_type != T_INT64)
        return fail(api, "GgufMoE: ids must be int32 or int64");
    if (ids_rank == 0 || ids_rank == MAX_RANK)
        return fail(api, "GgufMoE: ids must be [..., top_k] with rank below %d", MAX_RANK);
    size_t w_bytes = 1;
    for (size_t d = 0; d < w_rank; d++) w_bytes *= (size_t)w_dims[d];
    size_t want = (size_t)self->n * self->row_bytes * (size_t)self->experts;
    if (w_bytes != want)
        return fail(api, "GgufMoE: w holds %zu bytes; GGML type %d with k=%lld, n=%lld and "
                    "%lld experts needs %zu", w_bytes, self->type, (long long)self->k,
                    (long long)self->n, (long long)self->experts, want);
    /* x's leading dims are ids' (a row per slot) or ids' without top_k (a row per token) */
    int row_per_slot = rank == ids_rank + 1;
    if (!row_per_slot && rank != ids_rank)
        return fail(api, "GgufMoE: x must be [..., k] or [..., top_k, k] for ids [..., top_k]");
    for (size_t d = 0; d + 1 < rank; d++)
        if (d < ids_rank && dims[d] != ids_dims[d])
            return fail(api, "GgufMoE: x's dimension %zu is %lld, ids' is %lld", d,
                        (long long)dims[d], (long long)ids_dims[d]);
    size_t slots = 1;
    for (size_t d = 0; d < ids_rank; d++) slots *= (size_t)ids_dims[d];
    size_t top_k = (size_t)ids_dims[ids_rank - 1];

    ids_dims[ids_rank] = self->n;
    OrtValue *y_value;
    void *x, *w, *y;
    TRY(KernelContext_GetOutput(api)(ctx, 0, ids_dims, ids_rank + 1, &y_value));
    if (slots == 0) return NULL;
    int64_t *ids = malloc(slots * sizeof *ids);
    if (ids == NULL) return CreateStatus(api)(ORT_FAIL, "GgufMoE: out of memory");
    OrtStatus *status = read_ids(api, ids_value, self, ids, slots);
    if (status == NULL) status = data_of(api, x_value, &x);
    if (status == NULL) status = data_of(api, w_value, &w);
    if (status == NULL) status = data_of(api, y_value, &y);
    if (status == NULL)
        status = run_moe(self, ctx, x, w, ids, slots, top_k, row_per_slot, y);
    free(ids);
    return status;
}

/* ---- registration ------------------------------------------------------------------- */

static const char *op_name(const struct OrtCustomOp *op) { (void)op; return "GgufMatMul"; }
static const char *moe_name(const struct OrtCustomOp *op) { (void)op; return "GgufMoE"; }
static const char *op_provider(const struct OrtCustomOp *op) {
    (void)op;
    return "CPUExecutionProvider";
}
static int input_type(const struct OrtCustomOp *op, size_t i) {
    (void)op;
    return i == 0 ? T_FLOAT : i == 1 ? T_UINT8 : T_UNDEFINED;  /* expert: int32 or int64 */
}
static size_t input_count(const struct OrtCustomOp *op) { (void)op; return 3; }
static int output_type(const struct OrtCustomOp *op, size_t i) { (void)op; (void)i; return T_FLOAT; }
static size_t output_count(const struct OrtCustomOp *op) { (void)op; return 1; }
static int input_characteristic(const struct OrtCustomOp *op, size_t i) {
    (void)op;
    return i == 2 ? IO_OPTIONAL : IO_REQUIRED;
}
static int required(const struct OrtCustomOp *op, size_t i) { (void)op; (void)i; return IO_REQUIRED; }
static int output_characteristic(const struct OrtCustomOp *op, size_t i) {
    (void)op; (void)i;
    return IO_REQUIRED;
}
static int default_memory(const struct OrtCustomOp *op, size_t i) { (void)op; (void)i; return 0; }
static int one(const struct OrtCustomOp *op) { (void)op; return 1; }

static const struct OrtCustomOp GGUF_MATMUL = {
    .version = ORT_API_NEEDED,
    .CreateKernel = NULL,
    .GetName = op_name,
    .GetExecutionProviderType = op_provider,
    .GetInputType = input_type,
    .GetInputTypeCount = input_count,
    .GetOutputType = output_type,
    .GetOutputTypeCount = output_count,
    .KernelCompute = NULL,
    .KernelDestroy = destroy_kernel,
    .GetInputCharacteristic = input_characteristic,
    .GetOutputCharacteristic = output_characteristic,
    .GetInputMemoryType = default_memory,
    .GetVariadicInputMinArity = one,
    .GetVariadicInputHomogeneity = one,
    .GetVariadicOutputMinArity = one,
    .GetVariadicOutputHomogeneity = one,
    .CreateKernelV2 = create_kernel,
    .KernelComputeV2 = compute,
};

static const struct OrtCustomOp GGUF_MOE = {
    .version = ORT_API_NEEDED,
    .CreateKernel = NULL,
    .GetName = moe_name,
    .GetExecutionProviderType = op_provider,
    .GetInputType = input_type,  /* ids: int32 or int64 */
    .GetInputTypeCount = input_count,
    .GetOutputType = output_type,
    .GetOutputTypeCount = output_count,
    .KernelCompute = NULL,
    .KernelDestroy = destroy_kernel,
    .GetInputCharacteristic = required,
    .GetOutputCharacteristic = output_characteristic,
    .GetInputMemoryType = default_memory,
    .GetVariadicInputMinArity = one,
    .GetVariadicInputHomogeneity = one,
    .GetVariadicOutputMinArity = one,
    .GetVariadicOutputHomogeneity = one,
    .CreateKernelV2 = create_kernel,
    .KernelComputeV2 = compute_moe,
};

/* Called once per SessionOptions. The domain must outlive every session made with them and
 * ONNX Runtime never hands it back, so each registration leaves one small domain behind. */
LANTERN_EXPORT OrtStatus *RegisterCustomOps(OrtSessionOptions *options,
                                            const OrtApiBase *api_base) {
    const OrtApi *api = api_base->GetApi(ORT_API_NEEDED);
    if (api == NULL) {  /* version 1 of the API can still say why */
        api = api_base->GetApi(1);
        return CreateStatus(api)(ORT_FAIL, "Lantern's GgufMatMul needs ONNX Runtime 1.16 or newer");
    }
    OrtCustomOpDomain *domain;
    TRY(CreateCustomOpDomain(api)("lantern", &domain));
    TRY(CustomOpDomain_Add(api)(domain, &GGUF_MATMUL));
    TRY(CustomOpDomain_Add(api)(domain, &GGUF_MOE));
    return AddCustomOpDomain(api)(options, domain);
}
