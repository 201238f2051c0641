/* ipcpipe-bench: ceilings, measured by rank 0 alone in the same run and
 * with the same window as the transfers they are compared with.  Host
 * memory: memcpy by one thread of the receiving process, and by as many
 * threads as the library copies with (each its share of every transfer;
 * for bidir, that many for each direction at once; on the CPUs of both
 * ranks when they are bound to fewer CPUs than that, since the library
 * then copies in both processes), once with glibc's memcpy and once with
 * non-temporal stores, the two ways the library's copy threads copy (it
 * streams pieces from 256 KiB up; docs/tools.md).  A row is set against
 * the fastest of them at its size.  GPU memory: single-process CUDA
 * copies (bench_cuda.c). */
#include "bench.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#define BENCH_HAVE_NT 1
#include <immintrin.h>
#endif

#define MIB ((size_t)1 << 20)

/* Under a sanitizer each copy call goes through its interceptor, and the
 * ceilings' figures mean nothing: samples there copy 1/64 of the bytes
 * (the 8 B ceilings, 2 x 20 samples of 2 M calls of memcpy per thread,
 * took 27 of a run's 32 s under ThreadSanitizer on a 2-CPU VM). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BENCH_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BENCH_SANITIZED 1
#endif
#ifdef BENCH_SANITIZED
#define SAMPLE_SHRINK 64
#else
#define SAMPLE_SHRINK 1
#endif

const char *bench_ceil_name(bench_ceil_kind_t k)
{
    static const char *const names[BENCH_CEIL_COUNT] = {
        [BENCH_CEIL_NONE] = "-",
        [BENCH_CEIL_MEMCPY] = "memcpy",
        [BENCH_CEIL_MEMCPY_BIDIR] = "memcpy-bidir",
        [BENCH_CEIL_D2D] = "d2d",
        [BENCH_CEIL_STAGED] = "min(d2h,h2d)",
        [BENCH_CEIL_D2D_BIDIR] = "d2d-bidir",
        [BENCH_CEIL_STAGED_BIDIR] = "2*min(d2h,h2d)",
        [BENCH_CEIL_D2H] = "d2h",
        [BENCH_CEIL_H2D] = "h2d",
        [BENCH_CEIL_MEMCPY_PAR] = "memcpy-par",
        [BENCH_CEIL_NT_PAR] = "nt-par",
        [BENCH_CEIL_NT_BIDIR] = "nt-bidir",
        [BENCH_CEIL_STRIPED] = "striped",
    };
    return (unsigned)k < BENCH_CEIL_COUNT ? names[k] : "?";
}

#define PAR_MAX 16 /* threads of a ceiling at most */

struct bench_ceil {
    /* host */
    unsigned char *src, *dst; /* rank 0's buffers (not owned) */
    size_t src_len, dst_len;
    unsigned char *scratch; /* second pair for the bidir one: src, slots */
    size_t scratch_len;
    /* Where the parallel copies run when the ranks are bound to fewer CPUs
     * than the library has queues (bench_ceil_set_cpus): this process's
     * CPUs first, then the other ranks'; ncpu 0 leaves them unbound. */
    int cpu[PAR_MAX];
    int ncpu;
    /* cuda */
    bench_cuda_ceil_t *cuda;
};

bench_ceil_t *bench_ceil_create_host(const bench_buf_t *src,
                                     const bench_buf_t *dst, size_t scratch,
                                     int *nomem, char *err, size_t elen)
{
    bench_ceil_t *cl = calloc(1, sizeof(*cl));
    *nomem = 0;
    if (cl && scratch) {
        cl->scratch = malloc(scratch);
        if (cl->scratch) {
            memset(cl->scratch, 0, scratch); /* no first touch while timed */
            cl->scratch_len = scratch;
        }
    }
    if (!cl || (scratch && !cl->scratch)) {
        *nomem = 1;
        bench_fmt(err, elen, "cannot allocate %zu bytes for the ceilings",
                  scratch);
        free(cl);
        return NULL;
    }
    cl->src = src->ptr;
    cl->src_len = src->len;
    cl->dst = dst->ptr;
    cl->dst_len = dst->len;
    return cl;
}

