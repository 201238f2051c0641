/* The engine's side of the small-message lane (engine/lane.c) between two
 * processes, on a machine without a GPU: a fake device backend whose
 * "device memory" is shared host memory and whose "kernels" run the lane's
 * protocol (backend/lane_abi.h) on one CPU thread per fake stream, in
 * stream order.  The CUDA kernels themselves are tested by cuda.lane.* on
 * GPUs; this covers, under the sanitizers, what the engine does around
 * them: the LANE messages, numbering, completion records and their reuse,
 * tag and length checks, mismatched settings, peer loss and finalize.
 *
 *   test_lane burst|pingpong|tag|trunc|mismatch|mismatch0|peerloss|finalize|
 *             capture|launchfail|mismatchwords|importfail
 *
 * CMake sets IPCPIPE_SMALL=4K. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "engine/engine.h"
#include "ipcpipe_cuda.h"
#include "testutil.h"

enum { TAG_SEED = 1, TAG_MSG = 7, TAG_OTHER = 9 };

/* ---- The fake device backend ------------------------------------------- */

/* Its allocations are the host backend's (memfd: peers can map them); it
 * only remembers which ones are "device memory". */
#define FK_MAX 64
static const ipcp__backend_ops_t *const H = &ipcp__host_backend_ops;
static pthread_mutex_t fk_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char *p;
    size_t n;
    void *handle;
} fk_allocs[FK_MAX];

static int fk_owns(ipcp__backend_t *be, const void *ptr, ipcp__mem_attr_t *attr)
{
    (void)be;
    int found = 0;
    pthread_mutex_lock(&fk_lock);
    for (int i = 0; i < FK_MAX && !found; i++) {
        const char *c = ptr;
        if (fk_allocs[i].p && c >= fk_allocs[i].p &&
            c < fk_allocs[i].p + fk_allocs[i].n) {
            attr->type = IPCP_MEM_CUDA;
            attr->device = 0;
            attr->base = (uintptr_t)fk_allocs[i].p;
            attr->size = fk_allocs[i].n;
            attr->buffer_id = (uint64_t)i + 1;
            found = 1;
        }
    }
    pthread_mutex_unlock(&fk_lock);
    return found;
}

static ipcp_status_t fk_mem_alloc(ipcp__backend_t *be, size_t len, int device,
                                  void **ptr, void **handle)
{
    (void)device;
    ipcp_status_t st = H->mem_alloc(be, len, -1, ptr, handle);
    if (st != IPCP_OK)
        return st;
    pthread_mutex_lock(&fk_lock);
    int i = 0;
    while (i < FK_MAX && fk_allocs[i].p)
        i++;
    if (i == FK_MAX)
        T_FAIL("more than %d fake device allocations", FK_MAX);
    fk_allocs[i].p = *ptr;
    fk_allocs[i].n = len;
    fk_allocs[i].handle = *handle;
    pthread_mutex_unlock(&fk_lock);
    return IPCP_OK;
}

static ipcp_status_t fk_mem_free(ipcp__backend_t *be, void *handle)
{
    pthread_mutex_lock(&fk_lock);
    for (int i = 0; i < FK_MAX; i++)
        if (fk_allocs[i].handle == handle)
            fk_allocs[i].p = NULL;
    pthread_mutex_unlock(&fk_lock);
    return H->mem_free(be, handle);
}

/* Set: this rank cannot map the peer's memory (case importfail). */
static int fk_fail_import;

static ipcp_status_t fk_mem_import(ipcp__backend_t *be,
                                   const ipcp__export_t *exp, int fd,
                                   int device, void **ptr, void **handle)
{
    (void)device;
    if (fk_fail_import)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "fake import refused");
    return H->mem_import(be, exp, fd, -1, ptr, handle);
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
typedef struct fk_stream {
    pthread_t thread;
    pthread_mutex_t m;
    pthread_cond_t c;
    struct {
        int op;
        ipcp__lane_kargs_t a;
    } * jobs;
    unsigned head, tail; /* jobs [head, tail) queued */
    int running, stop;
    int capturing; /* as if capturing a CUDA graph (case capture) */
} fk_stream_t;

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
static int fk_fail_launch;

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

