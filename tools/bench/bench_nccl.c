/* NCCL send/recv as the benches' reference (bench_nccl.h): ipcpipe-bench
 * --compare's between two ranks, ipcpipe-bench-ranks' among N; the
 * reference most users would pick.  Nothing links against NCCL: libnccl is
 * opened with dlopen on first use (libnccl.so.2, else libnccl.so) and its
 * functions are fetched with dlsym; nccl.h, when the build finds it, only
 * gives the types.  Without CUDA or nccl.h at build time, or without the
 * library at run time, every function here says so and the nccl rows are
 * waived. */
#include "bench_nccl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NC_REASON_MAX 256

/* snprintf for messages, where cutting a long one short is fine. */
static void nc_fmt(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void nc_fmt(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    if (!len)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

#if defined(IPCP_HAVE_CUDA) && defined(__has_include)
#if __has_include(<nccl.h>)
#define BENCH_HAVE_NCCL 1
#endif
#endif

#ifdef BENCH_HAVE_NCCL

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

/* nccl.h declares ncclGroupStart() and a few others without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "ipcpipe_diag.h"
#include "tool_cuda.h"

_Static_assert(sizeof(ncclUniqueId) == BENCH_NCCL_ID_BYTES,
               "BENCH_NCCL_ID_BYTES must be NCCL_UNIQUE_ID_BYTES");
/* The bench's streams are driver streams; NCCL takes runtime streams. */
_Static_assert(__builtin_types_compatible_p(cudaStream_t, CUstream),
               "cudaStream_t and CUstream differ");

/* ncclInProgress (nonblocking communicators, 2.14) is not an error. */
#if NCCL_VERSION_CODE >= 21400
#define NC_IN_PROGRESS(r) ((r) == ncclInProgress)
#else
#define NC_IN_PROGRESS(r) 0
#endif

/* Send/recv appeared in NCCL 2.7; ncclCommGetAsyncError in 2.4. */
#define BENCH_NCCL_FUNCS(X)                                                    \
    X(ncclGetVersion)                                                          \
    X(ncclGetErrorString)                                                      \
    X(ncclGetUniqueId)                                                         \
    X(ncclCommInitRank)                                                        \
    X(ncclCommDestroy)                                                         \
    X(ncclCommAbort)                                                           \
    X(ncclCommGetAsyncError)                                                   \
    X(ncclSend)                                                                \
    X(ncclRecv)                                                                \
    X(ncclGroupStart)                                                          \
    X(ncclGroupEnd)

static struct {
#define BENCH_NCCL_FIELD_(name) __typeof__(&name) pfn_##name;
    BENCH_NCCL_FUNCS(BENCH_NCCL_FIELD_)
#undef BENCH_NCCL_FIELD_
    /* NCCL 2.13 and newer; used for messages when there (spelled out:
     * older headers lack it). */
    const char *(*pfn_ncclGetLastError)(ncclComm_t comm);
    const char *soname;
    int version;
} nc_lib;

#define NC(name) (nc_lib.pfn_##name)

static double nc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pthread_once_t nc_once = PTHREAD_ONCE_INIT;
static char nc_error[NC_REASON_MAX];

static void nc_load_once(void)
{
    static const char *const names[] = {"libnccl.so.2", "libnccl.so"};
    char why[2][120];
    void *lib = NULL;
    for (int k = 0; k < 2 && !lib; k++) {
        lib = dlopen(names[k], RTLD_NOW | RTLD_LOCAL);
        if (lib)
            nc_lib.soname = names[k];
        else
            nc_fmt(why[k], sizeof(why[k]), "%s", dlerror());
    }
    if (!lib) {
        nc_fmt(nc_error, sizeof(nc_error), "NCCL not found (dlopen: %s; %s)",
               why[0], why[1]);
        return;
    }
#define BENCH_NCCL_FETCH_(name)                                                \
    do {                                                                       \
        nc_lib.pfn_##name = (__typeof__(nc_lib.pfn_##name))dlsym(lib, #name);  \
        if (!nc_lib.pfn_##name) {                                              \
            nc_fmt(nc_error, sizeof(nc_error),                                 \
                   "%s lacks %s (send/recv need NCCL 2.7 or newer)",           \
                   nc_lib.soname, #name);                                      \
            return;                                                            \
        }                                                                      \
    } while (0);
    BENCH_NCCL_FUNCS(BENCH_NCCL_FETCH_)
#undef BENCH_NCCL_FETCH_
    nc_lib.pfn_ncclGetLastError =
        (__typeof__(nc_lib.pfn_ncclGetLastError))dlsym(lib, "ncclGetLastError");
    ncclResult_t r = NC(ncclGetVersion)(&nc_lib.version);
    if (r != ncclSuccess)
        nc_fmt(nc_error, sizeof(nc_error), "ncclGetVersion: %s",
               NC(ncclGetErrorString)(r));
}

int bench_nccl_load(char *err, size_t elen)
{
    pthread_once(&nc_once, nc_load_once);
    if (nc_error[0]) {
        nc_fmt(err, elen, "%s", nc_error);
        return -1;
    }
    return 0;
}

void bench_nccl_describe(char *buf, size_t len)
{
    char err[NC_REASON_MAX];
    if (bench_nccl_load(err, sizeof(err)) < 0) {
        nc_fmt(buf, len, "nccl rows waived: %s", err);
        return;
    }
    int v = nc_lib.version;
    if (v >= 10000) /* 2.9 and newer: X * 10000 + Y * 100 + Z */
        nc_fmt(buf, len, "%s, NCCL %d.%d.%d", nc_lib.soname, v / 10000,
               v % 10000 / 100, v % 100);
    else
        nc_fmt(buf, len, "%s, NCCL %d.%d.%d", nc_lib.soname, v / 1000,
               v % 1000 / 100, v % 100);
}

/* "<what>: <NCCL's string> (ncclResult_t N): <NCCL's last error>". */
static void nc_msg(char *err, size_t elen, const char *what, ncclResult_t r,
                   ncclComm_t comm)
{
    const char *last = NC(ncclGetLastError) ? NC(ncclGetLastError)(comm) : NULL;
    nc_fmt(err, elen, "%s: %s (ncclResult_t %d)%s%s", what,
           NC(ncclGetErrorString)(r), (int)r, last && *last ? ": " : "",
           last && *last ? last : "");
}

static void cu_msg(char *err, size_t elen, const char *what, CUresult r)
{
    char m[160];
    nc_fmt(err, elen, "%s: %s", what, tool_cu_strerror(r, m, sizeof(m)));
}

int bench_nccl_unique_id(unsigned char id[BENCH_NCCL_ID_BYTES], char *err,
                         size_t elen)
{
    ncclUniqueId uid;
    if (bench_nccl_load(err, elen) < 0)
        return -1;
    ncclResult_t r = NC(ncclGetUniqueId)(&uid);
    if (r != ncclSuccess) {
        nc_msg(err, elen, "ncclGetUniqueId", r, NULL);
        return -1;
    }
    memcpy(id, &uid, sizeof(uid));
    return 0;
}

struct bench_nccl {
    ncclComm_t comm; /* NULL once aborted */
    CUstream stream;
    int yield; /* waits leave the CPU between polls */
};

/* ncclCommInitRank blocks until every rank has joined; a rank whose own
 * set-up failed never does.  So it runs on a thread of its own, waited
 * for with a deadline; a thread given up on aborts what it made, if it
 * ever returns, and frees the job. */
typedef struct nc_init {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, abandoned;
    ncclUniqueId id;
    int rank, nranks;
    CUcontext ctx; /* NCCL's runtime takes the device from it */
    ncclComm_t comm;
    ncclResult_t r;
} nc_init_t;

static void nc_init_free(nc_init_t *j)
{
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void *nc_init_thread(void *arg)
{
    nc_init_t *j = arg;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclUnhandledCudaError;
    if (TOOL_CU(cuCtxSetCurrent)(j->ctx) == CUDA_SUCCESS)
        r = NC(ncclCommInitRank)(&comm, j->nranks, j->id, j->rank);
    pthread_mutex_lock(&j->mu);
    int abandoned = j->abandoned;
    j->comm = comm;
    j->r = r;
    j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned) {
        if (r == ncclSuccess)
            NC(ncclCommAbort)(comm);
        nc_init_free(j);
    }
    return NULL;
}

/* 0 with *comm, or -1 with a message. */
static int nc_init_comm(const ncclUniqueId *id, int rank, int nranks,
                        double timeout_s, ncclComm_t *comm, char *err,
                        size_t elen)
{
    nc_init_t *j = calloc(1, sizeof(*j));
    pthread_condattr_t ca;
    pthread_t th;
    if (!j) {
        nc_fmt(err, elen, "out of memory");
        return -1;
    }
    j->id = *id;
    j->rank = rank;
    j->nranks = nranks;
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    CUresult cr = TOOL_CU(cuCtxGetCurrent)(&j->ctx);
    if (cr != CUDA_SUCCESS) {
        cu_msg(err, elen, "cuCtxGetCurrent", cr);
        nc_init_free(j);
        return -1;
    }
    if (pthread_create(&th, NULL, nc_init_thread, j) != 0) {
        nc_fmt(err, elen, "cannot start a thread for ncclCommInitRank");
        nc_init_free(j);
        return -1;
    }
    pthread_detach(th);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)timeout_s;
    pthread_mutex_lock(&j->mu);
    while (!j->done &&
           pthread_cond_timedwait(&j->cv, &j->mu, &until) != ETIMEDOUT)
        ;
    if (!j->done) {
        j->abandoned = 1; /* the thread frees it */
        pthread_mutex_unlock(&j->mu);
        nc_fmt(err, elen,
               "ncclCommInitRank(%d ranks, rank %d) not done after %.0f s "
               "(did another rank fail?); given up",
               nranks, rank, timeout_s);
        return -1;
    }
    pthread_mutex_unlock(&j->mu);
    ncclResult_t r = j->r;
    *comm = j->comm;
    nc_init_free(j);
    if (r != ncclSuccess) {
        char what[64];
        nc_fmt(what, sizeof(what), "ncclCommInitRank(%d ranks, rank %d)",
               nranks, rank);
        nc_msg(err, elen, what, r, NULL);
        return -1;
    }
    return 0;
}

bench_nccl_t *bench_nccl_init(const unsigned char id[BENCH_NCCL_ID_BYTES],
                              int rank, int nranks, int yield, double timeout_s,
                              char *err, size_t elen)
{
    ncclUniqueId uid;
    if (bench_nccl_load(err, elen) < 0)
        return NULL;
    bench_nccl_t *nc = calloc(1, sizeof(*nc));
    if (!nc) {
        nc_fmt(err, elen, "out of memory");
        return NULL;
    }
    /* On the bound device's context, which NCCL's runtime picks up as the
     * current device. */
    CUresult cr = TOOL_CU(cuStreamCreate)(&nc->stream, CU_STREAM_NON_BLOCKING);
    if (cr != CUDA_SUCCESS) {
        cu_msg(err, elen, "cuStreamCreate(NCCL stream)", cr);
        free(nc);
        return NULL;
    }
    nc->yield = yield;
    /* NVLink multicast (NVLS) stays off on the machines this bench runs
     * on; a value the user set wins. */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    memcpy(&uid, id, sizeof(uid));
    if (nc_init_comm(&uid, rank, nranks, timeout_s, &nc->comm, err, elen) < 0) {
        TOOL_CU(cuStreamDestroy)(nc->stream);
        free(nc);
        return NULL;
    }
    return nc;
}

/* After a failure the communicator cannot be trusted (a peer may wait on
 * a transfer that never comes): abort it, which also ends its kernels. */
static void nc_abort(bench_nccl_t *nc)
{
    if (!nc->comm)
        return;
    ncclResult_t r = NC(ncclCommAbort)(nc->comm);
    if (r != ncclSuccess)
        fprintf(stderr, "NCCL reference: ncclCommAbort: %s\n",
                NC(ncclGetErrorString)(r));
    nc->comm = NULL;
}

/* Send or receive k of n of a window; a failure is described in err. */
static ncclResult_t nc_post_one(bench_nccl_t *nc, int send, char *p, size_t len,
                                int peer, int k, int n, char *err, size_t elen)
{
    ncclResult_t r =
        send ? NC(ncclSend)(p, len, ncclUint8, peer, nc->comm, nc->stream)
             : NC(ncclRecv)(p, len, ncclUint8, peer, nc->comm, nc->stream);
    if (r != ncclSuccess && !NC_IN_PROGRESS(r)) {
        char what[96];
        nc_fmt(what, sizeof(what), "%s(%zu bytes, %s rank %d, %d of %d)",
               send ? "ncclSend" : "ncclRecv", len, send ? "to" : "from", peer,
               k + 1, n);
        nc_msg(err, elen, what, r, nc->comm);
        return r;
    }
    return ncclSuccess;
}

int bench_nccl_post(bench_nccl_t *nc, int send, void *buf, size_t len, int n,
                    int slots, int grouped, int peer, char *err, size_t elen)
{
    if (!nc->comm) {
        nc_fmt(err, elen, "the NCCL communicator was aborted");
        return -1;
    }
    /* Grouped: the window in one group, as NCCL's documentation has
     * several point-to-point calls issued: one launch for all of them.
     * Ungrouped (the nccl-ungrouped row): each call its own kernel after
     * the previous one on the stream, as the bench posted them before. */
    ncclResult_t r = grouped ? NC(ncclGroupStart)() : ncclSuccess;
    if (r != ncclSuccess) {
        nc_msg(err, elen, "ncclGroupStart", r, nc->comm);
        nc_abort(nc);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        char *p = (char *)buf + (send ? 0 : (size_t)(k % slots) * len);
        if (nc_post_one(nc, send, p, len, peer, k, n, err, elen) !=
            ncclSuccess) {
            if (grouped)
                NC(ncclGroupEnd)();
            nc_abort(nc);
            return -1;
        }
    }
    r = grouped ? NC(ncclGroupEnd)() : ncclSuccess;
    if (r != ncclSuccess && !NC_IN_PROGRESS(r)) {
        char what[96];
        nc_fmt(what, sizeof(what), "ncclGroupEnd(%d %s of %zu bytes)", n,
               send ? "sends" : "receives", len);
        nc_msg(err, elen, what, r, nc->comm);
        nc_abort(nc);
        return -1;
    }
    return 0;
}

int bench_nccl_post_group(bench_nccl_t *nc, const bench_nccl_op_t *ops, int n,
                          char *err, size_t elen)
{
    if (!nc->comm) {
        nc_fmt(err, elen, "the NCCL communicator was aborted");
        return -1;
    }
    ncclResult_t r = NC(ncclGroupStart)();
    if (r != ncclSuccess) {
        nc_msg(err, elen, "ncclGroupStart", r, nc->comm);
        nc_abort(nc);
        return -1;
    }
    for (int k = 0; k < n; k++)
        if (nc_post_one(nc, ops[k].send, ops[k].buf, ops[k].len, ops[k].peer, k,
                        n, err, elen) != ncclSuccess) {
            NC(ncclGroupEnd)();
            nc_abort(nc);
            return -1;
        }
    r = NC(ncclGroupEnd)();
    if (r != ncclSuccess && !NC_IN_PROGRESS(r)) {
        char what[96];
        nc_fmt(what, sizeof(what), "ncclGroupEnd(%d sends and receives)", n);
        nc_msg(err, elen, what, r, nc->comm);
        nc_abort(nc);
        return -1;
    }
    return 0;
}

int bench_nccl_wait(bench_nccl_t *nc, double timeout_s, char *err, size_t elen)
{
    double deadline = nc_now() + timeout_s;
    for (unsigned long k = 0;; k++) {
        CUresult r = TOOL_CU(cuStreamQuery)(nc->stream);
        if (r == CUDA_SUCCESS)
            return 0;
        if (r != CUDA_ERROR_NOT_READY) {
            cu_msg(err, elen, "cuStreamQuery(NCCL stream)", r);
            nc_abort(nc);
            return -1;
        }
        /* Polled, not synchronized: the time is taken when the stream is
         * done, as the other cases take theirs; the async error and the
         * clock only now and then. */
        if ((k & 255) != 255)
            continue;
        ncclResult_t ae = ncclSuccess;
        ncclResult_t q =
            nc->comm ? NC(ncclCommGetAsyncError)(nc->comm, &ae) : ncclSuccess;
        if (q != ncclSuccess || (ae != ncclSuccess && !NC_IN_PROGRESS(ae))) {
            nc_msg(err, elen, "NCCL asynchronous error",
                   q != ncclSuccess ? q : ae, nc->comm);
            nc_abort(nc);
            return -1;
        }
        if (nc_now() > deadline) {
            nc_fmt(err, elen,
                   "NCCL transfers not done after %.0f s (the peer "
                   "failed or is stuck); communicator aborted",
                   timeout_s);
            nc_abort(nc);
            return -1;
        }
        /* A long wait, or a rank that polls (on one CPU NCCL's proxy
         * thread shares it, as ipcpipe's threads do): leave the core to
         * others. */
        if (k > (1ul << 20) || nc->yield)
            sched_yield();
    }
}

int bench_nccl_usable(const bench_nccl_t *nc)
{
    return nc && nc->comm;
}

void bench_nccl_destroy(bench_nccl_t *nc)
{
    if (!nc)
        return;
    if (nc->comm) {
        ncclResult_t r = NC(ncclCommDestroy)(nc->comm);
        if (r != ncclSuccess)
            fprintf(stderr, "NCCL reference: ncclCommDestroy: %s\n",
                    NC(ncclGetErrorString)(r));
    }
    CUresult cr = TOOL_CU(cuStreamDestroy)(nc->stream);
    if (cr != CUDA_SUCCESS) {
        char err[NC_REASON_MAX];
        cu_msg(err, sizeof(err), "cuStreamDestroy(NCCL stream)", cr);
        fprintf(stderr, "NCCL reference: %s\n", err);
    }
    free(nc);
}

#else /* !BENCH_HAVE_NCCL */

#ifdef IPCP_HAVE_CUDA
static const char no_nccl[] = "built without NCCL's header (nccl.h not found)";
#else
static const char no_nccl[] = "built without CUDA (IPCPIPE_HAVE_CUDA off)";
#endif

int bench_nccl_load(char *err, size_t elen)
{
    nc_fmt(err, elen, "%s", no_nccl);
    return -1;
}

void bench_nccl_describe(char *buf, size_t len)
{
    nc_fmt(buf, len, "nccl rows waived: %s", no_nccl);
}

int bench_nccl_unique_id(unsigned char id[BENCH_NCCL_ID_BYTES], char *err,
                         size_t elen)
{
    nc_fmt(err, elen, "%s", no_nccl);
    return -1;
}

bench_nccl_t *bench_nccl_init(const unsigned char id[BENCH_NCCL_ID_BYTES],
                              int rank, int nranks, int yield, double timeout_s,
                              char *err, size_t elen)
{
    nc_fmt(err, elen, "%s", no_nccl);
    return NULL;
}

int bench_nccl_post(bench_nccl_t *nc, int send, void *buf, size_t len, int n,
                    int slots, int grouped, int peer, char *err, size_t elen)
{
    nc_fmt(err, elen, "%s", no_nccl);
    return -1;
}

int bench_nccl_post_group(bench_nccl_t *nc, const bench_nccl_op_t *ops, int n,
                          char *err, size_t elen)
{
    nc_fmt(err, elen, "%s", no_nccl);
    return -1;
}

int bench_nccl_wait(bench_nccl_t *nc, double timeout_s, char *err, size_t elen)
{
    nc_fmt(err, elen, "%s", no_nccl);
    return -1;
}

int bench_nccl_usable(const bench_nccl_t *nc)
{
    return 0;
}

void bench_nccl_destroy(bench_nccl_t *nc)
{
}

#endif
