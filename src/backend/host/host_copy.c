/* The copy a host queue runs.  glibc's memcpy switches to non-temporal
 * stores only above a threshold derived from the L3 size (tens to hundreds
 * of MiB on server parts), so the chunks of a pipeline are copied with
 * ordinary stores: each destination line is first read for ownership and
 * then evicted, and on a 300 MiB-L3 Xeon a 4 MiB-chunked copy ran at 6 GB/s
 * against 10 GB/s for one large memcpy.  Chunks of a transfer are not read
 * again by this core, so large ones are streamed here. */
#include <string.h>

#include "backend/host/host.h"
#include "common/util.h"

/* Sanitizers do not see stores made by intrinsics, so sanitized builds
 * copy with memcpy, which they intercept and check. */
#if defined(__x86_64__) && !IPCP_SANITIZED
#define HOST_HAVE_STREAM 1
#include <immintrin.h>
#endif

size_t ipcp__host_stream_min = IPCP_HOST_STREAM_MIN_DEFAULT;

#ifdef HOST_HAVE_STREAM
/* Bytes per loop turn, and how far ahead the source is prefetched: the
 * hardware prefetcher stops at 4 KiB page boundaries, and a software
 * prefetch 2 KiB ahead measured best on both a Xeon and an EPYC host. */
#define HOST_BLOCK    256
#define HOST_PREFETCH 2048

__attribute__((target("avx2"))) static void
host_stream_avx2(char *d, const char *s, size_t n)
{
    for (; n >= HOST_BLOCK; n -= HOST_BLOCK, d += HOST_BLOCK, s += HOST_BLOCK) {
        __m256i r[HOST_BLOCK / 32];
        for (int i = 0; i < HOST_BLOCK / 64; i++)
            _mm_prefetch(s + HOST_PREFETCH + 64 * i, _MM_HINT_T0);
        for (int i = 0; i < HOST_BLOCK / 32; i++)
            r[i] = _mm256_loadu_si256((const __m256i_u *)(const void *)s + i);
        for (int i = 0; i < HOST_BLOCK / 32; i++)
            _mm256_stream_si256((__m256i *)(void *)d + i, r[i]);
    }
}

static void host_stream_sse2(char *d, const char *s, size_t n)
{
    for (; n >= HOST_BLOCK; n -= HOST_BLOCK, d += HOST_BLOCK, s += HOST_BLOCK) {
        __m128i r[HOST_BLOCK / 16];
        for (int i = 0; i < HOST_BLOCK / 64; i++)
            _mm_prefetch(s + HOST_PREFETCH + 64 * i, _MM_HINT_T0);
        for (int i = 0; i < HOST_BLOCK / 16; i++)
            r[i] = _mm_loadu_si128((const __m128i_u *)(const void *)s + i);
        for (int i = 0; i < HOST_BLOCK / 16; i++)
            _mm_stream_si128((__m128i *)(void *)d + i, r[i]);
    }
}

/* Full 64-byte lines of non-temporal stores fill whole write-combining
 * buffers, so the destination is aligned to a line first.  The sfence
 * orders the weakly ordered streaming stores before whatever the queue
 * does next: a flag store with release semantics does not order them. */
static void host_copy_stream(void *dst, const void *src, size_t len)
{
    char *d = dst;
    const char *s = src;
    size_t head = (size_t)(-(uintptr_t)d & 63);

    memcpy(d, s, head);
    d += head;
    s += head;
    len -= head;
    size_t body = len - len % HOST_BLOCK;
    if (__builtin_cpu_supports("avx2"))
        host_stream_avx2(d, s, body);
    else
        host_stream_sse2(d, s, body);
    memcpy(d + body, s + body, len - body);
    _mm_sfence();
}
#endif

void ipcp__host_memcpy(void *dst, const void *src, size_t len)
{
#ifdef HOST_HAVE_STREAM
    size_t min = ipcp__host_stream_min;
    /* Below 64 + HOST_BLOCK bytes the aligned body may be empty. */
    if (min && len >= min && len >= 64 + HOST_BLOCK) {
        host_copy_stream(dst, src, len);
        return;
    }
#endif
    memcpy(dst, src, len);
}
