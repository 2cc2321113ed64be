/* The machine's read ceiling for benchmarks/memory_ceiling.py: a sum over a buffer, read
 * once front to back, 16 bytes a load with eight independent accumulators (no dependency
 * chain holds the loads back; plain SSE2/NEON-width vectors already ask for more bytes
 * per cycle than memory gives). The sum is returned so that no load can be dropped. */
#include <stddef.h>
#include <stdint.h>

typedef uint64_t v2u64 __attribute__((vector_size(16)));

uint64_t stream_sum(const void *buf, size_t bytes) {
    const v2u64 *p = (const v2u64 *)buf;
    size_t n = bytes / (8 * sizeof(v2u64));
    v2u64 a0 = {0, 0}, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i < n; i++, p += 8) {
        a0 += p[0]; a1 += p[1]; a2 += p[2]; a3 += p[3];
        a4 += p[4]; a5 += p[5]; a6 += p[6]; a7 += p[7];
    }
    v2u64 s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    return s[0] + s[1];
}