static fk_stream_t *fk_stream_new(void)
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
static void fk_sync(fk_stream_t *s, double limit_s, const char *what)
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

static void fk_stream_free(fk_stream_t *s)
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

static const ipcp__backend_ops_t fk_ops = {
    .name = "fake-gpu",
    .type = IPCP_MEM_CUDA,
    .open = fk_open,
    .close = fk_close,
    .owns = fk_owns,
    .mem_alloc = fk_mem_alloc,
    .mem_free = fk_mem_free,
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

/* ---- The ranks ------------------------------------------------------------
 */

#define NBURST     300
#define NPING      5000
#define PING_CHUNK 1000 /* round trips in flight at most (4096 records) */

typedef struct side {
    ipcp_comm_t *comm;
    fk_stream_t *stream;
    unsigned char *buf; /* fake device memory */
    size_t len;
    size_t small;
    uint64_t seed;
} side_t;

static ipcp_stream_t us(const side_t *s)
{
    return (ipcp_stream_t)(void *)s->stream;
}

/* Rank 0 queues NBURST messages before rank 1 posts a receive (more than
 * the 64 inbox slots: credits wrap), at odd offsets, into receives up to 7
 * bytes larger; every byte and the byte after each message checked. */
static void burst(side_t *s)
{
    static ipcp_request_t *reqs[NBURST];
    size_t small = s->small;
    if (t_rank == 0) {
        for (int i = 0; i < NBURST; i++) {
            t_fill(s->buf + t_lane_off(small, i), t_lane_size(small, i),
                   s->seed + i);
            T_OK(ipcp_isend_on_stream(s->comm, s->buf + t_lane_off(small, i),
                                      t_lane_size(small, i), 1, TAG_MSG, us(s),
                                      &reqs[i]));
        }
        T_OK(ipcp_barrier(s->comm));
        t_lane_wait_all(reqs, NBURST, small, 0);
        fk_sync(s->stream, 30, "burst sender");
        return;
    }
    memset(s->buf, 0xA5, s->len);
    T_OK(ipcp_barrier(s->comm));
    usleep(20000);
    for (int i = 0; i < NBURST; i++) {
        size_t cap = t_lane_size(small, i) + (size_t)(i % 2) * 7;
        T_OK(ipcp_irecv_on_stream(s->comm, s->buf + t_lane_off(small, i),
                                  cap < small ? cap : small, 0, TAG_MSG, us(s),
                                  &reqs[i]));
    }
    t_lane_wait_all(reqs, NBURST, small, 1);
    fk_sync(s->stream, 30, "burst receiver");
    for (int i = 0; i < NBURST; i++) {
        size_t end = t_lane_off(small, i) + t_lane_size(small, i);
        t_verify(s->buf + t_lane_off(small, i), t_lane_size(small, i),
                 s->seed + i, "burst");
        if (s->buf[end] != 0xA5)
            T_FAIL("message %d: the byte after it was written", i);
    }
}

/* NPING round trips of 8 bytes, PING_CHUNK at a time, without requests
 * except the last of each chunk; the completion records (4096 a direction)
 * are reused; every echo checked.  tracked: a request for every call, all
 * waited at the end, so that records still held by finished requests are
 * collected while later calls post. */
static void pingpong(side_t *s, int tracked)
{
    static ipcp_request_t *all[2 * NPING];
    unsigned char *mine = s->buf, *echo = s->buf + (size_t)NPING * 8;
    if (t_rank == 0)
        for (int i = 0; i < NPING; i++)
            t_fill(mine + (size_t)i * 8, 8, s->seed + i);
    memset(echo, 0, (size_t)NPING * 8);
    T_OK(ipcp_barrier(s->comm));
    /* tracked: as if a thread posted without pause all along, which keeps
     * the progress thread off the lanes but for a poll every 50 us: the
     * calls collect most records they reuse themselves. */
    /* The communicator behind the public handle (internals). */
    ipcp_comm_t *comm = ipcp__comm_of(s->comm);
    T_CHECK(comm != NULL);
    if (tracked)
        atomic_fetch_add(&comm->lane_posting, 1);
    for (int c = 0; c < NPING; c += PING_CHUNK) {
        ipcp_request_t *rq[2] = {NULL, NULL};
        for (int i = c; i < c + PING_CHUNK; i++) {
            int last = i == c + PING_CHUNK - 1, j = 2 * i;
            ipcp_request_t **r0 = tracked ? &all[j] : last ? &rq[0] : NULL;
            ipcp_request_t **r1 = tracked ? &all[j + 1] : last ? &rq[1] : NULL;
            void *m = mine + (size_t)i * 8;
            if (t_rank == 0) {
                T_OK(
                    ipcp_isend_on_stream(s->comm, m, 8, 1, TAG_MSG, us(s), r0));
                T_OK(ipcp_irecv_on_stream(s->comm, echo + (size_t)i * 8, 8, 1,
                                          TAG_OTHER, us(s), r1));
            } else {
                T_OK(
                    ipcp_irecv_on_stream(s->comm, m, 8, 0, TAG_MSG, us(s), r0));
                T_OK(ipcp_isend_on_stream(s->comm, m, 8, 0, TAG_OTHER, us(s),
                                          r1));
            }
        }
        if (!tracked) {
            T_OK(ipcp_wait(rq[0], NULL));
            T_OK(ipcp_wait(rq[1], NULL));
        }
        fk_sync(s->stream, 30, "ping-pong");
    }
    if (tracked)
        atomic_fetch_sub(&comm->lane_posting, 1);
    for (int j = 0; tracked && j < 2 * NPING; j++) {
        ipcp_xfer_info_t info;
        T_OK(ipcp_wait(all[j], &info));
        if (info.nbytes != 8 || info.path != IPCP_PATH_LANE)
            T_FAIL("round trip %d, call %d: %zu bytes by path %d, want 8 by "
                   "the lane",
                   j / 2, j % 2, info.nbytes, (int)info.path);
    }
    for (int i = 0; i < NPING; i++)
        t_verify((t_rank == 0 ? echo : mine) + (size_t)i * 8, 8, s->seed + i,
                 t_rank == 0 ? "echo" : "ping");
    T_OK(ipcp_barrier(s->comm));
}

/* A broken contract on the receiving side: the receive fails with the
 * status and message, writes nothing, and the next message arrives. */
static void contract(side_t *s, int bad_tag)
{
    /* A message sent as flagged words (at most IPCP_LANE_INLINE_MAX
     * bytes), then one sent plainly. */
    static const size_t sizes[2][2] = {{300, 4000}, {8, 4000}};
    for (int m = 0; m < 2; m++) {
        ipcp_request_t *r0, *r1;
        size_t n = sizes[bad_tag][m];
        uint64_t seed = s->seed + 10 * (uint64_t)m;
        if (t_rank == 0) {
            t_fill(s->buf, n, seed);
            t_fill(s->buf + 8192, 1, seed + 1);
            T_OK(ipcp_isend_on_stream(s->comm, s->buf, n, 1, TAG_MSG, us(s),
                                      &r0));
            T_OK(ipcp_isend_on_stream(s->comm, s->buf + 8192, 1, 1, TAG_OTHER,
                                      us(s), &r1));
            T_OK(ipcp_wait(r0, NULL));
            T_OK(ipcp_wait(r1, NULL));
        } else {
            memset(s->buf, 0xA5, s->len);
            T_OK(ipcp_irecv_on_stream(s->comm, s->buf, bad_tag ? n : 100, 0,
                                      bad_tag ? TAG_OTHER : TAG_MSG, us(s),
                                      &r0));
            T_OK(ipcp_irecv_on_stream(s->comm, s->buf + 8192, 1, 0, TAG_OTHER,
                                      us(s), &r1));
            if (bad_tag) {
                T_STATUS(ipcp_wait(r0, NULL), IPCP_ERR_STATE);
                T_MSG_HAS("has tag 7, this receive tag 9");
            } else {
                char want[64];
                snprintf(want, sizeof want,
                         "has %zu bytes, more than the receive's 100", n);
                T_STATUS(ipcp_wait(r0, NULL), IPCP_ERR_TRUNCATED);
                T_MSG_HAS(want);
            }
            T_OK(ipcp_wait(r1, NULL));
            fk_sync(s->stream, 30, "contract");
            for (size_t j = 0; j < n; j++)
                if (s->buf[j] != 0xA5)
                    T_FAIL("message of %zu bytes: the failed receive wrote "
                           "byte %zu",
                           n, j);
            t_verify(s->buf + 8192, 1, seed + 1, "next message");
        }
        T_OK(ipcp_barrier(s->comm));
    }
}

/* A post (status st, request r) that must fail, at the call or at its
 * wait, with want and a message that has msg. */
static void fails(ipcp_status_t st, ipcp_request_t *r, ipcp_status_t want,
                  const char *msg)
{
    if (st == IPCP_OK)
        st = ipcp_wait(r, NULL);
    T_STATUS(st, want);
    T_MSG_HAS(msg);
}

/* The ranks disagree on IPCPIPE_SMALL (rank 1 may have none): rank 0's
 * send fails, at the call or at its wait, with IPCP_ERR_CONFIG. */
static void mismatch(side_t *s, const char *want)
{
    if (t_rank == 0) {
        ipcp_request_t *r = NULL;
        ipcp_status_t st =
            ipcp_isend_on_stream(s->comm, s->buf, 100, 1, TAG_MSG, us(s), &r);
        fails(st, r, IPCP_ERR_CONFIG, want);
        fk_sync(s->stream, 30, "mismatch");
    }
    T_OK(ipcp_barrier(s->comm));
}

/* Rank 1 dies while rank 0's receive waits: it fails with
 * IPCP_ERR_PEER_LOST, its kernel leaves, and later sends fail at once. */
static void peerloss(side_t *s)
{
    ipcp_request_t *r = NULL;
    if (t_rank == 0)
        T_OK(ipcp_irecv_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), &r));
    T_OK(ipcp_barrier(s->comm));
    if (t_rank == 1)
        kill(getpid(), SIGKILL);
    T_STATUS(ipcp_wait(r, NULL), IPCP_ERR_PEER_LOST);
    fk_sync(s->stream, 20, "after the loss");
    T_STATUS(ipcp_isend_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), NULL),
             IPCP_ERR_PEER_LOST);
}

