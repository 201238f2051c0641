/* ipcpipe-bench: the transfers.  Rank 0 receives and times, rank 1 sends
 * (and receives too in the bidir case), the other ranks take part in the
 * barriers only.  Every rank follows the same schedule of barriers; the one
 * decision that changes it (whether a case runs after its warm-up) is sent
 * by rank 0 to every rank.
 *
 * A repetition posts a window of W transfers back to back; the k-th lands
 * in slot k % slots of the receiving buffer, so that the last transfer's
 * bytes can be told from the others' and checked alone. */
#include "bench.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bench_ctx.h"
#include "ipcpipe_cuda.h"
#include "pattern.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
/* Left free for the library's rings, the page tables and everyone else. */
#define MEM_SLACK (256 * MIB)

double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return mix64((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
           mix64((uint64_t)getpid());
}

/* Seed of checked transfer k of case i (0/1: first/last from rank 1, 2:
 * ping, 3/4: first/last from rank 0 in bidir): every checked transfer gets
 * its own data, so bytes left over from an earlier one cannot pass for new
 * ones. */
uint64_t bench_case_seed(const bench_ctx_t *ctx, int i, int k)
{
    return mix64(ctx->seed ^ ((uint64_t)(i * 8 + k) * 0x9e3779b97f4a7c15ULL));
}

int bench_case_tag(int i, int kind)
{
    return TAG_CASE0 + 8 * i + kind;
}

double bench_median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    for (int i = 1; i < n; i++) { /* insertion sort: n <= a few thousand */
        double x = v[i];
        int j = i - 1;
        for (; j >= 0 && v[j] > x; j--)
            v[j + 1] = v[j];
        v[j + 1] = x;
    }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Distinct slots of a window: all W when they fit in the window's bytes
 * (always with the default W), else as many as fit, reused in turn. */
int bench_case_slots(const bench_opts_t *o, size_t size)
{
    int w = bench_window(o, size);
    size_t fit = BENCH_WINDOW_BYTES / size;
    fit = fit < 1 ? 1 : fit;
    return (size_t)w < fit ? w : (int)fit;
}

/* Bytes of the slots of the largest window among the sizes up to cap. */
static size_t window_len(const bench_opts_t *o, const bench_case_t *cs, int n,
                         size_t cap)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        size_t s = cs[i].size;
        size_t l = s * (size_t)bench_case_slots(o, s);
        if (s <= cap && l > len)
            len = l;
    }
    return len;
}

/* ---- memory ----------------------------------------------------------- */

static uint64_t read_u64_file(const char *path)
{
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    if (!f)
        return UINT64_MAX;
    int ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    return ok ? v : UINT64_MAX; /* "max" reads as no limit */
}

/* Bytes this job may still take: MemAvailable, the cgroup's limit, and
 * /dev/shm's free space (shared memory may live there; a full tmpfs turns a
 * page fault into SIGBUS rather than an error). */
uint64_t bench_mem_available(void)
{
    uint64_t avail = UINT64_MAX;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long long kb;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            avail = kb * 1024;
    }
    if (f)
        fclose(f);
    uint64_t max = read_u64_file("/sys/fs/cgroup/memory.max");
    uint64_t cur = read_u64_file("/sys/fs/cgroup/memory.current");
    if (max != UINT64_MAX && cur != UINT64_MAX && max > cur &&
        max - cur < avail)
        avail = max - cur;
    struct statvfs sv;
    if (statvfs("/dev/shm", &sv) == 0 && sv.f_blocks > 0) {
        uint64_t shm = (uint64_t)sv.f_bavail * sv.f_frsize;
        avail = shm < avail ? shm : avail;
    }
    return avail;
}

/* Host bytes both ranks take for buffers of size s.  Host memory: each
 * rank's source and slots (rank 1's slots only for bidir, else its
 * ping-pong buffer), and a second pair for the bidir memcpy ceiling.  GPU
 * memory: a staging buffer per rank and rank 0's pinned buffer (device
 * memory is found out by allocating it). */
static uint64_t host_need(const bench_ctx_t *ctx, size_t s)
{
    const bench_opts_t *o = ctx->o;
    uint64_t wl = window_len(o, ctx->cs, ctx->ncases, s);
    uint64_t lat = o->lat_max < s ? o->lat_max : s;
    if (ctx->mem == BENCH_MEM_CUDA) /* --compare's naive case: pinned slots */
        return 3 * (uint64_t)s + (ctx->any_naive ? wl : 0);
    uint64_t need = 2 * (uint64_t)s + wl + (ctx->any_bidir ? wl : lat);
    return need + (ctx->any_bidir ? s + wl : 0);
}

/* Largest size of the run below `below` whose buffers fit with room to
 * spare; 0 if none does.  Only the sizes that will run are candidates, so
 * that no memory is taken for sizes nobody asked for. */
static size_t mem_cap(bench_ctx_t *ctx, size_t below)
{
    uint64_t avail = bench_mem_available();
    uint64_t usable = avail / 10 * 8;
    usable = usable > MEM_SLACK ? usable - MEM_SLACK : 0;
    size_t cap = 0;
    for (int i = 0; i < ctx->ncases; i++) {
        size_t s = ctx->cs[i].size;
        int fits = avail == UINT64_MAX || host_need(ctx, s) <= usable;
        if (s < below && s > cap && fits)
            cap = s;
    }
    ctx->usable = usable;
    return cap;
}

static void free_buffers(bench_ctx_t *ctx)
{
    bench_ceil_destroy(ctx->comm, ctx->ceil);
    ctx->ceil = NULL;
    bench_buf_free(ctx->comm, &ctx->src);
    bench_buf_free(ctx->comm, &ctx->dst);
    free(ctx->staging);
    ctx->staging = NULL;
}

static int pick_device(const bench_ctx_t *ctx, int *dev, char *err, size_t elen)
{
    const bench_opts_t *o = ctx->o;
    int ndev = bench_cuda_ndev(), d = 0;
    if (o->devmode == BENCH_DEV_SPLIT)
        d = ndev >= 2 ? ctx->rank % ndev : 0;
    else if (o->devmode == BENCH_DEV_LIST)
        d = o->devlist[ctx->rank % o->ndevlist];
    if (d >= ndev) {
        bench_fmt(err, elen,
                  "CUDA device %d (--devices) is not visible to rank %d "
                  "(%d visible)",
                  d, ctx->rank, ndev);
        return -1;
    }
    *dev = d;
    return 0;
}

/* Binds this rank to its device (once). */
static int bind_device(bench_ctx_t *ctx, char *err, size_t elen)
{
    char why[BENCH_REASON_MAX];
    if (ctx->device >= 0)
        return 0;
    if (!bench_cuda_usable(why, sizeof(why))) {
        bench_fmt(err, elen, "no CUDA in rank %d: %s", ctx->rank, why);
        return -1;
    }
    int d;
    if (pick_device(ctx, &d, err, elen) < 0 ||
        bench_cuda_bind(d, err, elen) < 0)
        return -1;
    ctx->device = d;
    return 0;
}

/* Allocates this rank's buffers for sizes up to cap; device buffers get
 * written once (source zeroed, slots poisoned) so no timed transfer pays
 * for first use.  Returns 0 or -1 (*nomem: for lack of memory). */
static int alloc_buffers(bench_ctx_t *ctx, int *nomem, char *err, size_t elen)
{
    *nomem = 0;
    if (ctx->rank > SEND || ctx->cap == 0)
        return 0;
    int cuda = ctx->mem == BENCH_MEM_CUDA;
    if (cuda && bind_device(ctx, err, elen) < 0)
        return -1;
    size_t lat = ctx->o->lat_max < ctx->cap ? ctx->o->lat_max : ctx->cap;
    size_t dlen = ctx->rank == RECV || ctx->any_bidir ? ctx->dst_len : lat;
    int dev = cuda ? ctx->device : -1,
        plain = ctx->o->alloc == BENCH_ALLOC_PLAIN;
    if (bench_buf_alloc(ctx->comm, ctx->cap, dev, plain, &ctx->src, nomem, err,
                        elen) < 0 ||
        bench_buf_alloc(ctx->comm, dlen ? dlen : 1, dev, plain, &ctx->dst,
                        nomem, err, elen) < 0)
        goto fail;
    if (cuda) {
        ctx->staging = malloc(ctx->cap);
        if (!ctx->staging) {
            *nomem = 1;
            bench_fmt(err, elen, "cannot allocate %zu bytes of staging memory",
                      ctx->cap);
            goto fail;
        }
        memset(ctx->staging, 0, ctx->cap);
        if (bench_cuda_memset(ctx->src.ptr, 0, ctx->src.len, err, elen) < 0)
            goto fail;
    }
    if (bench_buf_poison(&ctx->dst, 0, ctx->dst.len, err, elen) < 0)
        goto fail;
    return 0;
fail:
    free_buffers(ctx);
    return -1;
}

