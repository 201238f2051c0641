/* Measures host queue copies against a plain memcpy, side by side in one
 * run: a plain memcpy between private buffers, a plain memcpy into an
 * imported memfd mapping (the direct path's destination), the same bytes
 * as chunks spread over queues, and a staged pipeline (a producer queue
 * copies chunks into a ring of 4 slots, a consumer queue copies them out,
 * ordered by flags).  Not a CTest entry: timing on shared machines is not a
 * pass/fail matter.
 *   bench_host_copy [SIZE [CHUNK [QUEUES [ITERS [STREAM_MIN]]]]]
 * e.g. 256M 4M 1 7; STREAM_MIN sets ipcp__host_stream_min (0: off). */
#include <pthread.h>
#include <unistd.h>

#include "backend/host/host.h"
#include "common/time.h"
#include "testutil.h"

static const ipcp__backend_ops_t *ops = &ipcp__host_backend_ops;

enum { BENCH_SLOTS = 4 };

/* The waiter blocks on a condition variable: polling with short sleeps
 * costs a timer interrupt each (a VM exit on virtual machines), which was
 * seen to slow the copying core by a fifth. */
typedef struct bench_track {
    ipcp__track_t t;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
} bench_track_t;

typedef struct bench {
    size_t len, chunk;
    int nq;
    ipcp__queue_t *q[16];
    ipcp__queue_t *cons; /* consumer of the staged ring */
    char *src, *plain, *peer, *ring;
    uint64_t *flags;   /* full[s] at line s, free[s] at line 8 + s */
    uint64_t staged_n; /* chunks through the ring so far */
} bench_t;

static void bench_cb(ipcp__track_t *t)
{
    bench_track_t *k = ipcp__container_of(t, bench_track_t, t);
    pthread_mutex_lock(&k->lock);
    k->done = 1;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
}

static void bench_track_init(bench_track_t *k, int pending)
{
    k->done = 0;
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->cond, NULL);
    ipcp__track_init(&k->t, pending, bench_cb, NULL);
}

