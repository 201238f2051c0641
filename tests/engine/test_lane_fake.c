/* The fake device backend of test_lane (test_lane_int.h): "device memory"
 * that is shared host memory, and "kernels" that run the lane's protocol
 * (backend/lane_abi.h) on one CPU thread per fake stream, in stream order.
 * A file of its own: it is a backend (a table of functions and its
 * streams), which the cases in test_lane.c only install and drive. */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "fakedev.h"
#include "test_lane_int.h"
#include "testutil.h"

/* ---- The fake device backend ------------------------------------------- */

/* Its allocations are the host backend's (memfd: peers can map them);
 * tests/util/fakedev.c only remembers which ones are "device memory". */
static const ipcp__backend_ops_t *const H = &ipcp__host_backend_ops;

/* Set: this rank cannot map the peer's memory (case importfail). */
int fk_fail_import;

static ipcp_status_t fk_mem_import(ipcp__backend_t *be,
                                   const ipcp__export_t *exp, const int *fds,
                                   int nfds, int device, void **ptr,
                                   void **handle)
{
    (void)device;
    if (fk_fail_import)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "fake import refused");
    return H->mem_import(be, exp, fds, nfds, -1, ptr, handle);
}

static int fk_registered;

static ipcp_status_t fk_shm_register(ipcp__backend_t *be, void *ptr, size_t len,
                                     int device, void **handle)
{
    (void)be, (void)ptr, (void)len, (void)device;
    *handle = &fk_registered;
    return IPCP_OK;
}

static void fk_shm_unregister(ipcp__backend_t *be, void *handle)
{
    (void)be, (void)handle;
}

/* Present so that the stream-ordered calls accept fake device memory; the
 * lane never wraps a stream. */
static ipcp_status_t fk_queue_wrap(ipcp__backend_t *be, int device,
                                   void *native, ipcp__queue_t **q)
{
    (void)be, (void)device, (void)native, (void)q;
    return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                      "the fake device has only the lane");
}

static ipcp_status_t fk_lane_prepare(ipcp__backend_t *be, int device, void *ptr,
                                     size_t len)
{
    (void)be, (void)device;
    if (ptr)
        memset(ptr, 0, len);
    return IPCP_OK;
}

/* ---- Fake streams: the kernels, in order, on a thread ------------------ */

#define FK_JOBS 16384

static uint64_t ld(uint64_t p)
{
    return __atomic_load_n((uint64_t *)(uintptr_t)p, __ATOMIC_ACQUIRE);
}

static void st(uint64_t p, uint64_t v)
{
    __atomic_store_n((uint64_t *)(uintptr_t)p, v, __ATOMIC_RELEASE);
}

/* The peer's block, as lane_peer does; 0 with *code set when none. */
static uint64_t fk_peer(const ipcp__lane_kargs_t *a, int *code)
{
    for (;;) {
        uint64_t v = a->remote ? a->remote : ld(a->peer_word);
        if (v == IPCP_LANE_BROKEN) {
            *code = IPCP_LANE_UNUSABLE;
            return 0;
        }
        if (v)
            return v;
        if (ld(a->abort)) {
            *code = IPCP_LANE_ABORTED;
            return 0;
        }
        sched_yield();
    }
}

static uint64_t fk_slot(uint64_t block, const ipcp__lane_kargs_t *a)
{
    return block + a->k % a->nslots * a->slot_bytes;
}

static uint64_t fk_credit(uint64_t block, const ipcp__lane_kargs_t *a)
{
    return block + (uint64_t)a->nslots * a->slot_bytes + a->k % a->nslots * 8;
}