/* Rank 0's ceilings; a is the sender's device as rank 0 numbers it. */
static int alloc_ceilings(bench_ctx_t *ctx, const alloc_msg_t *peer, int *nomem,
                          char *err, size_t elen)
{
    bench_setup_info_t *in = &ctx->info;
    *nomem = 0;
    if (ctx->cap == 0)
        return 0;
    if (ctx->mem == BENCH_MEM_HOST) {
        size_t scratch = ctx->any_bidir ? ctx->cap + ctx->dst_len : 0;
        ctx->ceil = bench_ceil_create_host(&ctx->src, &ctx->dst, scratch, nomem,
                                           err, elen);
        return ctx->ceil ? 0 : -1;
    }
    int b = ctx->device, a = bench_cuda_find_bus(peer->bus);
    ctx->ceil_note[0] = '\0';
    if (a < 0) {
        bench_fmt(ctx->ceil_note, sizeof(ctx->ceil_note),
                  "the sender's device (%s) is not visible to the receiver: "
                  "its ceilings use device %d alone",
                  peer->bus, b);
        a = b;
    } else if (a == b) {
        bench_fmt(ctx->ceil_note, sizeof(ctx->ceil_note),
                  "both ranks on one device: d2d is a copy within device %d",
                  b);
    } else if (!bench_cuda_peer(a, b)) {
        bench_fmt(ctx->ceil_note, sizeof(ctx->ceil_note),
                  "devices %d and %d cannot access each other: d2d goes "
                  "through the host",
                  a, b);
    }
    in->ceil_dev[0] = a;
    in->ceil_dev[1] = b;
    ctx->ceil = bench_ceil_create_cuda(
        ctx->comm, a, b, ctx->o->alloc == BENCH_ALLOC_PLAIN, ctx->dst_len,
        ctx->cap, nomem, err, elen);
    return ctx->ceil ? 0 : -1;
}

static void fill_info(bench_ctx_t *ctx, const alloc_msg_t *peer)
{
    bench_setup_info_t *in = &ctx->info;
    in->mem = ctx->mem;
    in->alloc = ctx->o->alloc;
    in->mem_note = ctx->mem_note;
    in->ceil_note = ctx->ceil_note;
    in->dev[0] = ctx->device;
    in->dev[1] = peer ? peer->device : -1;
    if (ctx->device >= 0)
        bench_cuda_bus_id(ctx->device, in->bus[0], sizeof(in->bus[0]),
                          in->dev_name[0], sizeof(in->dev_name[0]));
    if (peer) {
        bench_fmt(in->bus[1], sizeof(in->bus[1]), "%s", peer->bus);
        bench_fmt(in->dev_name[1], sizeof(in->dev_name[1]), "%s", peer->name);
    }
}

static void setup_fail(const bench_ctx_t *ctx, const char *what,
                       ipcp_status_t st)
{
    fprintf(stderr, "ipcpipe-bench [rank %d]: set-up (%s): %s: %s\n", ctx->rank,
            what, ipcp_strerror(st), ipcp_last_error());
}

/* Rank 0 proposes (seed, cap, memory); others learn it. */
static int setup_propose(bench_ctx_t *ctx)
{
    setup_msg_t m = {ctx->seed, ctx->cap, ctx->dst_len, (int32_t)ctx->mem, 0};
    ipcp_status_t st = IPCP_OK;
    if (ctx->rank == RECV) {
        for (int r = 1; r < ctx->size && st == IPCP_OK; r++)
            st = ipcp_send(ctx->comm, &m, sizeof(m), r, TAG_SETUP);
    } else {
        st = ipcp_recv(ctx->comm, &m, sizeof(m), RECV, TAG_SETUP, NULL);
        ctx->seed = m.seed;
        ctx->cap = (size_t)m.cap;
        ctx->dst_len = (size_t)m.dst_len;
        ctx->mem = (bench_mem_t)m.mem;
    }
    if (st != IPCP_OK)
        setup_fail(ctx, "proposal", st);
    return st == IPCP_OK ? 0 : -1;
}

/* One round of agreeing on a cap: rank 0 proposes, ranks 0 and 1 try to
 * allocate, rank 0 tells everyone whether both succeeded and whether to
 * give up (a failure that a smaller size would not cure). */
static int setup_round(bench_ctx_t *ctx, agree_msg_t *ag)
{
    alloc_msg_t mine = {0}, theirs = {0};
    int nomem = 0;
    ipcp_status_t st;
    if (setup_propose(ctx) < 0)
        return -1;
    mine.ok = alloc_buffers(ctx, &nomem, mine.reason, sizeof(mine.reason)) == 0;
    mine.nomem = nomem;
    mine.device = ctx->device;
    if (ctx->device >= 0)
        bench_cuda_bus_id(ctx->device, mine.bus, sizeof(mine.bus), mine.name,
                          sizeof(mine.name));
    if (ctx->rank == SEND) {
        st = ipcp_send(ctx->comm, &mine, sizeof(mine), RECV, TAG_ALLOC);
        if (st == IPCP_OK)
            st =
                ipcp_recv(ctx->comm, ag, sizeof(*ag), RECV, TAG_ALLOC_OK, NULL);
    } else if (ctx->rank > SEND) {
        st = ipcp_recv(ctx->comm, ag, sizeof(*ag), RECV, TAG_ALLOC_OK, NULL);
    } else {
        st = ipcp_recv(ctx->comm, &theirs, sizeof(theirs), SEND, TAG_ALLOC,
                       NULL);
        if (st != IPCP_OK) {
            setup_fail(ctx, "allocation answer", st);
            return -1;
        }
        fill_info(ctx, &theirs);
        const char *who = "rank 0", *why = mine.reason;
        int ok = mine.ok && theirs.ok, short_mem = !mine.ok ? nomem : 0;
        if (!theirs.ok && mine.ok) {
            who = "rank 1";
            why = theirs.reason;
            short_mem = theirs.nomem;
        }
        if (ok && alloc_ceilings(ctx, &theirs, &nomem, mine.reason,
                                 sizeof(mine.reason)) < 0) {
            ok = 0;
            short_mem = nomem;
        }
        if (!ok && !short_mem)
            bench_fmt(ctx->waive, sizeof(ctx->waive), "%s: %s", who, why);
        else if (!ok)
            fprintf(stderr,
                    "ipcpipe-bench: buffers for sizes up to %zu "
                    "bytes: %s: %s\n",
                    ctx->cap, who, why);
        *ag = (agree_msg_t){ok, !ok && !short_mem};
        for (int r = 1; r < ctx->size && st == IPCP_OK; r++)
            st = ipcp_send(ctx->comm, ag, sizeof(*ag), r, TAG_ALLOC_OK);
    }
    if (st != IPCP_OK) {
        setup_fail(ctx, "agreement", st);
        return -1;
    }
    return 0;
}

/* Rank 0: host or CUDA memory, and why. */
static void resolve_mem(bench_ctx_t *ctx)
{
    char why[BENCH_REASON_MAX];
    bench_mem_t want = ctx->o->mem;
    if (want == BENCH_MEM_HOST) {
        ctx->mem = BENCH_MEM_HOST;
    } else if (bench_cuda_usable(why, sizeof(why))) {
        ctx->mem = BENCH_MEM_CUDA;
    } else if (want == BENCH_MEM_CUDA) {
        ctx->mem = BENCH_MEM_CUDA;
        bench_fmt(ctx->waive, sizeof(ctx->waive), "--mem cuda: %s", why);
    } else {
        ctx->mem = BENCH_MEM_HOST;
        bench_fmt(ctx->mem_note, sizeof(ctx->mem_note),
                  "auto chose host memory: %s", why);
    }
}

static int agree_buffers(bench_ctx_t *ctx)
{
    for (;;) {
        agree_msg_t ag;
        if (setup_round(ctx, &ag) < 0)
            return -1;
        if (ag.all || ctx->cap == 0)
            return 0;
        free_buffers(ctx);
        if (ag.stop) {
            ctx->cap = 0; /* every case waived (rank 0 has the reason) */
            return 0;
        }
        /* The estimate was too hopeful (limits, other jobs, GPU memory):
         * try the next smaller size (rank 0 decides; the others hear it
         * next round). */
        if (ctx->rank == RECV) {
            ctx->failed_cap = ctx->cap;
            ctx->cap = mem_cap(ctx, ctx->cap);
            ctx->dst_len = window_len(ctx->o, ctx->cs, ctx->ncases, ctx->cap);
        }
    }
}