/* A stream that captures a graph is refused before the lane numbers a
 * message: both calls fail with the backend's reason, and the message sent
 * afterwards is the receive's next (its bytes checked). */
static void capture(side_t *s)
{
    ipcp_request_t *r = NULL;
    s->stream->capturing = 1;
    if (t_rank == 0)
        T_STATUS(
            ipcp_isend_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), &r),
            IPCP_ERR_UNSUPPORTED);
    else
        T_STATUS(
            ipcp_irecv_on_stream(s->comm, s->buf, 8, 0, TAG_MSG, us(s), &r),
            IPCP_ERR_UNSUPPORTED);
    T_MSG_HAS("capturing a CUDA graph");
    T_CHECK(r == NULL);
    s->stream->capturing = 0;
    memset(s->buf, 0xA5, 64);
    if (t_rank == 0) {
        t_fill(s->buf, 40, s->seed);
        T_OK(ipcp_isend_on_stream(s->comm, s->buf, 40, 1, TAG_MSG, us(s), &r));
    } else {
        T_OK(ipcp_irecv_on_stream(s->comm, s->buf, 64, 0, TAG_MSG, us(s), &r));
    }
    ipcp_xfer_info_t info = {0, IPCP_PATH_AUTO};
    T_OK(ipcp_wait(r, &info));
    T_EQ_U64(info.nbytes, 40);
    T_EQ_INT(info.path, IPCP_PATH_LANE);
    fk_sync(s->stream, 30, "capture");
    if (t_rank == 1) {
        t_verify(s->buf, 40, s->seed, "message after the refused calls");
        for (int i = 40; i < 64; i++)
            if (s->buf[i] != 0xA5)
                T_FAIL("byte %d past the message was written", i);
    }
    T_OK(ipcp_barrier(s->comm));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank 1's launch of a numbered message fails: its send fails with the
 * launch's status, its lane is unusable, and rank 0's receive waiting for
 * that message fails (the lane's second LANE message) instead of waiting
 * until finalize; later calls fail at once on both sides. */
static void launchfail(side_t *s)
{
    ipcp_request_t *r = NULL;
    if (t_rank == 0)
        T_OK(ipcp_irecv_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), &r));
    T_OK(ipcp_barrier(s->comm));
    if (t_rank == 1) {
        fk_fail_launch = 1;
        T_STATUS(
            ipcp_isend_on_stream(s->comm, s->buf, 8, 0, TAG_MSG, us(s), &r),
            IPCP_ERR_CUDA);
        T_MSG_HAS("fake launch of message 0 failed");
        T_STATUS(
            ipcp_isend_on_stream(s->comm, s->buf, 8, 0, TAG_MSG, us(s), NULL),
            IPCP_ERR_CUDA);
        T_MSG_HAS("launching message 0 failed");
    } else {
        double t0 = now_s();
        T_STATUS(ipcp_wait(r, NULL), IPCP_ERR_STATE);
        T_MSG_HAS("rank 1's side of the lane broke (IPCP_ERR_CUDA");
        if (now_s() - t0 > 10.0)
            T_FAIL("the receive learned of the break after %.1f s",
                   now_s() - t0);
        T_STATUS(
            ipcp_isend_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), NULL),
            IPCP_ERR_STATE);
        T_MSG_HAS("rank 1's side of the lane broke");
    }
    fk_sync(s->stream, 20, "after the failed launch");
    T_OK(ipcp_barrier(s->comm));
}

