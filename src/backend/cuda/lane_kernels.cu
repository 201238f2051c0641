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

/* The block copies n bytes; 16-byte vectors when both ends allow.  fresh:
 * the source was written by another GPU, so it is read past the L1. */
__device__ static void lane_copy(char *dst, const char *src, uint64_t n,
                                 int fresh)
{
    uint64_t i = 0;
    if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
        uint64_t nv = n / 16;
        const int4 *s = (const int4 *)src;
        int4 *d = (int4 *)dst;
        for (uint64_t j = threadIdx.x; j < nv; j += blockDim.x)
            d[j] = fresh ? __ldcv(s + j) : s[j];
        i = nv * 16;
    }
    for (uint64_t j = i + threadIdx.x; j < n; j += blockDim.x)
        dst[j] = fresh ? (char)__ldcv((const signed char *)src + j) : src[j];
}

/* Thread 0: the outcome, then k + 1, into the completion record. */
__device__ static void lane_finish(const ipcp__lane_kargs_t *a, int code,
                                   uint32_t value)
{
    if (!a->rec)
        return;
    ipcp__lane_rec_t *r = (ipcp__lane_rec_t *)a->rec;
    lane_store(&r->info, (uint64_t)(uint32_t)code << 32 | value);
    __threadfence_system();
    lane_store(&r->done, a->k + 1);
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
        if (code == IPCP_LANE_OK &&
            lane_wait(lane_credit(a.local, slot, &a), round,
                      (const uint64_t *)a.abort))
            code = IPCP_LANE_ABORTED;
        s_remote = remote;
        s_code = code;
    }
    __syncthreads();
    int code = s_code;
    char *sl = code == IPCP_LANE_OK ? lane_slot(s_remote, slot, &a) : 0;
    if (code == IPCP_LANE_OK) {
        lane_copy(sl + IPCP_LANE_HDR, (const char *)a.buf, a.len, 0);
        __threadfence_system(); /* the data lands before the header */
    }
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    if (code == IPCP_LANE_OK) {
        ipcp__lane_hdr_t *h = (ipcp__lane_hdr_t *)sl;
        *(volatile uint32_t *)&h->len = (uint32_t)a.len;
        *(volatile int32_t *)&h->tag = a.tag;
        __threadfence_system();
        lane_store(&h->seq, a.k + 1);
    }
    lane_finish(&a, code, (uint32_t)a.len);
}

extern "C" __global__ void __launch_bounds__(LANE_THREADS)
    ipcp_lane_recv(ipcp__lane_kargs_t a)
{
    __shared__ int s_code;
    __shared__ uint32_t s_len, s_value;
    uint32_t slot = (uint32_t)(a.k % a.nslots);
    uint64_t round = a.k / a.nslots;
    char *sl = lane_slot(a.local, slot, &a);
    ipcp__lane_hdr_t *h = (ipcp__lane_hdr_t *)sl;

    if (threadIdx.x == 0) {
        int code = IPCP_LANE_OK;
        uint32_t len = 0, value = 0;
        if (lane_wait(&h->seq, a.k + 1, (const uint64_t *)a.abort)) {
            code = IPCP_LANE_ABORTED;
        } else {
            len = *(volatile uint32_t *)&h->len;
            int32_t tag = *(volatile int32_t *)&h->tag;
            value = len;
            if (tag != a.tag) {
                code = IPCP_LANE_TAG;
                value = (uint32_t)tag;
            } else if (len > a.len) {
                code = IPCP_LANE_TRUNC;
            }
        }
        s_code = code;
        s_len = len;
        s_value = value;
    }
    __syncthreads();
    int code = s_code;
    if (code == IPCP_LANE_OK) {
        lane_copy((char *)a.buf, sl + IPCP_LANE_HDR, s_len, 1);
        __threadfence_system(); /* the data is out before the slot is freed */
    }
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    /* A message that did not match is consumed all the same, so that the
     * sender is not left waiting for its slot. */
    if (code != IPCP_LANE_ABORTED) {
        int pcode = IPCP_LANE_OK;
        uint64_t remote = lane_peer(&a, &pcode);
        if (pcode == IPCP_LANE_OK)
            lane_store(lane_credit(remote, slot, &a), round + 1);
        else if (code == IPCP_LANE_OK)
            code = pcode;
    }
    lane_finish(&a, code, s_value);
}