/* --load: the rank whose GPU is loaded (the sender's for d2h, the
 * receiver's for h2d) starts the worker where it has GPU buffers, then
 * tells the others whether it runs, so that no rank times anything before
 * it does and all of them give up when it could not start. */
static int start_load(bench_ctx_t *ctx)
{
    int lr = ctx->o->load == BENCH_LOAD_D2H ? SEND : RECV;
    const char *name = bench_load_name(ctx->o->load);
    int32_t msg[2] = {0, -1}; /* state (-1: failed), device */
    ctx->load.pid = 0;
    ctx->load.fd = -1;
    if (ctx->rank == lr) {
        char err[BENCH_REASON_MAX];
        if (ctx->mem != BENCH_MEM_CUDA || ctx->device < 0) {
            fprintf(stderr,
                    "ipcpipe-bench: --load %s not started: rank %d has no "
                    "GPU buffers%s%s\n",
                    name, lr, ctx->waive[0] ? ": " : "", ctx->waive);
        } else if (bench_load_start(&ctx->load, ctx->o->load, ctx->device, err,
                                    sizeof(err)) < 0) {
            fprintf(stderr, "ipcpipe-bench: --load %s on device %d: %s\n", name,
                    ctx->device, err);
            msg[0] = -1;
        } else {
            msg[0] = 1;
        }
        msg[1] = ctx->device;
        for (int r = 0; r < ctx->size; r++) {
            if (r == lr)
                continue;
            ipcp_status_t st =
                ipcp_send(ctx->comm, msg, sizeof(msg), r, TAG_LOAD);
            if (st != IPCP_OK) {
                fprintf(stderr, "ipcpipe-bench: --load: to rank %d: %s: %s\n",
                        r, ipcp_strerror(st), ipcp_last_error());
                msg[0] = -1;
            }
        }
    } else {
        ipcp_status_t st =
            ipcp_recv(ctx->comm, msg, sizeof(msg), lr, TAG_LOAD, NULL);
        if (st != IPCP_OK) {
            fprintf(stderr, "ipcpipe-bench: --load: from rank %d: %s: %s\n", lr,
                    ipcp_strerror(st), ipcp_last_error());
            msg[0] = -1;
        }
    }
    ctx->load_state = msg[0];
    ctx->load_device = msg[1];
    return msg[0] < 0 ? -1 : 0;
}

bench_ctx_t *bench_ctx_create(ipcp_comm_t *comm, const bench_opts_t *o,
                              const bench_case_t *cs, int n)
{
    bench_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return NULL;
    ctx->reqs = calloc(2 * BENCH_MAX_WINDOW, sizeof(*ctx->reqs));
    if (!ctx->reqs) {
        free(ctx);
        return NULL;
    }
    ctx->comm = comm;
    ctx->o = o;
    ctx->cs = cs;
    ctx->ncases = n;
    ctx->rank = ipcp_comm_rank(comm);
    ctx->size = ipcp_comm_size(comm);
    ctx->device = -1;
    ctx->info.ceil_dev[0] = ctx->info.ceil_dev[1] = -1;
    for (int i = 0; i < n; i++) {
        ctx->any_bidir |= cs[i].path->bidir;
        ctx->any_naive |= cs[i].path->kind == BENCH_KIND_NAIVE;
    }
    if (ctx->rank == RECV) {
        ctx->seed = fresh_seed();
        resolve_mem(ctx);
        char err[BENCH_REASON_MAX];
        if (!ctx->waive[0] && ctx->mem == BENCH_MEM_CUDA &&
            bind_device(ctx, err, sizeof(err)) < 0)
            bench_fmt(ctx->waive, sizeof(ctx->waive), "rank 0: %s", err);
        ctx->cap = ctx->waive[0] ? 0 : mem_cap(ctx, SIZE_MAX);
        ctx->dst_len = window_len(o, cs, n, ctx->cap);
    }
    if (agree_buffers(ctx) < 0) {
        bench_ctx_destroy(ctx);
        return NULL;
    }
    if (ctx->rank == RECV) {
        if (ctx->info.mem == 0) /* no answer was read (cap 0) */
            fill_info(ctx, NULL);
        ctx->info.waive_all = ctx->waive[0] ? ctx->waive : NULL;
    }
    if (o->load != BENCH_LOAD_NONE && start_load(ctx) < 0) {
        bench_ctx_destroy(ctx);
        return NULL;
    }
    return ctx;
}

void bench_ctx_destroy(bench_ctx_t *ctx)
{
    if (!ctx)
        return;
    bench_load_stop(&ctx->load);
    bench_cmp_destroy(ctx);
    free_buffers(ctx);
    bench_cuda_unbind();
    free(ctx->reqs);
    free(ctx);
}

size_t bench_ctx_cap(const bench_ctx_t *ctx)
{
    return ctx->cap;
}

uint64_t bench_ctx_seed(const bench_ctx_t *ctx)
{
    return ctx->seed;
}

bench_mem_t bench_ctx_mem(const bench_ctx_t *ctx)
{
    return ctx->mem;
}

const bench_setup_info_t *bench_ctx_info(const bench_ctx_t *ctx)
{
    return &ctx->info;
}

int bench_ctx_load(const bench_ctx_t *ctx, int *device)
{
    *device = ctx->load_device;
    return ctx->load_state > 0;
}

/* ---- ceilings ---------------------------------------------------------- */

static void ceil_needs(const bench_ctx_t *ctx, const bench_case_t *c, int *need)
{
    if (c->path->kind != BENCH_KIND_IPCP) {
        /* References: what their rows report and are compared with. */
        if (ctx->mem == BENCH_MEM_HOST) {
            if (c->path->kind == BENCH_KIND_MPI)
                need[c->path->ceil] = 1;
            return;
        }
        need[c->path->ceil] = 1;
        if (c->path->kind == BENCH_KIND_LOCAL)
            need[c->path->local] = 1;
        return;
    }
    if (ctx->mem == BENCH_MEM_HOST) {
        if (c->path->bidir)
            need[BENCH_CEIL_MEMCPY_BIDIR] = 1;
        else
            need[BENCH_CEIL_MEMCPY] = need[BENCH_CEIL_MEMCPY_PAR] = 1;
        return;
    }
    if (c->path->bidir) {
        need[BENCH_CEIL_D2D_BIDIR] = need[BENCH_CEIL_STAGED] = 1;
        return;
    }
    if (c->path->path != IPCP_PATH_STAGED)
        need[BENCH_CEIL_D2D] = 1;
    if (c->path->path != IPCP_PATH_DIRECT)
        need[BENCH_CEIL_STAGED] = 1;
}

void bench_ceilings_measure(bench_ctx_t *ctx, const bench_case_t *cs, int n,
                            int first)
{
    size_t size = cs[first].size;
    int need[BENCH_CEIL_COUNT] = {0};
    ctx->ceil_size = size;
    memset(ctx->ceil_val, 0, sizeof(ctx->ceil_val));
    memset(ctx->ceil_err, 0, sizeof(ctx->ceil_err));
    if (ctx->rank != RECV || !ctx->ceil || size > ctx->cap)
        return;
    for (int i = first; i < n && cs[i].size == size; i++)
        ceil_needs(ctx, &cs[i], need);
    /* min(d2h,h2d) is the lower of the two copies, each measured alone
     * (--compare shows both as rows of their own). */
    if (need[BENCH_CEIL_STAGED])
        need[BENCH_CEIL_D2H] = need[BENCH_CEIL_H2D] = 1;
    need[BENCH_CEIL_STAGED] = need[BENCH_CEIL_STAGED_BIDIR] = 0;
    int w = bench_window(ctx->o, size), slots = bench_case_slots(ctx->o, size);
    int reps = bench_reps(ctx->o, size);
    ctx->ceil_reps = reps;
    for (int k = 0; k < BENCH_CEIL_COUNT; k++) {
        char *err = ctx->ceil_err[k];
        if (!need[k])
            continue;
        ctx->ceil_val[k] =
            bench_ceil_measure(ctx->ceil, (bench_ceil_kind_t)k, size, w, slots,
                               reps, err, BENCH_REASON_MAX);
        if (ctx->ceil_val[k] <= 0)
            fprintf(stderr,
                    "ipcpipe-bench: ceiling %s at %zu bytes not "
                    "measured: %s\n",
                    bench_ceil_name((bench_ceil_kind_t)k), size, err);
    }
    double d2h = ctx->ceil_val[BENCH_CEIL_D2H],
           h2d = ctx->ceil_val[BENCH_CEIL_H2D];
    if (d2h > 0 && h2d > 0)
        ctx->ceil_val[BENCH_CEIL_STAGED] = d2h < h2d ? d2h : h2d;
    else
        bench_fmt(ctx->ceil_err[BENCH_CEIL_STAGED], BENCH_REASON_MAX, "%s",
                  d2h > 0 ? ctx->ceil_err[BENCH_CEIL_H2D]
                          : ctx->ceil_err[BENCH_CEIL_D2H]);
}