/* Rank 0 cannot map rank 1's block, while rank 1 maps rank 0's: rank 0's
 * lane is unusable at once, and rank 1 learns it (from rank 0's LANE
 * message or a second one), so that no send of its waits forever for
 * credits rank 0 will never give: each of its sends fails, at the call or
 * at the wait, or went into rank 0's inbox before the news came (at most
 * the inbox's 64). */
#define NIMPORT 100
static void importfail(side_t *s)
{
    if (t_rank == 0) {
        ipcp_request_t *r = NULL;
        ipcp_status_t st =
            ipcp_irecv_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), &r);
        fails(st, r, IPCP_ERR_UNSUPPORTED, "cannot map rank 1's GPU memory");
        fk_sync(s->stream, 20, "importfail receiver");
        T_OK(ipcp_barrier(s->comm));
        return;
    }
    static ipcp_request_t *reqs[NIMPORT];
    int ok = 0, failed = 0;
    double t0 = now_s();
    for (int i = 0; i < NIMPORT; i++) {
        reqs[i] = NULL;
        ipcp_status_t st = ipcp_isend_on_stream(s->comm, s->buf, 8, 0, TAG_MSG,
                                                us(s), &reqs[i]);
        if (st == IPCP_OK)
            continue;
        T_STATUS(st, IPCP_ERR_UNSUPPORTED);
        T_MSG_HAS("rank 0");
        failed++;
    }
    for (int i = 0; i < NIMPORT; i++) {
        if (!reqs[i])
            continue;
        ipcp_status_t st = ipcp_wait(reqs[i], NULL);
        if (st == IPCP_OK) {
            ok++;
            continue;
        }
        T_STATUS(st, IPCP_ERR_UNSUPPORTED);
        T_MSG_HAS("rank 0");
        failed++;
    }
    if (now_s() - t0 > 10.0)
        T_FAIL("rank 1's sends took %.1f s to end", now_s() - t0);
    if (ok > 64 || failed < NIMPORT - 64)
        T_FAIL("%d sends went through and %d failed; rank 0's inbox holds "
               "64",
               ok, failed);
    printf("rank 1: %d sends into rank 0's inbox before the news, %d failed\n",
           ok, failed);
    fk_sync(s->stream, 20, "importfail sender");
    T_OK(ipcp_barrier(s->comm));
}