bench_ceil_t *bench_ceil_create_cuda(ipcp_comm_t *comm, int a, int b, int plain,
                                     size_t len, size_t pinned_len, int *nomem,
                                     char *err, size_t elen)
{
    bench_ceil_t *cl = calloc(1, sizeof(*cl));
    if (!cl) {
        *nomem = 1;
        bench_fmt(err, elen, "out of memory");
        return NULL;
    }
    cl->cuda = bench_cuda_ceil_create(comm, a, b, plain, len, pinned_len, nomem,
                                      err, elen);
    if (!cl->cuda) {
        free(cl);
        return NULL;
    }
    return cl;
}

void bench_ceil_destroy(ipcp_comm_t *comm, bench_ceil_t *cl)
{
    if (!cl)
        return;
    bench_cuda_ceil_destroy(comm, cl->cuda);
    free(cl->scratch);
    free(cl);
}

/* ---- host -----------------------------------------------------------------
 */

#ifdef BENCH_HAVE_NT
/* A copy with non-temporal stores, the bench's own: the destination is
 * not read for ownership and does not displace the cache, which is what
 * makes them faster than glibc's ordinary stores for copies larger than
 * the caches (glibc itself streams only above a threshold of a sizeable
 * fraction of the L3).  Each 64-byte line of the destination is written
 * whole, so that a write-combining buffer goes out full; the source is
 * prefetched 2 KiB ahead, past the 4 KiB page ends where the hardware
 * prefetcher stops. */
#define NT_LINE  64
#define NT_AHEAD 2048

__attribute__((target("avx2"))) static void
nt_lines_avx2(unsigned char *d, const unsigned char *s, size_t lines)
{
    for (size_t i = 0; i < lines; i++, d += NT_LINE, s += NT_LINE) {
        _mm_prefetch((const char *)s + NT_AHEAD, _MM_HINT_NTA);
        __m256i a = _mm256_loadu_si256((const __m256i_u *)(const void *)s);
        __m256i b =
            _mm256_loadu_si256((const __m256i_u *)(const void *)(s + 32));
        _mm256_stream_si256((__m256i *)(void *)d, a);
        _mm256_stream_si256((__m256i *)(void *)(d + 32), b);
    }
}

static void nt_lines_sse2(unsigned char *d, const unsigned char *s,
                          size_t lines)
{
    for (size_t i = 0; i < lines; i++, d += NT_LINE, s += NT_LINE) {
        _mm_prefetch((const char *)s + NT_AHEAD, _MM_HINT_NTA);
        __m128i v[NT_LINE / 16];
        for (int k = 0; k < NT_LINE / 16; k++)
            v[k] = _mm_loadu_si128((const __m128i_u *)(const void *)s + k);
        for (int k = 0; k < NT_LINE / 16; k++)
            _mm_stream_si128((__m128i *)(void *)d + k, v[k]);
    }
}

/* Lines up to the first line boundary of dst and after the last whole
 * line go through memcpy; the fence makes the streamed lines visible
 * before whatever the thread does next (a barrier, here). */
static void *nt_copy(void *dst, const void *src, size_t len)
{
    /* Asked once by whichever copy thread comes first; the others may ask
     * too, and all write the same answer (atomic: the threads race). */
    static atomic_int avx2_known = -1;
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t head = (size_t)(-(uintptr_t)d & (NT_LINE - 1));
    if (len < head + 4 * NT_LINE)
        return memcpy(dst, src, len);
    int avx2 = atomic_load_explicit(&avx2_known, memory_order_relaxed);
    if (avx2 < 0) {
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&avx2_known, avx2, memory_order_relaxed);
    }
    memcpy(d, s, head);
    size_t lines = (len - head) / NT_LINE, body = lines * NT_LINE;
    if (avx2)
        nt_lines_avx2(d + head, s + head, lines);
    else
        nt_lines_sse2(d + head, s + head, lines);
    memcpy(d + head + body, s + head + body, len - head - body);
    _mm_sfence();
    return dst;
}
#endif