/* The ceiling of the path that moved the data (on GPU memory the direct
 * and staged paths have different limits). */
void bench_pick_ceiling(const bench_ctx_t *ctx, const bench_case_t *c,
                        bench_result_t *res)
{
    bench_ceil_kind_t k = BENCH_CEIL_NONE;
    int bidir = c->path->bidir;
    if (c->path->kind != BENCH_KIND_IPCP) {
        /* Open MPI's rows are the host references, the others GPU ones. */
        if ((ctx->mem == BENCH_MEM_CUDA) != (c->path->kind == BENCH_KIND_MPI))
            k = (bench_ceil_kind_t)c->path->ceil;
    } else if (ctx->mem == BENCH_MEM_HOST) {
        /* One way: the faster of one thread and as many as the library's
         * queues (either can win: small copies lose to the threads'
         * start, large ones share the memory bus). */
        k = bidir ? BENCH_CEIL_MEMCPY_BIDIR : BENCH_CEIL_MEMCPY;
        if (!bidir && ctx->ceil_val[BENCH_CEIL_MEMCPY_PAR] >
                          ctx->ceil_val[BENCH_CEIL_MEMCPY])
            k = BENCH_CEIL_MEMCPY_PAR;
    } else {
        ipcp_path_t p =
            res->outcome == BENCH_OK ? res->path_used : c->path->path;
        /* Striped: against the copy engine alone, which it means to pass;
         * the lane against it too (the same link, moved by kernels). */
        if (p == IPCP_PATH_DIRECT || p == IPCP_PATH_STRIPED ||
            p == IPCP_PATH_LANE)
            k = bidir ? BENCH_CEIL_D2D_BIDIR : BENCH_CEIL_D2D;
        else if (p == IPCP_PATH_STAGED)
            k = bidir ? BENCH_CEIL_STAGED_BIDIR : BENCH_CEIL_STAGED;
    }
    res->ceiling_kind = k;
    res->ceiling_gbps = 0;
    if (ctx->ceil_size != c->size || k == BENCH_CEIL_NONE)
        return;
    res->ceiling_gbps = k == BENCH_CEIL_STAGED_BIDIR
                            ? 2 * ctx->ceil_val[BENCH_CEIL_STAGED]
                            : ctx->ceil_val[k];
}

/* ---- pieces of a case ---------------------------------------------------- */

void bench_set_reason(bench_result_t *res, bench_outcome_t outcome,
                      const char *what, ipcp_status_t st)
{
    if (res->outcome != BENCH_OK)
        return; /* keep the first cause */
    res->outcome = outcome;
    bench_fmt(res->reason, sizeof(res->reason), "%s: %s: %s", what,
              ipcp_strerror(st), ipcp_last_error());
}

void bench_set_error(bench_result_t *res, const char *what, const char *msg)
{
    if (res->outcome != BENCH_OK)
        return;
    res->outcome = BENCH_ERROR;
    bench_fmt(res->reason, sizeof(res->reason), "%s: %s", what, msg);
}

/* A forced path the machine cannot serve is waived; so is any case that
 * runs out of memory.  Everything else is a failure. */
static bench_outcome_t classify(const bench_case_t *c, ipcp_status_t st)
{
    if (st == IPCP_ERR_NOMEM)
        return BENCH_WAIVED;
    if (c->path->path != IPCP_PATH_AUTO &&
        (st == IPCP_ERR_UNSUPPORTED || st == IPCP_ERR_PERMISSION))
        return BENCH_WAIVED;
    return BENCH_ERROR;
}

int bench_poison(bench_ctx_t *ctx, size_t len, bench_result_t *res)
{
    char err[BENCH_REASON_MAX];
    if (bench_buf_poison(&ctx->dst, 0, len, err, sizeof(err)) == 0)
        return 0;
    bench_set_error(res, "poisoning the receive buffer", err);
    return -1;
}

int bench_fill_src(bench_ctx_t *ctx, size_t len, uint64_t seed,
                   bench_result_t *res)
{
    char err[BENCH_REASON_MAX];
    if (bench_buf_fill(&ctx->src, 0, len, seed, ctx->staging, err,
                       sizeof(err)) == 0)
        return 0;
    if (res)
        bench_set_error(res, "filling the send buffer", err);
    else
        fprintf(stderr,
                "ipcpipe-bench [rank %d]: filling the send buffer: "
                "%s\n",
                ctx->rank, err);
    return -1;
}

/* Testing aid (IPCP_BENCH_CORRUPT=1, tools.bench.corrupt): flips the
 * middle byte of a host buffer before it is checked, so that the check is
 * seen to fail.  Not an IPCPIPE_* setting: the library knows nothing of
 * it. */
static void corrupt_for_test(bench_buf_t *b, size_t off, size_t len)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("IPCP_BENCH_CORRUPT");
        on = v && strcmp(v, "1") == 0;
    }
    if (on && len && b->device < 0)
        ((unsigned char *)b->ptr)[off + len / 2] ^= 0xff;
}

void bench_check_buf(bench_ctx_t *ctx, bench_buf_t *b, bench_result_t *res,
                     size_t off, size_t len, uint64_t seed, const char *what)
{
    char err[BENCH_REASON_MAX];
    unsigned char got = 0;
    corrupt_for_test(b, off, len);
    size_t bad = bench_buf_check(b, off, len, seed, ctx->staging, &got, err,
                                 sizeof(err));
    if (bad == len)
        return;
    res->verified = 0;
    if (bad == (size_t)-1) {
        bench_set_error(res, what, err);
        return;
    }
    if (res->reason[0] == '\0')
        bench_fmt(res->reason, sizeof(res->reason),
                  "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, bad,
                  len, got, ipcp_pattern_byte(seed, bad));
}

static void check_data(bench_ctx_t *ctx, bench_result_t *res, size_t off,
                       size_t len, uint64_t seed, const char *what)
{
    bench_check_buf(ctx, &ctx->dst, res, off, len, seed, what);
}

/* Posts nrecv receives (the k-th into slot k % slots) and nsend sends of
 * size bytes to or from the other one of ranks 0 and 1, then waits for all
 * of them.  Returns the first failure, with *what naming it. */
static ipcp_status_t xfer_window(bench_ctx_t *ctx, size_t size, int nrecv,
                                 int nsend, int slots, int rtag, int stag,
                                 bench_result_t *res, const char **what)
{
    int peer = ctx->rank == RECV ? SEND : RECV, n = 0, nr;
    unsigned char *dst = ctx->dst.ptr;
    ipcp_status_t first = IPCP_OK, st;
    ipcp_stream_t us = (ipcp_stream_t)ctx->ustream;
    for (int k = 0; k < nrecv && first == IPCP_OK; k++) {
        void *b = dst + (size_t)(k % slots) * size;
        st = us ? ipcp_irecv_on_stream(ctx->comm, b, size, peer, rtag, us,
                                       &ctx->reqs[n])
                : ipcp_irecv(ctx->comm, b, size, peer, rtag, &ctx->reqs[n]);
        if (st == IPCP_OK)
            n++;
        else
            first = st, *what = "ipcp_irecv";
    }
    nr = n;
    for (int k = 0; k < nsend && first == IPCP_OK; k++) {
        st = us ? ipcp_isend_on_stream(ctx->comm, ctx->src.ptr, size, peer,
                                       stag, us, &ctx->reqs[n])
                : ipcp_isend(ctx->comm, ctx->src.ptr, size, peer, stag,
                             &ctx->reqs[n]);
        if (st == IPCP_OK)
            n++;
        else
            first = st, *what = "ipcp_isend";
    }
    for (int j = 0; j < n; j++) {
        ipcp_xfer_info_t info = {0};
        st = ipcp_wait(ctx->reqs[j], &info);
        if (st != IPCP_OK && first == IPCP_OK) {
            first = st;
            *what = j < nr ? "receive" : "send";
        } else if (st == IPCP_OK && j < nr && res) {
            res->path_used = info.path;
            if (info.nbytes != size && res->outcome == BENCH_OK) {
                res->outcome = BENCH_ERROR;
                bench_fmt(res->reason, sizeof(res->reason),
                          "received %zu bytes, expected %zu", info.nbytes,
                          size);
            }
        }
    }
    /* Stream-ordered: done once the user's stream has gone past them. */
    char err[BENCH_REASON_MAX];
    if (us && bench_cuda_stream_sync(us, err, sizeof(err)) < 0 &&
        first == IPCP_OK) {
        first = IPCP_ERR_CUDA;
        *what = "cuStreamSynchronize";
    }
    return first;
}