/* A receive no one sends to is still waiting at finalize: finalize
 * releases its kernel and returns. */
static void at_finalize(side_t *s)
{
    if (t_rank == 0)
        T_OK(ipcp_irecv_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), NULL));
    T_OK(ipcp_barrier(s->comm));
}

static const char *const cases[] = {
    "burst",         "pingpong",   "tag",      "trunc",   "mismatch",
    "mismatch0",     "peerloss",   "finalize", "capture", "launchfail",
    "mismatchwords", "importfail", "tracked"};

/* The case named by argv[1] (t_pick_case; exits on --list or a bad
 * name). */
static int pick_case(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        exit(rc);
    return i;
}

static int rank_main(int argc, char **argv)
{
    int c = pick_case(argc, argv);
    const char *v = getenv("IPCPIPE_SMALL");
    side_t s = {0};
    ipcp_alloc_params_t p;
    void *ptr;

    ipcp__device_backend_for_tests = &fk_ops;
    fk_fail_import = c == 11 && getenv("IPCPIPE_RANK") &&
                     strcmp(getenv("IPCPIPE_RANK"), "0") == 0;
    s.small = v ? t_parse_size(v) : 0;
    T_OK(ipcp_init(NULL, &s.comm));
    t_rank = ipcp_comm_rank(s.comm);
    s.stream = fk_stream_new();
    s.len = (size_t)NBURST * (4096 + 16) + 2 * (size_t)NPING * 8;
    ipcp_alloc_params_init(&p);
    p.type = IPCP_MEM_CUDA;
    T_OK(ipcp_mem_alloc(s.comm, s.len, &p, &ptr));
    s.buf = ptr;
    s.seed = t_shared_seed(s.comm, TAG_SEED);
    switch (c) {
    case 0:
        burst(&s);
        break;
    case 1:
    case 12:
        pingpong(&s, c == 12);
        break;
    case 2:
    case 3:
        contract(&s, c == 2);
        break;
    case 4:
    case 5:
        mismatch(&s, "IPCPIPE_SMALL=");
        break;
    case 10:
        mismatch(&s, "rank 1 has IPCPIPE_SMALL_WORDS=0, this rank 512");
        break;
    case 11:
        importfail(&s);
        break;
    case 6:
        peerloss(&s);
        break;
    case 7:
        at_finalize(&s);
        break;
    case 8:
        capture(&s);
        break;
    default:
        launchfail(&s);
    }
    if (c != 6)
        T_OK(ipcp_mem_free(s.comm, s.buf));
    T_OK(ipcp_finalize(s.comm));
    fk_sync(s.stream, 20, "after finalize");
    fk_stream_free(s.stream);
    return 0;
}

/* Rank 1 sends every lane message of up to 512 bytes the fenced way. */
static void words_on_rank1(int rank, void *arg)
{
    (void)arg;
    if (rank == 1)
        setenv("IPCPIPE_SMALL_WORDS", "0", 1);
}

int main(int argc, char **argv)
{
    if (ipcp_launch_is_rank())
        return t_mp_main(argc, argv, 2, 120, rank_main);
    int c = pick_case(argc, argv);
    if (c == 10)
        return t_launch2(argv, -1, words_on_rank1, NULL);
    if (c == 4 || c == 5)
        return t_launch2(argv, -1, t_small_on_rank1, c == 4 ? "1024" : "0");
    if (c == 6)
        return t_launch2(argv, 1, NULL, NULL);
    return t_mp_main(argc, argv, 2, 120, rank_main);
}