/* Through volatile pointers so the compiler cannot fold repeated copies of
 * the same bytes into one. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;
#ifdef BENCH_HAVE_NT
static void *(*volatile nt_fn)(void *, const void *, size_t) = nt_copy;
#endif

typedef struct copy_plan {
    unsigned char *dst;
    const unsigned char *src;
    size_t size;
    int window, slots;
    size_t batch;  /* windows per timed sample */
    size_t stride; /* bytes from one receive slot to the next */
    int nt;        /* with non-temporal stores (nt_copy) */
} copy_plan_t;

static void copy_windows(const copy_plan_t *p)
{
    void *(*fn)(void *, const void *, size_t) = copy_fn;
#ifdef BENCH_HAVE_NT
    if (p->nt)
        fn = nt_fn;
#endif
    for (size_t b = 0; b < p->batch; b++)
        for (int k = 0; k < p->window; k++)
            fn(p->dst + (size_t)(k % p->slots) * p->stride, p->src, p->size);
}

/* Small windows are batched so that a sample lasts well beyond a clock
 * read (or, for two threads, the barrier that starts them). */
static size_t batch_for(size_t size, int window, size_t target)
{
    size_t bytes = size * (size_t)window;
    target /= SAMPLE_SHRINK;
    size_t batch = bytes >= target ? 1 : target / bytes;
    return batch > 65536 ? 65536 : batch;
}

/* At most about 2 GiB copied per ceiling, at least 5 samples. */
static int cap_reps(int reps, size_t size, int window, size_t batch)
{
    double per = (double)size * window * (double)batch;
    double most = (double)((size_t)2 << 30) / per;
    if (most < 5)
        most = 5;
    return reps < most ? reps : (int)most;
}

static double host_memcpy(bench_ceil_t *cl, size_t size, int window, int slots,
                          double *t, int reps)
{
    copy_plan_t p = {cl->dst, cl->src, size,
                     window,  slots,   batch_for(size, window, MIB),
                     size,    0};
    reps = cap_reps(reps, size, window, p.batch);
    copy_windows(&p);
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        copy_windows(&p);
        t[r] = (bench_now_s() - t0) / (double)p.batch;
    }
    double med = bench_median(t, reps);
    return med > 0 ? (double)window * (double)size / med / 1e9 : 0;
}

int bench_host_queues(void)
{
    for (int i = 0; i < ipcp_settings_count(); i++) {
        ipcp_setting_info_t info;
        if (ipcp_setting_get(i, &info) == IPCP_OK &&
            strcmp(info.name, "IPCPIPE_QUEUES") == 0) {
            int n = atoi(info.value);
            return n > 0 ? n : 2;
        }
    }
    return 2;
}

typedef struct par_arg {
    copy_plan_t plan;
    pthread_barrier_t *bar;
    pthread_mutex_t *gate; /* held until every thread is started */
    const int *abort;      /* set (under gate) when one could not be */
    int reps;
    int cpu; /* the CPU it runs on, -1: wherever this process may */
} par_arg_t;