/* The stream case's ping-pong: batches of round trips enqueued back to
 * back on each rank's stream (rank 0: send, receive; rank 1: receive, send
 * back), then the stream waited for; half a round trip is the batch's time
 * over twice its rounds.  Returns the per-batch figures in t (NULL on rank
 * 1), or -1 with *st set. */
#define BENCH_STREAM_BATCH 32
static int stream_pingpong(bench_ctx_t *ctx, const bench_case_t *c, int i,
                           int nbatches, double *t, double *tpost,
                           ipcp_status_t *st)
{
    ipcp_stream_t us = (ipcp_stream_t)ctx->ustream;
    int r0 = ctx->rank == RECV, peer = r0 ? SEND : RECV;
    char err[BENCH_REASON_MAX];
    for (int b = 0; b < nbatches; b++) {
        int n = 0;
        double t0 = bench_now_s();
        *st = IPCP_OK;
        /* Ping then pong: rank 0 sends the first and receives the
         * second, rank 1 the reverse, echoing what it received. */
        for (int k = 0; k < 2 * BENCH_STREAM_BATCH && *st == IPCP_OK; k++) {
            int ping = k % 2 == 0, send = ping == r0;
            int tag = bench_case_tag(i, ping ? T_PING : T_PONG);
            void *buf = send && r0 ? ctx->src.ptr : ctx->dst.ptr;
            /* A request per call costs it 0.6-1 us on an H200 VM (see
             * NOTES.md); --stream-reqs every measures that case. */
            int track =
                ctx->o->stream_reqs_every || k >= 2 * BENCH_STREAM_BATCH - 2;
            ipcp_request_t **rq = track ? &ctx->reqs[n] : NULL;
            *st = send ? ipcp_isend_on_stream(ctx->comm, buf, c->size, peer,
                                              tag, us, rq)
                       : ipcp_irecv_on_stream(ctx->comm, buf, c->size, peer,
                                              tag, us, rq);
            if (*st == IPCP_OK && track)
                n++;
        }
        double tp = bench_now_s();
        if (bench_cuda_stream_sync(us, err, sizeof(err)) < 0 && *st == IPCP_OK)
            *st = IPCP_ERR_CUDA;
        double t1 = bench_now_s();
        for (int j = 0; j < n; j++) {
            ipcp_status_t s = ipcp_wait(ctx->reqs[j], NULL);
            if (s != IPCP_OK && *st == IPCP_OK)
                *st = s;
        }
        if (*st != IPCP_OK)
            return -1;
        if (t)
            t[b] = (t1 - t0) / (2.0 * BENCH_STREAM_BATCH);
        if (tpost)
            tpost[b] = (tp - t0) / (2.0 * BENCH_STREAM_BATCH);
    }
    return 0;
}

int bench_bcast_verdict(bench_ctx_t *ctx, int i, int32_t ok)
{
    for (int r = 1; r < ctx->size; r++) {
        ipcp_status_t st = ipcp_send(ctx->comm, &ok, sizeof(ok), r,
                                     bench_case_tag(i, T_VERDICT));
        if (st != IPCP_OK) {
            fprintf(stderr, "ipcpipe-bench: verdict to rank %d: %s: %s\n", r,
                    ipcp_strerror(st), ipcp_last_error());
            return -1;
        }
    }
    return 0;
}

int bench_barrier(bench_ctx_t *ctx)
{
    ipcp_status_t st = ipcp_barrier(ctx->comm);
    if (st != IPCP_OK)
        fprintf(stderr, "ipcpipe-bench [rank %d]: barrier: %s: %s\n", ctx->rank,
                ipcp_strerror(st), ipcp_last_error());
    return st == IPCP_OK ? 0 : -1;
}

static int lat_case(const bench_ctx_t *ctx, const bench_case_t *c)
{
    return c->path->kind == BENCH_KIND_IPCP && !c->path->bidir &&
           c->size <= ctx->o->lat_max && c->size <= ctx->cap;
}

/* ---- rank 0, one direction -------------------------------------------- */

/* Receiver's warm-up, one transfer at a time; the first is checked (it is
 * the one that sets up mappings and rings, where mistakes show first). */
static int recv_warmup(bench_ctx_t *ctx, const bench_case_t *c, int i,
                       bench_result_t *res)
{
    for (int w = 0; w < ctx->o->warmup; w++) {
        int check = w == 0 && ctx->o->verify;
        const char *what = "warm-up";
        if (check && bench_poison(ctx, c->size, res) < 0)
            return 0;
        double a = bench_now_s();
        ipcp_status_t st = xfer_window(
            ctx, c->size, 1, 0, 1, bench_case_tag(i, T_DATA), 0, res, &what);
        if (w == 0 && st == IPCP_OK)
            res->first_us = (bench_now_s() - a) * 1e6;
        if (st != IPCP_OK) {
            bench_set_reason(res, classify(c, st), "warm-up receive", st);
            return 0;
        }
        if (check)
            check_data(ctx, res, 0, c->size, bench_case_seed(ctx, i, 0),
                       "warm-up");
    }
    return res->outcome == BENCH_OK;
}

/* Timed repetitions: each starts at a barrier; the receiver's clock runs
 * from leaving it to the completion of the window's last receive. */
static int recv_timed(bench_ctx_t *ctx, const bench_case_t *c, int i,
                      bench_result_t *res)
{
    int w = res->window, slots = bench_case_slots(ctx->o, c->size);
    double *t0 = calloc((size_t)res->iters, sizeof(*t0));
    double *t1 = calloc((size_t)res->iters, sizeof(*t1));
    for (int r = 0; r < res->iters; r++) {
        int check = r == res->iters - 1 && ctx->o->verify;
        const char *what = "timed";
        if (check)
            bench_poison(ctx, (size_t)slots * c->size, res);
        if (bench_barrier(ctx) < 0) {
            free(t0);
            free(t1);
            return -1;
        }
        double a = bench_now_s();
        ipcp_status_t st =
            xfer_window(ctx, c->size, w, 0, slots, bench_case_tag(i, T_DATA), 0,
                        res, &what);
        double b = bench_now_s();
        if (t0 && t1) {
            t0[r] = a;
            t1[r] = st == IPCP_OK ? b : NAN;
        }
        if (st != IPCP_OK) {
            bench_set_reason(res, classify(c, st), "timed receive", st);
            continue; /* keep receiving: the sender sends them all */
        }
        if (check)
            check_data(ctx, res, (size_t)((w - 1) % slots) * c->size, c->size,
                       bench_case_seed(ctx, i, 1), "last");
    }
    bench_time_reps(ctx, bench_case_tag(i, T_PEER_TIMES), t0 && t1 ? t0 : NULL,
                    t1, res->iters, (double)w * (double)c->size, res);
    free(t0);
    free(t1);
    return 0;
}

