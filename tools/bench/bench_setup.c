/* ipcpipe-bench: the set-up of a run: the buffers each rank allocates, the
 * agreement on them between the ranks, the context the cases run in, and
 * the ceilings each case is set against. */
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

/* Left free for the library's rings, the page tables and everyone else. */
#define MIB       ((size_t)1 << 20)
#define MEM_SLACK (256 * MIB)

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
uint64_t bench_host_need(const bench_ctx_t *ctx, size_t s)
{
    const bench_opts_t *o = ctx->o;
    uint64_t wl = bench_window_len(o, ctx->cs, ctx->ncases, s);
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
        int fits = avail == UINT64_MAX || bench_host_need(ctx, s) <= usable;
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
    int dev = cuda ? ctx->device : -1;
    bench_alloc_t alloc = ctx->o->alloc;
    /* Host windows send from slots of their own (bench_src_slots). */
    size_t slen = !cuda && ctx->dst_len > ctx->cap ? ctx->dst_len : ctx->cap;
    if (bench_buf_alloc(ctx->comm, slen, dev, alloc, &ctx->src, nomem, err,
                        elen) < 0 ||
        bench_buf_alloc(ctx->comm, dlen ? dlen : 1, dev, alloc, &ctx->dst,
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
        if (ctx->ceil)
            bench_ceil_set_cpus(ctx->ceil, &peer->cpus);
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
    /* Other allocators' rows stand beside ceilings on cuMemAlloc memory
     * (the copy engines' speed does not depend on who allocated). */
    ctx->ceil = bench_ceil_create_cuda(
        ctx->comm, a, b, ctx->o->alloc != BENCH_ALLOC_IPCP, ctx->dst_len,
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

static int stream_wait = BENCH_WAIT_AUTO;

void bench_set_stream_wait(int wait)
{
    stream_wait = wait;
}

bench_wait_t bench_stream_wait(void)
{
    static int n = -1;
    if (stream_wait != BENCH_WAIT_AUTO)
        return (bench_wait_t)stream_wait;
    if (n < 0) {
        cpu_set_t set;
        n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    }
    return n == 1 ? BENCH_WAIT_POLL : BENCH_WAIT_SYNC;
}

int bench_stream_poll(void)
{
    return bench_stream_wait() != BENCH_WAIT_SYNC;
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
    if (sched_getaffinity(0, sizeof(mine.cpus), &mine.cpus) != 0)
        CPU_ZERO(&mine.cpus);
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
            ctx->dst_len =
                bench_window_len(ctx->o, ctx->cs, ctx->ncases, ctx->cap);
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
        ctx->seed = bench_fresh_seed();
        resolve_mem(ctx);
        char err[BENCH_REASON_MAX];
        if (!ctx->waive[0] && ctx->mem == BENCH_MEM_CUDA &&
            bind_device(ctx, err, sizeof(err)) < 0)
            bench_fmt(ctx->waive, sizeof(ctx->waive), "rank 0: %s", err);
        ctx->cap = ctx->waive[0] ? 0 : mem_cap(ctx, SIZE_MAX);
        ctx->dst_len = bench_window_len(o, cs, n, ctx->cap);
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
        /* The striped copy splits its bytes only from BENCH_STRIPED_MIN
         * (its row waives smaller sizes). */
        if (c->path->ceil == BENCH_CEIL_STRIPED && c->size < BENCH_STRIPED_MIN)
            return;
        need[c->path->ceil] = 1;
        if (c->path->kind == BENCH_KIND_LOCAL)
            need[c->path->local] = 1;
        return;
    }
    if (ctx->mem == BENCH_MEM_HOST) {
        int nt = bench_ceil_have_nt();
        if (c->path->bidir) {
            need[BENCH_CEIL_MEMCPY_BIDIR] = 1;
            need[BENCH_CEIL_NT_BIDIR] = nt;
        } else {
            need[BENCH_CEIL_MEMCPY] = need[BENCH_CEIL_MEMCPY_PAR] = 1;
            need[BENCH_CEIL_NT_PAR] = nt;
        }
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
    /* A transfer between two devices that may stripe (the library
     * stripes from tens of MiB where it gains at all). */
    const int *d = ctx->info.ceil_dev;
    if (c->path->path != IPCP_PATH_STAGED &&
        c->path->path != IPCP_PATH_DIRECT && c->size >= BENCH_STRIPED_MIN &&
        d[0] >= 0 && d[0] != d[1] && bench_cuda_peer(d[0], d[1]))
        need[BENCH_CEIL_STRIPED] = 1;
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

/* Host rows: the fastest copy of the machine at this size as the library
 * could copy it.  One way, one thread's memcpy and the library's number
 * of threads with memcpy and with non-temporal stores (any can win:
 * small copies lose to the threads' start, and ordinary stores to
 * streaming ones once the window outgrows the caches); both ways, the
 * threads of both directions with either copy. */
static bench_ceil_kind_t host_ceiling(const bench_ctx_t *ctx, int bidir,
                                      bench_result_t *res)
{
    static const bench_ceil_kind_t one[] = {
        BENCH_CEIL_MEMCPY, BENCH_CEIL_MEMCPY_PAR, BENCH_CEIL_NT_PAR};
    static const bench_ceil_kind_t two[] = {BENCH_CEIL_MEMCPY_BIDIR,
                                            BENCH_CEIL_NT_BIDIR};
    const bench_ceil_kind_t *ks = bidir ? two : one;
    int n = bidir ? 2 : 3;
    bench_ceil_kind_t best = ks[0];
    res->ncand = 0;
    for (int i = 0; i < n; i++) {
        if (ctx->ceil_val[ks[i]] > ctx->ceil_val[best])
            best = ks[i];
        if (ctx->ceil_size == res->c->size && ctx->ceil_val[ks[i]] > 0) {
            res->cand_kind[res->ncand] = ks[i];
            res->cand_gbps[res->ncand++] = ctx->ceil_val[ks[i]];
        }
    }
    return best;
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
        k = host_ceiling(ctx, bidir, res);
    } else {
        ipcp_path_t p =
            res->outcome == BENCH_OK ? res->path_used : c->path->path;
        /* Striped one way: against both paths at once; both ways (and
         * where that was not measured) against the copy engine, which it
         * means to pass; the lane against it too (the same link, moved by
         * kernels), and the bounce path (the same link, then a copy on
         * the receiver's GPU). */
        if (p == IPCP_PATH_STRIPED && !bidir &&
            ctx->ceil_val[BENCH_CEIL_STRIPED] > 0 &&
            ctx->ceil_size == c->size) {
            /* Both paths at once in one process; the copy engine's
             * figure beside it (the table's "^ ceilings" line). */
            k = BENCH_CEIL_STRIPED;
            res->ncand = 2;
            res->cand_kind[0] = BENCH_CEIL_STRIPED;
            res->cand_gbps[0] = ctx->ceil_val[BENCH_CEIL_STRIPED];
            res->cand_kind[1] = BENCH_CEIL_D2D;
            res->cand_gbps[1] = ctx->ceil_val[BENCH_CEIL_D2D];
        } else if (p == IPCP_PATH_DIRECT || p == IPCP_PATH_STRIPED ||
                   p == IPCP_PATH_LANE || p == IPCP_PATH_BOUNCE)
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