static void bench_track_wait(bench_track_t *k)
{
    pthread_mutex_lock(&k->lock);
    while (!k->done)
        pthread_cond_wait(&k->cond, &k->lock);
    pthread_mutex_unlock(&k->lock);
    T_EQ_INT(atomic_load(&k->t.status), IPCP_OK);
    ipcp__track_destroy(&k->t);
    pthread_cond_destroy(&k->cond);
    pthread_mutex_destroy(&k->lock);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

static double time_memcpy(void *dst, const void *src, size_t len)
{
    double t0 = ipcp__now_s();
    memcpy(dst, src, len);
    return ipcp__now_s() - t0;
}

static double time_direct(bench_t *b)
{
    bench_track_t k;
    bench_track_init(&k, b->nq);
    double t0 = ipcp__now_s();
    size_t i = 0;
    for (size_t off = 0; off < b->len; off += b->chunk, i++)
        T_OK(ops->copy(b->q[i % (size_t)b->nq], b->peer + off, b->src + off,
                       ipcp__min(b->chunk, b->len - off), &k.t));
    for (int j = 0; j < b->nq; j++)
        T_OK(ops->notify(b->q[j], &k.t));
    bench_track_wait(&k);
    return ipcp__now_s() - t0;
}

static double time_staged(bench_t *b)
{
    bench_track_t k;
    bench_track_init(&k, 2);
    ipcp__queue_t *prod = b->q[0];
    double t0 = ipcp__now_s();
    for (size_t off = 0; off < b->len; off += b->chunk, b->staged_n++) {
        size_t n = ipcp__min(b->chunk, b->len - off);
        int s = (int)(b->staged_n % BENCH_SLOTS);
        uint64_t round = b->staged_n / BENCH_SLOTS;
        char *slot = b->ring + (size_t)s * b->chunk;
        uint64_t *full = b->flags + 8 * s, *fr = b->flags + 8 * (8 + s);
        T_OK(ops->flag_wait(prod, fr, round, NULL, &k.t));
        T_OK(ops->copy(prod, slot, b->src + off, n, &k.t));
        T_OK(ops->flag_write(prod, full, round + 1, &k.t));
        T_OK(ops->flag_wait(b->cons, full, round + 1, NULL, &k.t));
        T_OK(ops->copy(b->cons, b->peer + off, slot, n, &k.t));
        T_OK(ops->flag_write(b->cons, fr, round + 1, &k.t));
    }
    T_OK(ops->notify(prod, &k.t));
    T_OK(ops->notify(b->cons, &k.t));
    bench_track_wait(&k);
    return ipcp__now_s() - t0;
}

static void bench_report(const char *what, double *v, int iters, double len,
                         double plain)
{
    double gbs = 1e-9 * len / median(v, iters);
    if (plain > 0)
        printf("%-24s %7.2f GB/s  (%.0f%% of plain)\n", what, gbs,
               100 * gbs / plain);
    else
        printf("%-24s %7.2f GB/s\n", what, gbs);
}

int main(int argc, char **argv)
{
    bench_t b = {0};
    b.len = argc > 1 ? t_parse_size(argv[1]) : (size_t)256 << 20;
    b.chunk = argc > 2 ? t_parse_size(argv[2]) : (size_t)4 << 20;
    b.nq = argc > 3 ? atoi(argv[3]) : 1;
    int iters = argc > 4 ? atoi(argv[4]) : 7;
    if (argc > 5)
        ipcp__host_stream_min = t_parse_size(argv[5]);
    T_CHECK(b.len > 0 && b.chunk > 0 && b.nq >= 1 && b.nq <= 16 && iters >= 1);

    ipcp__backend_t *be;
    T_OK(ops->open(NULL, &be));
    void *mine, *h, *hi, *ring_h;
    ipcp__export_t exp;
    int fd;
    double t0 = ipcp__now_s();
    T_OK(ops->mem_alloc(be, b.len, -1, &mine, &h));
    double t1 = ipcp__now_s();
    T_OK(ops->mem_export(be, h, mine, b.len, &exp, &fd));
    T_OK(ops->mem_import(be, &exp, &fd, fd >= 0, -1, (void **)&b.peer, &hi));
    double t2 = ipcp__now_s();
    T_OK(ops->mem_alloc(be, 4096 + BENCH_SLOTS * b.chunk, -1, (void **)&b.flags,
                        &ring_h));
    b.ring = (char *)b.flags + 4096;
    b.src = t_malloc(b.len);
    b.plain = t_malloc(b.len);
    uint64_t seed = t_fresh_seed();
    t_fill(b.src, b.len, seed);
    memset(b.plain, 0, b.len);
    for (int j = 0; j < b.nq; j++)
        T_OK(ops->queue_create(be, -1, &b.q[j]));
    T_OK(ops->queue_create(be, -1, &b.cons));

    double *va = calloc((size_t)iters, sizeof(double));
    double *vb = calloc((size_t)iters, sizeof(double));
    double *vc = calloc((size_t)iters, sizeof(double));
    double *vd = calloc((size_t)iters, sizeof(double));
    /* Interleaved, so that drift of a shared machine hits all of them. */
    for (int i = 0; i < iters; i++) {
        va[i] = time_memcpy(b.plain, b.src, b.len);
        vb[i] = time_memcpy(b.peer, b.src, b.len);
        memset(b.peer, 0, b.len);
        vc[i] = time_direct(&b);
        t_verify(mine, b.len, seed, "direct copies");
        memset(b.peer, 0, b.len);
        vd[i] = time_staged(&b);
        t_verify(mine, b.len, seed, "staged copies");
    }
    printf("size %zu chunk %zu queues %d iters %d stream_min %zu\n", b.len,
           b.chunk, b.nq, iters, ipcp__host_stream_min);
    printf("mem_alloc %.1f ms, export+import %.1f ms\n", (t1 - t0) * 1e3,
           (t2 - t1) * 1e3);
    double plain = 1e-9 * (double)b.len / median(va, iters);
    bench_report("plain memcpy", va, iters, (double)b.len, 0);
    bench_report("memcpy into import", vb, iters, (double)b.len, plain);
    bench_report("queues, direct", vc, iters, (double)b.len, plain);
    bench_report("queues, staged", vd, iters, (double)b.len, plain);

    for (int j = 0; j < b.nq; j++)
        ops->queue_destroy(b.q[j]);
    ops->queue_destroy(b.cons);
    free(va);
    free(vb);
    free(vc);
    free(vd);
    free(b.src);
    free(b.plain);
    T_OK(ops->mem_unimport(be, hi));
    close(fd);
    T_OK(ops->mem_free(be, ring_h));
    T_OK(ops->mem_free(be, h));
    ops->close(be);
    return 0;
}