/* Ping-pong, started by rank 0: half of each round trip, median. */
static void recv_pingpong(bench_ctx_t *ctx, const bench_case_t *c, int i,
                          bench_result_t *res)
{
    uint64_t seed = bench_case_seed(ctx, i, 2);
    int warm = ctx->o->warmup, rounds = bench_lat_rounds(ctx->o, c->size);
    double *t = calloc((size_t)rounds, sizeof(*t));
    int n = 0;
    bench_fill_src(ctx, c->size, seed, res);
    if (ctx->ustream) {
        /* The calls' own time too: the GPUs run the batch while it is
         * enqueued, and calls slower than a half round trip would set
         * the pace. */
        int nb = (rounds + BENCH_STREAM_BATCH - 1) / BENCH_STREAM_BATCH;
        double *tp = calloc((size_t)nb, sizeof(*tp));
        ipcp_status_t st = IPCP_OK;
        if (ctx->o->verify)
            bench_poison(ctx, c->size, res);
        if (!t || !tp || stream_pingpong(ctx, c, i, 1, NULL, NULL, &st) < 0 ||
            stream_pingpong(ctx, c, i, nb, t, tp, &st) < 0) {
            bench_set_reason(res, BENCH_ERROR, "stream ping-pong",
                             t && tp ? st : IPCP_ERR_NOMEM);
            free(t);
            free(tp);
            return;
        }
        if (ctx->o->verify)
            check_data(ctx, res, 0, c->size, seed, "stream ping-pong");
        res->latency_us = bench_median(t, nb) * 1e6;
        res->post_us = bench_median(tp, nb) * 1e6;
        free(t);
        free(tp);
        return;
    }
    for (int k = 0; k < warm + rounds; k++) {
        int check = k == warm + rounds - 1 && ctx->o->verify;
        if (check)
            bench_poison(ctx, c->size, res);
        double t0 = bench_now_s();
        ipcp_status_t st = ipcp_send(ctx->comm, ctx->src.ptr, c->size, SEND,
                                     bench_case_tag(i, T_PING));
        if (st == IPCP_OK)
            st = ipcp_recv(ctx->comm, ctx->dst.ptr, c->size, SEND,
                           bench_case_tag(i, T_PONG), NULL);
        double t1 = bench_now_s();
        if (st != IPCP_OK) {
            bench_set_reason(res, BENCH_ERROR, "ping-pong", st);
            free(t);
            return;
        }
        if (k >= warm && t)
            t[n++] = 0.5 * (t1 - t0);
        if (check)
            check_data(ctx, res, 0, c->size, seed, "ping-pong");
    }
    double med = t ? bench_median(t, n) : NAN;
    res->latency_us = med * 1e6;
    free(t);
}

/* ---- rank 0, both directions (bidir) ------------------------------------ */

/* A repetition's clock starts when both ranks have left its barrier.
 * Rank 0 releases the barrier and leaves at once; rank 1 leaves when the
 * release reaches it (a message and a thread's wake-up: tens of us in
 * these VMs), and no transfer can start before that, so timing from rank
 * 0's exit alone charged that hop to every transfer.  Processes of one
 * machine read the same CLOCK_MONOTONIC: rank 1 sends the times it left
 * at after the repetitions, and rank 0 starts each from the later one.
 * How much later rank 1 left is reported (skew_us), not timed. */
int bench_send_starts(bench_ctx_t *ctx, int tag, const double *starts, int n)
{
    double none = NAN;
    ipcp_status_t st = ipcp_send(
        ctx->comm, starts ? starts : &none,
        starts ? (size_t)n * sizeof(double) : sizeof(none), RECV, tag);
    if (st != IPCP_OK)
        fprintf(stderr,
                "ipcpipe-bench [rank 1]: start times to rank 0: %s: "
                "%s\n",
                ipcp_strerror(st), ipcp_last_error());
    return st == IPCP_OK ? 0 : -1;
}

void bench_time_reps(bench_ctx_t *ctx, int tag, const double *starts,
                     double *ends, int n, double bytes, bench_result_t *res)
{
    double *peer = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    double *skew = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    int m = 0, k = 0;
    for (int r = 0; peer && r < n; r++)
        peer[r] = NAN;
    ipcp_status_t st =
        peer ? ipcp_recv(ctx->comm, peer, (size_t)n * sizeof(double), SEND, tag,
                         NULL)
             : IPCP_ERR_NOMEM;
    if (st != IPCP_OK)
        bench_set_reason(res, BENCH_ERROR, "rank 1's start times", st);
    for (int r = 0; starts && ends && r < n; r++) {
        if (!isfinite(ends[r]))
            continue;
        double s = starts[r];
        if (peer && isfinite(peer[r])) {
            if (skew)
                skew[k++] = peer[r] - s;
            if (peer[r] > s)
                s = peer[r];
        }
        ends[m++] = ends[r] - s;
    }
    res->skew_us = k ? bench_median(skew, k) * 1e6 : NAN;
    double med = m ? bench_median(ends, m) : NAN;
    res->gbps = med > 0 ? bytes / med / 1e9 : NAN;
    free(peer);
    free(skew);
}

int bench_recv_peer_msg(bench_ctx_t *ctx, int tag, peer_msg_t *m,
                        bench_result_t *res)
{
    ipcp_status_t st = ipcp_recv(ctx->comm, m, sizeof(*m), SEND, tag, NULL);
    if (st != IPCP_OK) {
        bench_set_reason(res, BENCH_ERROR, "rank 1's report", st);
        return -1;
    }
    m->reason[sizeof(m->reason) - 1] = '\0';
    if (!m->ok)
        bench_set_error(res, "rank 1", m->reason);
    else if (m->verified == 0 && res->verified != 0) {
        res->verified = 0;
        if (!res->reason[0])
            bench_fmt(res->reason, sizeof(res->reason), "rank 1: %s",
                      m->reason);
    }
    return 0;
}

static int bidir0_warmup(bench_ctx_t *ctx, const bench_case_t *c, int i,
                         bench_result_t *res)
{
    if (bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 3), res) < 0)
        return 0;
    for (int w = 0; w < ctx->o->warmup; w++) {
        int check = w == 0 && ctx->o->verify;
        const char *what = "warm-up";
        if (check && bench_poison(ctx, c->size, res) < 0)
            return 0;
        ipcp_status_t st =
            xfer_window(ctx, c->size, 1, 1, 1, bench_case_tag(i, T_DATA),
                        bench_case_tag(i, T_REV), res, &what);
        if (st != IPCP_OK) {
            char w2[64];
            bench_fmt(w2, sizeof(w2), "warm-up %s", what);
            bench_set_reason(res, classify(c, st), w2, st);
            return 0;
        }
        if (check)
            check_data(ctx, res, 0, c->size, bench_case_seed(ctx, i, 0),
                       "warm-up");
    }
    if (res->outcome != BENCH_OK)
        return 0;
    peer_msg_t m;
    if (bench_recv_peer_msg(ctx, bench_case_tag(i, T_PEER_WARM), &m, res) < 0)
        return 0;
    return res->outcome == BENCH_OK;
}

/* Aggregate: 2 * W * size bytes from rank 0 leaving the barrier to the
 * last completion on either rank (CLOCK_MONOTONIC is one clock for every
 * process of the machine). */
static int bidir0_timed(bench_ctx_t *ctx, const bench_case_t *c, int i,
                        bench_result_t *res)
{
    int w = res->window, slots = bench_case_slots(ctx->o, c->size),
        iters = res->iters;
    double *t0 = calloc((size_t)iters, sizeof(double));
    double *t1 = calloc((size_t)iters, sizeof(double));
    double *peer = calloc((size_t)iters, sizeof(double)); /* rank 1's ends */
    int rc = 0;
    for (int r = 0; r < iters; r++) {
        int check = r == iters - 1 && ctx->o->verify;
        const char *what = "timed";
        if (check) {
            bench_poison(ctx, (size_t)slots * c->size, res);
            bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 4), res);
        }
        if (bench_barrier(ctx) < 0) {
            rc = -1;
            goto out;
        }
        double a = bench_now_s();
        ipcp_status_t st =
            xfer_window(ctx, c->size, w, w, slots, bench_case_tag(i, T_DATA),
                        bench_case_tag(i, T_REV), res, &what);
        double b = bench_now_s();
        if (t0 && t1) {
            t0[r] = a;
            t1[r] = st == IPCP_OK ? b : NAN;
        }
        if (st != IPCP_OK) {
            char w2[64];
            bench_fmt(w2, sizeof(w2), "timed %s", what);
            bench_set_reason(res, classify(c, st), w2, st);
            continue;
        }
        if (check)
            check_data(ctx, res, (size_t)((w - 1) % slots) * c->size, c->size,
                       bench_case_seed(ctx, i, 1), "last");
    }
    peer_msg_t m;
    if (bench_recv_peer_msg(ctx, bench_case_tag(i, T_PEER_REPORT), &m, res) < 0)
        goto out;
    double dummy;
    ipcp_status_t st =
        ipcp_recv(ctx->comm, peer ? (void *)peer : (void *)&dummy,
                  peer ? (size_t)iters * sizeof(double) : sizeof(dummy), SEND,
                  bench_case_tag(i, T_PEER_TIMES), NULL);
    if (st != IPCP_OK) {
        bench_set_reason(res, BENCH_ERROR, "rank 1's times", st);
        goto out;
    }
    /* To the last completion on either rank, from both out of the barrier
     * (rank 1's exits follow its ends on the same tag). */
    for (int r = 0; t0 && t1 && peer && r < iters; r++)
        t1[r] = isfinite(t1[r]) && isfinite(peer[r])
                    ? (t1[r] > peer[r] ? t1[r] : peer[r])
                    : NAN;
    bench_time_reps(ctx, bench_case_tag(i, T_PEER_TIMES),
                    t0 && t1 && peer ? t0 : NULL, t1, iters,
                    2.0 * w * (double)c->size, res);