static void *par_thread(void *argp)
{
    par_arg_t *a = argp;
    if (a->cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(a->cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    }
    pthread_mutex_lock(a->gate);
    int abort = *a->abort;
    pthread_mutex_unlock(a->gate);
    if (abort)
        return NULL;
    for (int r = 0; r <= a->reps; r++) {
        pthread_barrier_wait(a->bar);
        copy_windows(&a->plan);
        pthread_barrier_wait(a->bar);
    }
    return NULL;
}

/* n plans copied by n threads at once (plan 0 by this one); a repetition
 * lasts from the barrier that starts them to the one all reach when done.
 * Returns the median seconds of one batch, or a negative value. */
static double par_copy(par_arg_t *a, int n, double *t, int reps, char *err,
                       size_t elen)
{
    pthread_barrier_t bar;
    pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
    pthread_t th[PAR_MAX];
    int started = 1, abort = 0;
    if (pthread_barrier_init(&bar, NULL, (unsigned)n) != 0) {
        bench_fmt(err, elen, "pthread_barrier_init failed");
        return -1;
    }
    pthread_mutex_lock(&gate);
    for (int i = 0; i < n; i++)
        a[i] = (par_arg_t){a[i].plan, &bar, &gate, &abort, reps, a[i].cpu};
    for (; started < n; started++)
        if (pthread_create(&th[started], NULL, par_thread, &a[started]) != 0)
            break;
    abort = started < n;
    pthread_mutex_unlock(&gate);
    double med = -1;
    if (abort) {
        bench_fmt(err, elen, "pthread_create failed");
    } else {
        for (int r = 0; r <= reps; r++) { /* round 0 is a warm-up */
            pthread_barrier_wait(&bar);
            double t0 = bench_now_s();
            copy_windows(&a[0].plan);
            pthread_barrier_wait(&bar);
            if (r > 0)
                t[r - 1] = (bench_now_s() - t0) / (double)a[0].plan.batch;
        }
        med = bench_median(t, reps);
    }
    for (int i = 1; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    return med;
}

/* The plans of q threads sharing each transfer of base's window: thread i
 * copies the i-th of q pieces of every transfer (the library splits a
 * transfer over its queues the same way). */
static void share_plan(const copy_plan_t *base, int q, par_arg_t *out)
{
    size_t piece = base->size / (size_t)q, off = 0;
    for (int i = 0; i < q; i++) {
        size_t len = i == q - 1 ? base->size - off : piece;
        out[i].plan = *base;
        out[i].plan.dst += off;
        out[i].plan.src += off;
        out[i].plan.size = len;
        out[i].plan.stride = base->size;
        off += len;
    }
}

/* One host ceiling's measurement: its size and window, the copy, and
 * where the samples and a failure's reason go. */
typedef struct host_job {
    size_t size;
    int window, slots, reps;
    int nt;    /* non-temporal stores (nt_copy) rather than memcpy */
    double *t; /* reps samples */
    char *err;
    size_t elen;
} host_job_t;

/* The windows of ndirs directions copied at once (from dst/src pairs),
 * each shared by as many threads as the library runs per direction;
 * aggregate GB/s. */
static double host_copy_shared(const bench_ceil_t *cl,
                               unsigned char *const *dst,
                               const unsigned char *const *src, int ndirs,
                               const host_job_t *j)
{
    int q = bench_host_queues();
    par_arg_t a[PAR_MAX];
    if (q > PAR_MAX / ndirs)
        q = PAR_MAX / ndirs;
    if ((size_t)q > j->size)
        q = (int)j->size;
    size_t batch = batch_for(j->size, j->window, 16 * MIB);
    int reps = cap_reps(j->reps, j->size, j->window, batch);
    for (int d = 0; d < ndirs; d++) {
        copy_plan_t base = {dst[d],   src[d], j->size, j->window,
                            j->slots, batch,  j->size, j->nt};
        share_plan(&base, q, a + d * q);
    }
    /* Thread i on the (i mod ncpu)-th CPU: thread 0 is this one, on
     * this process's CPU already. */
    for (int i = 0; i < ndirs * q; i++)
        a[i].cpu = cl->ncpu > 1 && i > 0 ? cl->cpu[i % cl->ncpu] : -1;
    double med = par_copy(a, ndirs * q, j->t, reps, j->err, j->elen);
    /* The last transfer of each direction, as copied: a copy that is fast
     * because it is wrong sets no ceiling. */
    size_t last = (size_t)((j->window - 1) % j->slots) * j->size;
    for (int d = 0; d < ndirs && med > 0; d++)
        if (memcmp(dst[d] + last, src[d], j->size) != 0) {
            bench_fmt(j->err, j->elen,
                      "the %s copy's bytes differ from "
                      "its source",
                      j->nt ? "non-temporal" : "memcpy");
            med = -1;
        }
    return med > 0 ? ndirs * (double)j->window * (double)j->size / med / 1e9
                   : 0;
}

static double host_copy_par(bench_ceil_t *cl, const host_job_t *j)
{
    unsigned char *dst[1] = {cl->dst};
    const unsigned char *src[1] = {cl->src};
    return host_copy_shared(cl, dst, src, 1, j);
}

/* Both directions at once (the second in scratch memory). */
static double host_copy_bidir(bench_ceil_t *cl, const host_job_t *j)
{
    size_t wl = (size_t)j->slots * j->size;
    if (!cl->scratch || cl->scratch_len < wl + j->size) {
        bench_fmt(j->err, j->elen, "no scratch memory for the bidir ceiling");
        return 0;
    }
    unsigned char *dst[2] = {cl->dst, cl->scratch};
    const unsigned char *src[2] = {cl->src, cl->scratch + wl};
    return host_copy_shared(cl, dst, src, 2, j);
}

int bench_ceil_have_nt(void)
{
#ifdef BENCH_HAVE_NT
    return 1;
#else
    return 0;
#endif
}

void bench_ceil_set_cpus(bench_ceil_t *cl, const cpu_set_t *peer)
{
    cpu_set_t mine;
    int q = bench_host_queues();
    if (!cl)
        return;
    cl->ncpu = 0;
    if (sched_getaffinity(0, sizeof(mine), &mine) != 0 || CPU_COUNT(&mine) >= q)
        return;
    for (int pass = 0; pass < 2; pass++)
        for (int c = 0; c < CPU_SETSIZE && cl->ncpu < PAR_MAX; c++)
            if (pass == 0 ? CPU_ISSET(c, &mine)
                          : CPU_ISSET(c, peer) && !CPU_ISSET(c, &mine))
                cl->cpu[cl->ncpu++] = c;
    if (cl->ncpu <= CPU_COUNT(&mine))
        cl->ncpu = 0; /* the other ranks add no CPU */
}

double bench_ceil_measure(bench_ceil_t *cl, bench_ceil_kind_t kind, size_t size,
                          int window, int slots, int reps, char *err,
                          size_t elen)
{
    if (!cl || size == 0 || reps <= 0) {
        bench_fmt(err, elen, "no ceiling state");
        return 0;
    }
    if (cl->cuda)
        return bench_cuda_ceil_measure(cl->cuda, kind, size, window, slots,
                                       reps, err, elen);
    if ((size_t)slots * size > cl->dst_len || size > cl->src_len) {
        bench_fmt(err, elen, "ceiling buffers too small for %d x %zu bytes",
                  slots, size);
        return 0;
    }
    double *t = calloc((size_t)reps, sizeof(*t)), v = 0;
    if (!t) {
        bench_fmt(err, elen, "out of memory");
        return 0;
    }
    host_job_t j = {size, window, slots, reps, 0, t, err, elen};
    j.nt = kind == BENCH_CEIL_NT_PAR || kind == BENCH_CEIL_NT_BIDIR;
    if (j.nt && !bench_ceil_have_nt())
        bench_fmt(err, elen, "no non-temporal copy built for this CPU");
    else if (kind == BENCH_CEIL_MEMCPY)
        v = host_memcpy(cl, size, window, slots, t, reps);
    else if (kind == BENCH_CEIL_MEMCPY_PAR || kind == BENCH_CEIL_NT_PAR)
        v = host_copy_par(cl, &j);
    else if (kind == BENCH_CEIL_MEMCPY_BIDIR || kind == BENCH_CEIL_NT_BIDIR)
        v = host_copy_bidir(cl, &j);
    else
        bench_fmt(err, elen, "no host ceiling of kind %s",
                  bench_ceil_name(kind));
    free(t);
    return isfinite(v) ? v : 0;
}