static void fk_send(const ipcp__lane_kargs_t *a)
{
    int code = IPCP_LANE_OK;
    uint64_t remote = fk_peer(a, &code), round = a->k / a->nslots;
    while (code == IPCP_LANE_OK &&
           (int64_t)(ld(fk_credit(a->local, a)) - round) < 0) {
        if (ld(a->abort))
            code = IPCP_LANE_ABORTED;
        sched_yield();
    }
    if (code == IPCP_LANE_OK && IPCP_LANE_INLINE(a->len, a)) {
        /* Flagged words, which the kernels store in any order: the length
         * first here, and a yield before the data, so that the receiver
         * relies on each word's flag. */
        uint64_t s = fk_slot(remote, a);
        ipcp__lane_hdr_t *h = (ipcp__lane_hdr_t *)(uintptr_t)s;
        uint64_t *d = (uint64_t *)(uintptr_t)(s + IPCP_LANE_WORDS_OFF);
        const unsigned char *src = (const unsigned char *)(uintptr_t)a->buf;
        __atomic_store_n(&h->seq, IPCP_LANE_WORD(a->k, a->len),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&h->tagw, IPCP_LANE_WORD(a->k, (uint32_t)a->tag),
                         __ATOMIC_RELAXED);
        sched_yield();
        uint64_t nw = round % IPCP_LANE_REFRESH == 0 ? IPCP_LANE_INLINE_MAX / 4
                                                     : (a->len + 3) / 4;
        for (uint64_t j = nw; j-- > 0;) {
            uint32_t v = 0;
            for (uint64_t b = 0; b < 4 && 4 * j + b < a->len; b++)
                v |= (uint32_t)src[4 * j + b] << (8 * b);
            __atomic_store_n(d + j, IPCP_LANE_WORD(a->k, v), __ATOMIC_RELAXED);
        }
    } else if (code == IPCP_LANE_OK) {
        uint64_t s = fk_slot(remote, a);
        ipcp__lane_hdr_t *h = (ipcp__lane_hdr_t *)(uintptr_t)s;
        memcpy((char *)(uintptr_t)s + IPCP_LANE_DATA_OFF,
               (const void *)(uintptr_t)a->buf, a->len);
        __atomic_store_n(&h->tagw, IPCP_LANE_WORD(a->k, (uint32_t)a->tag),
                         __ATOMIC_RELAXED);
        st((uint64_t)(uintptr_t)&h->seq, IPCP_LANE_WORD(a->k, a->len));
    }
    st(a->rec, IPCP_LANE_DONE(a->k, code, a->len));
}

/* Waits for message k's flagged word at p; 0 when the abort word came
 * first. */
static int fk_word(const uint64_t *p, const ipcp__lane_kargs_t *a, uint64_t *w)
{
    while (IPCP_LANE_WORD_FLAG(*w = __atomic_load_n(p, __ATOMIC_RELAXED)) !=
           (uint32_t)(a->k + 1)) {
        if (ld(a->abort))
            return 0;
        sched_yield();
    }
    return 1;
}

static void fk_recv(const ipcp__lane_kargs_t *a)
{
    int code = IPCP_LANE_OK;
    uint64_t s = fk_slot(a->local, a), w;
    ipcp__lane_hdr_t *h = (ipcp__lane_hdr_t *)(uintptr_t)s;
    uint32_t value = 0;
    while ((uint32_t)((w = ld((uint64_t)(uintptr_t)&h->seq)) >> 32) !=
           (uint32_t)(a->k + 1)) {
        if (ld(a->abort)) {
            code = IPCP_LANE_ABORTED;
            break;
        }
        sched_yield();
    }
    uint64_t tw = 0;
    uint32_t len = (uint32_t)w;
    int words = IPCP_LANE_INLINE(len, a);
    if (code == IPCP_LANE_OK && words && !fk_word(&h->tagw, a, &tw))
        code = IPCP_LANE_ABORTED;
    else if (code == IPCP_LANE_OK && !words)
        tw = __atomic_load_n(&h->tagw, __ATOMIC_RELAXED);
    if (code == IPCP_LANE_OK) {
        int32_t tag = (int32_t)(uint32_t)tw;
        value = len;
        if (tag != a->tag) {
            code = IPCP_LANE_TAG;
            st(a->rec + 8, (uint64_t)(uint32_t)tag);
        } else if (len > a->len) {
            code = IPCP_LANE_TRUNC;
        }
        if (words) {
            /* Every word, also of a dropped message: its late words must
             * not land after the slot was handed back. */
            const uint64_t *d =
                (const uint64_t *)(uintptr_t)(s + IPCP_LANE_WORDS_OFF);
            unsigned char *dst = (unsigned char *)(uintptr_t)a->buf;
            for (uint64_t j = 0; j < (len + 3) / 4; j++) {
                uint64_t dw;
                if (!fk_word(d + j, a, &dw)) {
                    code = IPCP_LANE_ABORTED;
                    break;
                }
                for (uint64_t b = 0;
                     code == IPCP_LANE_OK && b < 4 && 4 * j + b < len; b++)
                    dst[4 * j + b] = (unsigned char)((uint32_t)dw >> (8 * b));
            }
        } else if (code == IPCP_LANE_OK) {
            memcpy((void *)(uintptr_t)a->buf,
                   (const char *)(uintptr_t)s + IPCP_LANE_DATA_OFF, len);
        }
    }
    if (code != IPCP_LANE_ABORTED) {
        int pcode = IPCP_LANE_OK;
        uint64_t remote = fk_peer(a, &pcode);
        if (pcode == IPCP_LANE_OK)
            st(fk_credit(remote, a), a->k / a->nslots + 1);
        else if (code == IPCP_LANE_OK)
            code = pcode;
    }
    st(a->rec, IPCP_LANE_DONE(a->k, code, value));
}