out:
    free(t0);
    free(t1);
    free(peer);
    return rc;
}

int bench_size_waived(const bench_ctx_t *ctx, const bench_case_t *c,
                      bench_result_t *res)
{
    char sz[24], cap[24];
    if (c->size <= ctx->cap)
        return 0;
    bench_format_size(c->size, sz, sizeof(sz));
    bench_format_size(ctx->cap, cap, sizeof(cap));
    res->outcome = BENCH_WAIVED;
    if (ctx->waive[0])
        bench_fmt(res->reason, sizeof(res->reason), "%s", ctx->waive);
    else if (ctx->failed_cap && c->size >= ctx->failed_cap)
        bench_fmt(res->reason, sizeof(res->reason),
                  "not enough memory (allocating buffers of %s failed; "
                  "largest size that fits: %s)",
                  sz, cap);
    else
        bench_fmt(res->reason, sizeof(res->reason),
                  "not enough memory (buffers of %s need %.1f GiB of "
                  "host memory, %.1f GiB usable; largest size that fits: "
                  "%s)",
                  sz, (double)host_need(ctx, c->size) / (double)GIB,
                  (double)ctx->usable / (double)GIB, cap);
    return 1;
}

/* The stream case: GPU memory and a stream, else waived (res != NULL:
 * rank 0, which says why).  Returns 1 when it can run. */
static int stream_begin(bench_ctx_t *ctx, bench_result_t *res)
{
    char err[BENCH_REASON_MAX];
    if (ctx->mem != BENCH_MEM_CUDA) {
        if (res) {
            res->outcome = BENCH_WAIVED;
            bench_fmt(res->reason, sizeof(res->reason),
                      "the stream-ordered calls take GPU memory");
        }
        return 0;
    }
    ctx->ustream = bench_cuda_stream(err, sizeof(err));
    if (!ctx->ustream && res) {
        res->outcome = BENCH_ERROR;
        bench_fmt(res->reason, sizeof(res->reason), "%s", err);
    }
    return ctx->ustream != NULL;
}

static int run_receiver(bench_ctx_t *ctx, const bench_case_t *c, int i,
                        bench_result_t *res)
{
    int ok = 0;
    /* Set before the barrier, so that the sender's first transfer already
     * sees the forced path (peers learn of it at a synchronization). */
    ipcp_status_t pst = ipcp_comm_set_path(ctx->comm, c->path->path);
    if (bench_barrier(ctx) < 0)
        return -1;
    if (bench_size_waived(ctx, c, res)) {
        /* reason set */
    } else if (c->path->stream && !stream_begin(ctx, res)) {
        /* reason set */
    } else if (pst != IPCP_OK) {
        bench_set_reason(res, classify(c, pst), "ipcp_comm_set_path", pst);
    } else {
        ok = c->path->bidir ? bidir0_warmup(ctx, c, i, res)
                            : recv_warmup(ctx, c, i, res);
    }
    if (bench_bcast_verdict(ctx, i, ok) < 0)
        return -1;
    if (ok && (c->path->bidir ? bidir0_timed(ctx, c, i, res)
                              : recv_timed(ctx, c, i, res)) < 0)
        return -1;
    if (ok && lat_case(ctx, c)) {
        if (bench_barrier(ctx) < 0)
            return -1;
        recv_pingpong(ctx, c, i, res);
    }
    ctx->ustream = NULL;
    ipcp_comm_set_path(ctx->comm, IPCP_PATH_AUTO);
    if (res->outcome != BENCH_OK)
        res->gbps = res->latency_us = res->post_us = NAN;
    bench_pick_ceiling(ctx, c, res);
    return 0;
}

/* ---- rank 1 (and the others) ------------------------------------------- */

/* Waits for req while watching for rank 0's verdict: when the receiver
 * gave up on the case, req may never be matched and is left behind (its
 * tag belongs to this case only).  Returns 1 when req completed (status in
 * *st), 0 when it was abandoned. */
static int await_req(ipcp_request_t *req, ipcp_request_t **vreq,
                     int32_t *verdict, ipcp_status_t *st)
{
    for (long spins = 0;; spins++) {
        int done = 0;
        *st = ipcp_test(req, &done, NULL);
        if (done)
            return 1;
        if (*vreq) {
            ipcp_status_t vs = ipcp_test(*vreq, &done, NULL);
            if (done) {
                *vreq = NULL;
                if (vs != IPCP_OK || !*verdict)
                    return 0;
            }
        }
        /* The warm-up is not timed: back off so the progress thread and the
         * copy workers keep the cores. */
        if (spins < 1000) {
            sched_yield();
        } else {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
}

static int send_warmup(bench_ctx_t *ctx, const bench_case_t *c, int i,
                       ipcp_request_t **vreq, int32_t *verdict)
{
    /* A failed fill is reported and the sends still go out: the
     * receiver waits for them, and its check will fail. */
    if (ctx->o->verify)
        bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 0), NULL);
    /* The stream case sends as it times: the small-message lane
     * (IPCPIPE_SMALL) carries stream-ordered sends only, and its receives
     * take messages in order. */
    ipcp_stream_t us = (ipcp_stream_t)ctx->ustream;
    for (int w = 0; w < ctx->o->warmup; w++) {
        ipcp_request_t *sreq;
        ipcp_status_t st =
            us ? ipcp_isend_on_stream(ctx->comm, ctx->src.ptr, c->size, RECV,
                                      bench_case_tag(i, T_DATA), us, &sreq)
               : ipcp_isend(ctx->comm, ctx->src.ptr, c->size, RECV,
                            bench_case_tag(i, T_DATA), &sreq);
        if (st != IPCP_OK)
            return 0;
        if (!await_req(sreq, vreq, verdict, &st) || st != IPCP_OK)
            return 0;
    }
    return 1;
}

static void send_report(const bench_case_t *c, const char *what,
                        ipcp_status_t st, int *reported)
{
    if (*reported)
        return;
    *reported = 1;
    fprintf(stderr, "ipcpipe-bench [rank 1] %s: %s: %s: %s\n", c->name, what,
            ipcp_strerror(st), ipcp_last_error());
}

static int send_timed(bench_ctx_t *ctx, const bench_case_t *c, int i, int iters)
{
    int reported = 0, w = bench_window(ctx->o, c->size);
    double *starts = calloc((size_t)iters, sizeof(double));
    for (int r = 0; r < iters; r++) {
        const char *what = "send";
        if (r == iters - 1 && ctx->o->verify)
            bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 1), NULL);
        if (bench_barrier(ctx) < 0) {
            free(starts);
            return -1;
        }
        if (starts)
            starts[r] = bench_now_s();
        ipcp_status_t st = xfer_window(ctx, c->size, 0, w, 1, 0,
                                       bench_case_tag(i, T_DATA), NULL, &what);
        if (st != IPCP_OK)
            send_report(c, "timed send", st, &reported);
    }
    bench_send_starts(ctx, bench_case_tag(i, T_PEER_TIMES), starts, iters);
    free(starts);
    return 0;
}

/* Echoes every ping; receives on the case's path like rank 0 does. */
static int send_pingpong(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    int reported = 0, rounds = bench_lat_rounds(ctx->o, c->size);
    ipcp_status_t st = ipcp_comm_set_path(ctx->comm, c->path->path);
    if (st != IPCP_OK)
        send_report(c, "ipcp_comm_set_path", st, &reported);
    if (bench_barrier(ctx) < 0)
        return -1;
    if (ctx->ustream && st == IPCP_OK) {
        int nb = (rounds + BENCH_STREAM_BATCH - 1) / BENCH_STREAM_BATCH;
        if (stream_pingpong(ctx, c, i, 1 + nb, NULL, NULL, &st) < 0)
            send_report(c, "stream ping-pong", st, &reported);
        ipcp_comm_set_path(ctx->comm, IPCP_PATH_AUTO);
        return 0;
    }
    for (int k = 0; k < ctx->o->warmup + rounds && st == IPCP_OK; k++) {
        st = ipcp_recv(ctx->comm, ctx->dst.ptr, c->size, RECV,
                       bench_case_tag(i, T_PING), NULL);
        if (st == IPCP_OK)
            st = ipcp_send(ctx->comm, ctx->dst.ptr, c->size, RECV,
                           bench_case_tag(i, T_PONG));
        if (st != IPCP_OK)
            send_report(c, "ping-pong", st, &reported);
    }
    ipcp_comm_set_path(ctx->comm, IPCP_PATH_AUTO);
    return 0;
}

