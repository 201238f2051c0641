/* Kernels of the small-message lane (layout and protocol: backend/lane_abi.h).
 * One block each, launched on the user's stream by cuda_lane.c.
 *
 * Why kernels: a copy-engine copy plus stream memory operations on flags
 * measured about 9 us per message between two H200s, while a kernel that
 * stores the data and a flag straight into the peer's memory, against a
 * kernel spinning on its own memory, measured 4.8 us (FACTS.md).  The
 * spinning side polls local GPU memory; only the rare waits (a full inbox,
 * a peer not mapped yet) and the abort word read host memory. */
#include <stdint.h>

#include "backend/lane_abi.h"

#define LANE_THREADS 128
/* Polls of local memory between two reads of the abort word, which lives
 * in host memory (each read crosses PCIe). */
#define LANE_ABORT_EVERY 1024

/* Programmatic dependent launch (sm_90 and up; no-ops elsewhere and when
 * the launch did not ask for it): a receive lets the stream's next kernel
 * start once its message is there, a send once the stream's earlier work
 * is done, and every kernel waits for the stream's earlier work only
 * before it touches the user's buffer.  A kernel that follows a receive or
 * a send is then resident when that one ends, which takes a launch off
 * each half round trip. */
__device__ static inline void lane_pdl_launch(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ static inline void lane_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ static inline uint64_t lane_load(const uint64_t *p)
{
    return *(const volatile uint64_t *)p;
}

__device__ static inline void lane_store(uint64_t *p, uint64_t v)
{
    *(volatile uint64_t *)p = v;
}

/* Spins until *p >= want (cyclic, as stream memory operations compare);
 * returns 1 when the abort word was set first. */
__device__ static int lane_wait(const uint64_t *p, uint64_t want,
                                const uint64_t *abort)
{
    for (unsigned n = 1;; n++) {
        if ((int64_t)(lane_load(p) - want) >= 0) {
            __threadfence_system(); /* later reads see what preceded it */
            return 0;
        }
        if (n % LANE_ABORT_EVERY == 0 && lane_load(abort))
            return 1;
    }
}

/* Spins until the flagged word at p (lane_abi.h) carries flag want and
 * leaves it in *w; returns 1 when the abort word was set first, or with
 * stop, when another thread of the block saw it first. */
__device__ static int lane_word_wait(const uint64_t *p, uint32_t want,
                                     const uint64_t *abort,
                                     const volatile int *stop, uint64_t *w)
{
    for (unsigned n = 1;; n++) {
        *w = lane_load(p);
        if (IPCP_LANE_WORD_FLAG(*w) == want)
            return 0;
        if (n % LANE_ABORT_EVERY == 0 && ((stop && *stop) || lane_load(abort)))
            return 1;
    }
}

/* The peer's block as mapped here: known at launch, or published later by
 * the engine in *peer_word.  Sets *code when it cannot be had. */
__device__ static uint64_t lane_peer(const ipcp__lane_kargs_t *a, int *code)
{
    if (a->remote)
        return a->remote;
    for (;;) {
        uint64_t v = lane_load((const uint64_t *)a->peer_word);
        if (v == IPCP_LANE_BROKEN) {
            *code = IPCP_LANE_UNUSABLE;
            return 0;
        }
        if (v)
            return v;
        if (lane_load((const uint64_t *)a->abort)) {
            *code = IPCP_LANE_ABORTED;
            return 0;
        }
    }
}

/* The block copies n bytes: 16-byte vectors, then 8-byte words, then
 * bytes, as far as both ends' alignment allows.  fresh: the source was
 * written by another GPU, so it is read past the L1. */
__device__ static void lane_copy(char *dst, const char *src, uint64_t n,
                                 int fresh)
{
    uint64_t i = 0;
    uintptr_t mis = ((uintptr_t)dst | (uintptr_t)src);
    if ((mis & 15) == 0) {
        const int4 *s = (const int4 *)src;
        int4 *d = (int4 *)dst;
        for (uint64_t j = threadIdx.x; j < n / 16; j += blockDim.x)
            d[j] = fresh ? __ldcv(s + j) : s[j];
        i = n / 16 * 16;
    }
    if ((mis & 7) == 0) {
        const unsigned long long *s = (const unsigned long long *)(src + i);
        unsigned long long *d = (unsigned long long *)(dst + i);
        for (uint64_t j = threadIdx.x; j < (n - i) / 8; j += blockDim.x)
            d[j] = fresh ? __ldcv(s + j) : s[j];
        i += (n - i) / 8 * 8;
    }
    for (uint64_t j = i + threadIdx.x; j < n; j += blockDim.x)
        dst[j] = fresh ? (char)__ldcv((const signed char *)src + j) : src[j];
}

/* The block stores n bytes from src as flagged words (lane_abi.h) at dst,
 * in the peer's memory: no fence needed, each word says it is there.
 * Words past the message up to nw carry zeros (IPCP_LANE_REFRESH). */
__device__ static void lane_words_out(uint64_t *dst, const unsigned char *src,
                                      uint64_t n, uint64_t nw, uint64_t k)
{
    int aligned = ((uintptr_t)src & 3) == 0;
    for (uint64_t j = threadIdx.x; j < nw; j += blockDim.x) {
        uint64_t o = 4 * j;
        uint32_t v = 0;
        if (o >= n)
            ; /* padding */
        else if (aligned && o + 4 <= n)
            v = *(const uint32_t *)(src + o);
        else
            for (uint64_t b = 0; b < 4 && o + b < n; b++)
                v |= (uint32_t)src[o + b] << (8 * b);
        lane_store(dst + j, IPCP_LANE_WORD(k, v));
    }
}

/* The block waits for message k's n bytes of flagged words at src (local
 * memory) and stores them at dst (dst NULL: only waits, for a message that
 * is dropped - its slot must not be handed back while its words may still
 * land).  Returns with *stop set when the abort word was seen first (any
 * thread's sighting stops all). */
__device__ static void lane_words_in(unsigned char *dst, const uint64_t *src,
                                     uint64_t n, uint64_t k,
                                     const uint64_t *abort, volatile int *stop)
{
    int aligned = ((uintptr_t)dst & 3) == 0;
    uint32_t want = (uint32_t)(k + 1);
    for (uint64_t j = threadIdx.x; j < (n + 3) / 4; j += blockDim.x) {
        uint64_t w;
        if (lane_word_wait(src + j, want, abort, stop, &w)) {
            *stop = 1;
            return;
        }
        uint64_t o = 4 * j;
        uint32_t v = (uint32_t)w;
        if (!dst)
            continue;
        if (aligned && o + 4 <= n)
            *(uint32_t *)(dst + o) = v;
        else
            for (uint64_t b = 0; b < 4 && o + b < n; b++)
                dst[o + b] = (unsigned char)(v >> (8 * b));
    }
}

/* Thread 0: the outcome, one store (no fence: it is the last thing the
 * kernel does, and nothing the engine reads after it needs ordering). */
__device__ static void lane_finish(const ipcp__lane_kargs_t *a, int code,
                                   uint32_t value)
{
    if (a->rec)
        lane_store(&((ipcp__lane_rec_t *)a->rec)->done,
                   IPCP_LANE_DONE(a->k, code, value));
}

__device__ static inline char *lane_slot(uint64_t block, uint32_t s,
                                         const ipcp__lane_kargs_t *a)
{
    return (char *)(block + (uint64_t)s * a->slot_bytes);
}

__device__ static inline uint64_t *lane_credit(uint64_t block, uint32_t s,
                                               const ipcp__lane_kargs_t *a)
{
    return (uint64_t *)(block + (uint64_t)a->nslots * a->slot_bytes) + s;
}

extern "C" __global__ void __launch_bounds__(LANE_THREADS)
    ipcp_lane_send(ipcp__lane_kargs_t a)
{
    __shared__ uint64_t s_remote;
    __shared__ int s_code;
    uint32_t slot = (uint32_t)(a.k % a.nslots);
    uint64_t round = a.k / a.nslots;

    if (threadIdx.x == 0) {
        int code = IPCP_LANE_OK;
        uint64_t remote = lane_peer(&a, &code);
        if (code == IPCP_LANE_OK && lane_wait(lane_credit(a.local, slot, &a),
                                              round, (const uint64_t *)a.abort))
            code = IPCP_LANE_ABORTED;
        s_remote = remote;
        s_code = code;
    }
    __syncthreads();
    lane_pdl_wait(); /* the stream's earlier work wrote the source */
    /* The stream's next kernel - in a ping-pong the receive of the answer
     * - may start now and wait for its message while this one's data is
     * on its way.  Only after the wait: a chain of sends launched early
     * would otherwise all be resident at once. */
    lane_pdl_launch();
    int code = s_code;
    int words = IPCP_LANE_INLINE(a.len, &a);
    char *sl = code == IPCP_LANE_OK ? lane_slot(s_remote, slot, &a) : 0;
    ipcp__lane_hdr_t *h = (ipcp__lane_hdr_t *)sl;
    if (code == IPCP_LANE_OK) {
        if (words)
            lane_words_out((uint64_t *)(sl + IPCP_LANE_WORDS_OFF),
                           (const unsigned char *)a.buf, a.len,
                           round % IPCP_LANE_REFRESH == 0
                               ? IPCP_LANE_INLINE_MAX / 4
                               : (a.len + 3) / 4,
                           a.k);
        else
            lane_copy(sl + IPCP_LANE_DATA_OFF, (const char *)a.buf, a.len, 0);
        if (threadIdx.x == 0) {
            lane_store(&h->tagw, IPCP_LANE_WORD(a.k, (uint32_t)a.tag));
            if (words)
                lane_store(&h->seq, IPCP_LANE_WORD(a.k, (uint32_t)a.len));
        }
    }
    /* The source is read by every thread before the outcome says so. */
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    if (code == IPCP_LANE_OK && !words) {
        /* The barrier made the block's stores this thread's to order: one
         * system fence puts data and tag before the word the peer spins
         * on. */
        __threadfence_system();
        lane_store(&h->seq, IPCP_LANE_WORD(a.k, (uint32_t)a.len));
    }
    lane_finish(&a, code, (uint32_t)a.len);
}

/* Thread 0 of a receive: waits for message k's header in the slot at h
 * and checks it against the receive (tag, room).  Sets *len and *words
 * (the message came as flagged words); returns the code (IPCP_LANE_*). */
__device__ static int lane_recv_head(const ipcp__lane_kargs_t *a,
                                     ipcp__lane_hdr_t *h, uint32_t *len,
                                     int *words)
{
    const uint64_t *abort = (const uint64_t *)a->abort;
    uint32_t want = (uint32_t)(a->k + 1);
    uint64_t w = 0, tw;
    if (lane_word_wait(&h->seq, want, abort, NULL, &w))
        return IPCP_LANE_ABORTED;
    *len = (uint32_t)w;
    *words = IPCP_LANE_INLINE(*len, a);
    if (!*words) {
        __threadfence_system(); /* the data and tag before seq */
        tw = lane_load(&h->tagw);
    } else if (lane_word_wait(&h->tagw, want, abort, NULL, &tw)) {
        /* Flagged like seq: it may land after it; aborted meanwhile. */
        return IPCP_LANE_ABORTED;
    }
    int32_t tag = (int32_t)(uint32_t)tw;
    if (tag != a->tag) {
        if (a->rec) {
            lane_store(&((ipcp__lane_rec_t *)a->rec)->info,
                       (uint64_t)(uint32_t)tag);
            __threadfence_system(); /* the tag before the outcome */
        }
        return IPCP_LANE_TAG;
    }
    return *len > a->len ? IPCP_LANE_TRUNC : IPCP_LANE_OK;
}

extern "C" __global__ void __launch_bounds__(LANE_THREADS)
    ipcp_lane_recv(ipcp__lane_kargs_t a)
{
    __shared__ int s_code, s_words;
    __shared__ volatile int s_stop;
    __shared__ uint32_t s_len, s_value;
    uint32_t slot = (uint32_t)(a.k % a.nslots);
    uint64_t round = a.k / a.nslots;
    char *sl = lane_slot(a.local, slot, &a);
    ipcp__lane_hdr_t *h = (ipcp__lane_hdr_t *)sl;

    if (threadIdx.x == 0) {
        uint32_t len = 0;
        int words = 0;
        s_code = lane_recv_head(&a, h, &len, &words);
        s_len = len;
        s_value = len;
        s_words = words;
        s_stop = 0;
    }
    __syncthreads();
    lane_pdl_launch();
    lane_pdl_wait(); /* the stream's earlier work is done with the buffer */
    int code = s_code;
    /* A dropped message (other tag, too long) is waited for all the same:
     * its sender stored the words without a fence, and once the credit is
     * back a sender on another stream may reuse the slot, which a late
     * word of this message would then overwrite. */
    if (s_words && (code == IPCP_LANE_OK || code == IPCP_LANE_TAG ||
                    code == IPCP_LANE_TRUNC))
        lane_words_in(code == IPCP_LANE_OK ? (unsigned char *)a.buf : 0,
                      (const uint64_t *)(sl + IPCP_LANE_WORDS_OFF), s_len, a.k,
                      (const uint64_t *)a.abort, &s_stop);
    else if (code == IPCP_LANE_OK)
        lane_copy((char *)a.buf, sl + IPCP_LANE_DATA_OFF, s_len, 1);
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    if (s_stop) /* the peer died between the words of its message */
        code = IPCP_LANE_ABORTED;
    /* The slot's bytes were all read (their values stored) before the
     * barrier, so its credit needs no fence.  A message that did not match
     * is consumed all the same, so that the sender is not left waiting. */
    if (code != IPCP_LANE_ABORTED) {
        int pcode = IPCP_LANE_OK;
        uint64_t remote = lane_peer(&a, &pcode);
        if (pcode == IPCP_LANE_OK)
            lane_store(lane_credit(remote, slot, &a), round + 1);
        else if (code == IPCP_LANE_OK)
            code = pcode;
    }
    /* The received bytes reach device scope before the request can
     * complete on the host. */
    __threadfence();
    lane_finish(&a, code, s_value);
}