static void *fk_stream_main(void *arg)
{
    fk_stream_t *s = arg;
    pthread_mutex_lock(&s->m);
    for (;;) {
        while (s->head == s->tail && !s->stop)
            pthread_cond_wait(&s->c, &s->m);
        if (s->head == s->tail)
            break;
        int op = s->jobs[s->head % FK_JOBS].op;
        ipcp__lane_kargs_t a = s->jobs[s->head % FK_JOBS].a;
        s->running = 1;
        pthread_mutex_unlock(&s->m);
        if (op == IPCP_LANE_SEND)
            fk_send(&a);
        else
            fk_recv(&a);
        pthread_mutex_lock(&s->m);
        s->running = 0;
        s->head++;
        pthread_cond_broadcast(&s->c);
    }
    pthread_mutex_unlock(&s->m);
    return NULL;
}

/* Set: the next launch fails (case launchfail). */
int fk_fail_launch;

static ipcp_status_t fk_lane_launch(ipcp__backend_t *be, int device,
                                    void *stream, int op,
                                    const ipcp__lane_kargs_t *a)
{
    fk_stream_t *s = stream;
    (void)be, (void)device;
    if (__atomic_exchange_n(&fk_fail_launch, 0, __ATOMIC_RELAXED))
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_CUDA,
                          "fake launch of message %llu failed",
                          (unsigned long long)a->k);
    pthread_mutex_lock(&s->m);
    if (s->tail - s->head == FK_JOBS)
        T_FAIL("fake stream full");
    s->jobs[s->tail % FK_JOBS].op = op;
    s->jobs[s->tail % FK_JOBS].a = *a;
    s->tail++;
    pthread_cond_broadcast(&s->c);
    pthread_mutex_unlock(&s->m);
    return IPCP_OK;
}

static ipcp_status_t fk_stream_check(ipcp__backend_t *be, int device,
                                     void *native)
{
    fk_stream_t *s = native;
    (void)be, (void)device;
    if (__atomic_load_n(&s->capturing, __ATOMIC_RELAXED))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "fake stream is capturing a CUDA graph");
    return IPCP_OK;
}

fk_stream_t *fk_stream_new(void)
{
    fk_stream_t *s = calloc(1, sizeof(*s));
    if (!s || !(s->jobs = calloc(FK_JOBS, sizeof(*s->jobs))))
        T_FAIL("no memory for a fake stream");
    pthread_mutex_init(&s->m, NULL);
    pthread_cond_init(&s->c, NULL);
    if (pthread_create(&s->thread, NULL, fk_stream_main, s) != 0)
        T_FAIL("cannot start a fake stream");
    return s;
}

/* Waits until every kernel queued so far ran, or fails after limit_s. */
void fk_sync(fk_stream_t *s, double limit_s, const char *what)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)limit_s;
    pthread_mutex_lock(&s->m);
    while (s->head != s->tail)
        if (pthread_cond_timedwait(&s->c, &s->m, &until) != 0)
            T_FAIL("%s: fake stream still has %u kernels after %.0f s", what,
                   s->tail - s->head, limit_s);
    pthread_mutex_unlock(&s->m);
}

void fk_stream_free(fk_stream_t *s)
{
    pthread_mutex_lock(&s->m);
    s->stop = 1;
    pthread_cond_broadcast(&s->c);
    pthread_mutex_unlock(&s->m);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->m);
    pthread_cond_destroy(&s->c);
    free(s->jobs);
    free(s);
}

static ipcp_status_t fk_open(const ipcp__config_t *cfg, ipcp__backend_t **be)
{
    return H->open(cfg, be);
}

static void fk_close(ipcp__backend_t *be)
{
    H->close(be);
}

static ipcp_status_t fk_mem_export(ipcp__backend_t *be, void *handle,
                                   const void *ptr, size_t len,
                                   ipcp__export_t *exp, int *fd)
{
    return H->mem_export(be, handle, ptr, len, exp, fd);
}

static ipcp_status_t fk_mem_unimport(ipcp__backend_t *be, void *handle)
{
    return H->mem_unimport(be, handle);
}

const ipcp__backend_ops_t fk_ops = {
    .name = "fake-gpu",
    .type = IPCP_MEM_CUDA,
    .open = fk_open,
    .close = fk_close,
    .owns = fakedev_owns,
    .mem_alloc = fakedev_mem_alloc,
    .mem_free = fakedev_mem_free,
    .mem_export = fk_mem_export,
    .mem_import = fk_mem_import,
    .mem_unimport = fk_mem_unimport,
    .shm_register = fk_shm_register,
    .shm_unregister = fk_shm_unregister,
    .queue_wrap = fk_queue_wrap,
    .stream_check = fk_stream_check,
    .lane_prepare = fk_lane_prepare,
    .lane_launch = fk_lane_launch,
};