int bench_send_peer_msg(bench_ctx_t *ctx, int tag, const bench_result_t *lr)
{
    peer_msg_t m = {lr->outcome == BENCH_OK, lr->verified, ""};
    bench_fmt(m.reason, sizeof(m.reason), "%s", lr->reason);
    ipcp_status_t st = ipcp_send(ctx->comm, &m, sizeof(m), RECV, tag);
    if (st != IPCP_OK)
        fprintf(stderr, "ipcpipe-bench [rank 1]: report to rank 0: %s: %s\n",
                ipcp_strerror(st), ipcp_last_error());
    return st == IPCP_OK ? 0 : -1;
}

/* Rank 1's half of a bidir warm-up: every transfer is waited for while
 * watching the verdict; a failed one is noted and the rest still run, so
 * rank 0's matching ones complete.  Its outcome goes to rank 0. */
static void bidir1_warmup(bench_ctx_t *ctx, const bench_case_t *c, int i,
                          ipcp_request_t **vreq, int32_t *verdict)
{
    bench_result_t lr = {.outcome = BENCH_OK,
                         .verified = ctx->o->verify ? 1 : -1};
    bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 0), &lr);
    for (int w = 0; w < ctx->o->warmup; w++) {
        int check = w == 0 && ctx->o->verify;
        ipcp_request_t *rq[2];
        ipcp_status_t st[2];
        if (check)
            bench_poison(ctx, c->size, &lr);
        st[0] = ipcp_irecv(ctx->comm, ctx->dst.ptr, c->size, RECV,
                           bench_case_tag(i, T_REV), &rq[0]);
        st[1] = ipcp_isend(ctx->comm, ctx->src.ptr, c->size, RECV,
                           bench_case_tag(i, T_DATA), &rq[1]);
        for (int k = 0; k < 2; k++) {
            if (st[k] == IPCP_OK && !await_req(rq[k], vreq, verdict, &st[k]))
                return; /* rank 0 gave up the case */
            if (st[k] != IPCP_OK)
                bench_set_reason(&lr, BENCH_ERROR,
                                 k ? "warm-up send" : "warm-up receive", st[k]);
        }
        if (check && st[0] == IPCP_OK)
            check_data(ctx, &lr, 0, c->size, bench_case_seed(ctx, i, 3),
                       "warm-up");
    }
    bench_send_peer_msg(ctx, bench_case_tag(i, T_PEER_WARM), &lr);
}

static int bidir1_timed(bench_ctx_t *ctx, const bench_case_t *c, int i,
                        int iters)
{
    bench_result_t lr = {.outcome = BENCH_OK,
                         .verified = ctx->o->verify ? 1 : -1};
    int w = bench_window(ctx->o, c->size),
        slots = bench_case_slots(ctx->o, c->size);
    double *starts = calloc((size_t)iters, sizeof(double));
    double *end = calloc((size_t)iters, sizeof(double));
    if (!end)
        bench_set_error(&lr, "rank 1", "out of memory");
    for (int r = 0; r < iters; r++) {
        int check = r == iters - 1 && ctx->o->verify;
        const char *what = "timed";
        if (check) {
            bench_poison(ctx, (size_t)slots * c->size, &lr);
            bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 1), &lr);
        }
        if (bench_barrier(ctx) < 0) {
            free(starts);
            free(end);
            return -1;
        }
        if (starts)
            starts[r] = bench_now_s();
        ipcp_status_t st =
            xfer_window(ctx, c->size, w, w, slots, bench_case_tag(i, T_REV),
                        bench_case_tag(i, T_DATA), &lr, &what);
        if (end)
            end[r] = st == IPCP_OK ? bench_now_s() : NAN;
        if (st != IPCP_OK) {
            char w2[64];
            bench_fmt(w2, sizeof(w2), "timed %s", what);
            bench_set_reason(&lr, BENCH_ERROR, w2, st);
            continue;
        }
        if (check)
            check_data(ctx, &lr, (size_t)((w - 1) % slots) * c->size, c->size,
                       bench_case_seed(ctx, i, 4), "last");
    }
    int rc = bench_send_peer_msg(ctx, bench_case_tag(i, T_PEER_REPORT), &lr);
    if (rc == 0) {
        double dummy = NAN;
        ipcp_status_t st =
            ipcp_send(ctx->comm, end ? (void *)end : (void *)&dummy,
                      end ? (size_t)iters * sizeof(double) : sizeof(dummy),
                      RECV, bench_case_tag(i, T_PEER_TIMES));
        if (st != IPCP_OK)
            fprintf(stderr,
                    "ipcpipe-bench [rank 1]: times to rank 0: %s: "
                    "%s\n",
                    ipcp_strerror(st), ipcp_last_error());
        else /* then its barrier exits, on the same tag (in order) */
            bench_send_starts(ctx, bench_case_tag(i, T_PEER_TIMES), starts,
                              iters);
    }
    free(starts);
    free(end);
    return 0;
}

/* Rank 1, and (with nothing to send) ranks 2 and up. */
static int run_sender_case(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    int32_t verdict = 0;
    ipcp_request_t *vreq = NULL;
    if (bench_barrier(ctx) < 0)
        return -1;
    ipcp_status_t st = ipcp_irecv(ctx->comm, &verdict, sizeof(verdict), RECV,
                                  bench_case_tag(i, T_VERDICT), &vreq);
    /* Without a stream of its own (it failed to make one) this rank still
     * answers with the plain calls, which match the same way: rank 0 is
     * never left waiting for sends that do not come. */
    if (c->path->stream)
        (void)stream_begin(ctx, NULL);
    /* Rank 0 waives the stream case on host memory: nothing is posted that
     * it would leave unmatched (an eager send's buffer is read when the
     * progress thread takes it, which may be after the buffers went). */
    int post = !(c->path->stream && ctx->mem != BENCH_MEM_CUDA);
    if (st == IPCP_OK && ctx->rank == SEND && c->size <= ctx->cap && post) {
        if (c->path->bidir)
            bidir1_warmup(ctx, c, i, &vreq, &verdict);
        else
            send_warmup(ctx, c, i, &vreq, &verdict);
    }
    if (st == IPCP_OK && vreq)
        st = ipcp_wait(vreq, NULL);
    if (st != IPCP_OK) {
        fprintf(stderr, "ipcpipe-bench [rank %d]: verdict: %s: %s\n", ctx->rank,
                ipcp_strerror(st), ipcp_last_error());
        return -1;
    }
    if (!verdict)
        return 0;
    int iters = bench_reps(ctx->o, c->size);
    if (ctx->rank == SEND) {
        if (c->path->bidir)
            return bidir1_timed(ctx, c, i, iters);
        if (send_timed(ctx, c, i, iters) < 0)
            return -1;
        if (lat_case(ctx, c))
            return send_pingpong(ctx, c, i);
        return 0;
    }
    for (int r = 0; r < iters + lat_case(ctx, c); r++)
        if (bench_barrier(ctx) < 0)
            return -1;
    return 0;
}

static int run_sender(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    /* Both ranks receive in bidir: both force its path (before the case's
     * first barrier, as rank 0 does). */
    int force =
        c->path->bidir && ctx->rank == SEND && c->path->path != IPCP_PATH_AUTO;
    if (force && ipcp_comm_set_path(ctx->comm, c->path->path) != IPCP_OK)
        fprintf(stderr, "ipcpipe-bench [rank 1] %s: ipcp_comm_set_path: %s\n",
                c->name, ipcp_last_error());
    int rc = run_sender_case(ctx, c, i);
    if (force)
        ipcp_comm_set_path(ctx->comm, IPCP_PATH_AUTO);
    ctx->ustream = NULL;
    return rc;
}

int bench_run_case(bench_ctx_t *ctx, const bench_case_t *c, int i,
                   bench_result_t *res)
{
    if (c->path->kind != BENCH_KIND_IPCP)
        return bench_cmp_run(ctx, c, i, res);
    if (ctx->rank != RECV)
        return run_sender(ctx, c, i);
    *res = (bench_result_t){
        .c = c,
        .outcome = BENCH_OK,
        .gbps = NAN,
        .latency_us = -1,
        .first_us = -1,
        .post_us = -1,
        .skew_us = NAN,
        .verified = ctx->o->verify ? 1 : -1,
        .iters = bench_reps(ctx->o, c->size),
        .window = bench_window(ctx->o, c->size),
        .path_used = c->path->path,
    };
    return run_receiver(ctx, c, i, res);
}
