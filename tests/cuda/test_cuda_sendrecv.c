/* Two-sided transfers involving device memory, between two processes,
 * through the public API; every byte verified, and the bytes around the
 * buffers too.
 *
 *   test_cuda_sendrecv --size S --path direct|staged|bounce|auto --send KIND
 *       --recv KIND [--devices same|split|isolated] [--soff N] [--roff N]
 *       [--iters N] [--kill sender|receiver] [--end barrier|none]
 *
 * KIND: dev (cuMemAlloc: the user's memory, exported by legacy IPC), vmm
 * (ipcp_mem_alloc of CUDA memory), host (malloc), hostmem (ipcp_mem_alloc
 * of host memory); the user's own VMM memory (cuMemCreate, as PyTorch's
 * expandable segments and NCCL make it): uvmm (one allocation with a POSIX
 * fd handle type: exported by fd), uvmm2 (two such allocations mapped
 * one after the other, the buffer across both: exported as two pieces),
 * uvmmn (allocations of one granule each, as many as the buffer spans,
 * from the middle of the first: exported piece by piece up to 64 pieces,
 * staged beyond), uvmmx (two allocations of different sizes, the buffer
 * across both: not exported), uvmm0 (one allocation without handle types:
 * not exported); cudaMallocAsync's kinds: pool (cuMemAllocAsync from the
 * device's default pool, which cannot be shared), spool (from a pool made
 * with POSIX fd handles: shared through the pool; each buffer's pool is
 * destroyed with it).  Device memory neither side can share moves
 * through the bounce path (a ring in the receiver's device memory) where
 * the sender's GPU reaches the receiver's, else staged.  Rank 0 sends,
 * rank 1 receives, and only the receiver forces the path (it decides).  devices
 * same: both ranks on device 0 (one GPU shared by two processes); split: rank r
 * on device r; isolated: rank r sees only GPU r (CUDA_VISIBLE_DEVICES=r), so no
 * direct path exists and auto must pick staged.
 *
 * --kill sender|receiver: that rank posts its side and kills itself with
 * SIGKILL a moment later (mid-transfer); the survivor's blocking call must
 * return IPCP_ERR_PEER_LOST (or, for a receiver that copied the data itself
 * before it noticed, IPCP_OK with every byte) and its finalize must not
 * hang on device waits the dead peer would have released.
 *
 * A forced direct path can serve only a receive buffer from ipcp_mem_alloc
 * of the same kind of memory as the send buffer, a forced bounce path only
 * GPUs with a direct link (host memory on either side goes as under auto);
 * otherwise both sides must fail with IPCP_ERR_UNSUPPORTED and say why.
 *
 * --end none: each rank frees its buffer and finalizes as soon as its own
 * call returned, with no barrier first (the receiver's goodbye must not
 * overtake what the sender still waits for).
 *
 * --rounds N: N times, each rank allocates its buffer, moves fresh data
 * and frees it (a new allocation at a freed one's address must not reach
 * the freed memory through a mapping a peer kept).  --remap 1: the user's
 * VMM kinds keep their reservation and first allocation from round to
 * round and map new allocations after it (as PyTorch's expandable
 * segments do): a mapping of the old ones must not be reused.
 *
 * --iters N repeats the transfer N times and has the receiver print the
 * bandwidth of all but the first (which makes the mappings, streams and
 * registrations); a sanity figure, not a benchmark.
 *
 * Exits 77 (in the launching process, before any rank starts) when the
 * CUDA backend cannot open here, or split asks for a second device. */
#include <time.h>
#include <unistd.h>

#include "cudatest.h"

#define GUARD 64

enum { TAG_SEED = 1, TAG_DATA = 7 };

typedef enum {
    K_DEV,
    K_VMM,
    K_HOST,
    K_HOSTMEM,
    K_UVMM,
    K_UVMM2,
    K_UVMMN,
    K_UVMMX,
    K_UVMM0,
    K_POOL,
    K_SPOOL,
    K_NKINDS
} kind_t;

typedef struct cfg {
    size_t size, soff, roff;
    ipcp_path_t path;
    kind_t send, recv;
    int split;
    int isolated;
    int kill; /* 0, or 1 + the rank that dies (0 sender, 1 receiver) */
    long iters;
    int end_barrier; /* 0: each rank finalizes as soon as its side ended */
    long rounds;     /* buffers allocated, moved and freed this often */
    int remap;       /* the user's VMM kinds keep their first allocation */
    int keep;        /* this round's buffer is remapped in the next */
} cfg_t;

/* Most allocations an export carries (IPCP_EXPORT_MAX_FDS). */
#define MAX_PIECES 64

/* ---- Arguments ----------------------------------------------------------- */

static kind_t parse_kind(const char *s)
{
    static const char *const names[K_NKINDS] = {
        "dev",   "vmm",   "host",  "hostmem", "uvmm", "uvmm2",
        "uvmmn", "uvmmx", "uvmm0", "pool",    "spool"};
    for (int i = 0; i < K_NKINDS; i++)
        if (strcmp(s, names[i]) == 0)
            return (kind_t)i;
    T_FAIL("unknown buffer kind \"%s\" (dev, vmm, host, hostmem, uvmm, "
           "uvmm2, uvmmn, uvmmx, uvmm0, pool, spool)",
           s);
}

static int is_uvmm(kind_t k)
{
    return k == K_UVMM || k == K_UVMM2 || k == K_UVMMN || k == K_UVMMX ||
           k == K_UVMM0;
}

static int is_pool(kind_t k)
{
    return k == K_POOL || k == K_SPOOL;
}

static int is_device(kind_t k)
{
    return k == K_DEV || k == K_VMM || is_uvmm(k) || is_pool(k);
}

/* The granule of VMM allocations on device 0 (uvmmn's piece). */
static size_t vmm_granule(void)
{
    CUmemAllocationProp prop;
    size_t gran;
    ct_vmm_prop(&prop, 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, &gran);
    return gran;
}

/* uvmmn: where the buffer starts in its first granule, and how many
 * granules hold total bytes from there. */
static size_t uvmmn_start(size_t gran, size_t total)
{
    return total >= gran ? gran / 2 : gran - total / 2;
}

static size_t uvmmn_pieces(size_t gran, size_t total)
{
    return (uvmmn_start(gran, total) + total + gran - 1) / gran;
}

/* Device memory the other process can map (the direct path's condition on
 * at least one side); total: the buffer's bytes with its guards. */
static int exportable(kind_t k, size_t total)
{
    if (k == K_UVMMN)
        return uvmmn_pieces(vmm_granule(), total) <= MAX_PIECES;
    return k == K_DEV || k == K_VMM || k == K_UVMM || k == K_UVMM2 ||
           k == K_SPOOL;
}

static cfg_t parse(int argc, char **argv)
{
    cfg_t c;
    const char *p = ct_opt(argc, argv, "--path", "auto");
    const char *d = ct_opt(argc, argv, "--devices", "same");
    c.size = t_parse_size(ct_opt(argc, argv, "--size", "4095"));
    c.soff = t_parse_size(ct_opt(argc, argv, "--soff", "0"));
    c.roff = t_parse_size(ct_opt(argc, argv, "--roff", "0"));
    c.send = parse_kind(ct_opt(argc, argv, "--send", "vmm"));
    c.recv = parse_kind(ct_opt(argc, argv, "--recv", "vmm"));
    c.iters = atol(ct_opt(argc, argv, "--iters", "1"));
    c.rounds = atol(ct_opt(argc, argv, "--rounds", "1"));
    c.remap = atoi(ct_opt(argc, argv, "--remap", "0")) != 0;
    c.keep = 0;
    if (c.rounds < 1)
        T_FAIL("--rounds must be at least 1");
    const char *e = ct_opt(argc, argv, "--end", "barrier");
    if (strcmp(e, "barrier") != 0 && strcmp(e, "none") != 0)
        T_FAIL("unknown --end \"%s\" (barrier, none)", e);
    c.end_barrier = strcmp(e, "barrier") == 0;
    if (c.iters < 1)
        T_FAIL("--iters must be at least 1");
    if (strcmp(p, "direct") == 0)
        c.path = IPCP_PATH_DIRECT;
    else if (strcmp(p, "staged") == 0)
        c.path = IPCP_PATH_STAGED;
    else if (strcmp(p, "bounce") == 0)
        c.path = IPCP_PATH_BOUNCE;
    else if (strcmp(p, "auto") == 0)
        c.path = IPCP_PATH_AUTO;
    else
        T_FAIL("unknown path \"%s\" (direct, staged, bounce, auto)", p);
    if (strcmp(d, "same") != 0 && strcmp(d, "split") != 0 &&
        strcmp(d, "isolated") != 0)
        T_FAIL("unknown --devices \"%s\" (same, split, isolated)", d);
    c.split = strcmp(d, "split") == 0;
    c.isolated = strcmp(d, "isolated") == 0;
    const char *k = ct_opt(argc, argv, "--kill", "none");
    c.kill = strcmp(k, "sender") == 0     ? 1
             : strcmp(k, "receiver") == 0 ? 2
             : strcmp(k, "none") == 0     ? 0
                                          : -1;
    if (c.kill < 0)
        T_FAIL("unknown --kill \"%s\" (sender, receiver)", k);
    if (!is_device(c.send) && !is_device(c.recv))
        T_FAIL("host to host is tested in tests/api");
    return c;
}

/* ---- Buffers ------------------------------------------------------------- */

typedef struct buf {
    kind_t kind;
    unsigned char *base; /* off + len + GUARD bytes */
    size_t total, off, len;
    /* The user's VMM kinds: the reservation, and its allocations */
    CUdeviceptr va;
    size_t va_size, piece;
    CUmemGenericAllocationHandle h[2 * MAX_PIECES];
    int nh;
    CUmemoryPool pool; /* spool: the pool made for it */
} buf_t;

static void buf_write(const buf_t *b, size_t at, const void *h, size_t n)
{
    if (!n)
        return;
    if (is_device(b->kind)) {
        ct_htod((CUdeviceptr)(uintptr_t)(b->base + at), h, n);
    } else {
        memcpy(b->base + at, h, n);
    }
}

static void buf_read(const buf_t *b, size_t at, void *h, size_t n)
{
    if (!n)
        return;
    if (is_device(b->kind))
        CU_OK(IPCP_CU(cuMemcpyDtoH)(h, (CUdeviceptr)(uintptr_t)(b->base + at),
                                    n));
    else
        memcpy(h, b->base + at, n);
}

/* Bytes of the user's VMM allocation i (uvmmx: the second is twice the
 * first). */
static size_t uvmm_piece(const buf_t *b, int i)
{
    return b->kind == K_UVMMX && i == 1 ? 2 * b->piece : b->piece;
}

/* The layout of the user's VMM kinds: allocations of b->piece bytes (nh
 * of them), and where the buffer starts in the first. */
static size_t uvmm_layout(buf_t *b, size_t gran)
{
    size_t at = 0, need = b->total;
    b->nh = 1;
    if (b->kind == K_UVMMN) {
        b->piece = gran;
        b->nh = (int)uvmmn_pieces(gran, b->total);
        return uvmmn_start(gran, b->total);
    }
    if (b->kind == K_UVMM2 || b->kind == K_UVMMX) {
        /* Two allocations: the buffer's middle byte sits at the seam. */
        b->nh = 2;
        need = b->total / 2 + 1;
    }
    b->piece = (need + gran - 1) / gran * gran;
    if (b->nh == 2)
        at = b->piece - b->total / 2;
    return at;
}

/* Maps new allocations as pieces from..nh of b's reservation. */
static void uvmm_map(buf_t *b, const CUmemAllocationProp *prop, int from)
{
    CUmemAccessDesc acc;
    size_t at = 0;
    memset(&acc, 0, sizeof(acc));
    acc.location = prop->location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (int i = 0; i < b->nh; i++) {
        size_t n = uvmm_piece(b, i);
        if (i >= from) {
            CU_OK(IPCP_CU(cuMemCreate)(&b->h[i], n, prop, 0));
            CU_OK(IPCP_CU(cuMemMap)(b->va + at, n, 0, b->h[i], 0));
            CU_OK(IPCP_CU(cuMemSetAccess)(b->va + at, n, &acc, 1));
        }
        at += n;
    }
}

/* What --remap keeps from one round to the next: the reservation and its
 * first allocation. */
static buf_t uvmm_kept;

/* The user's VMM memory (kinds uvmm*), readable and writable by device;
 * with --remap, the reservation and first allocation of the round before
 * when there was one. */
static void *uvmm_alloc(buf_t *b, int device)
{
    CUmemAllocationProp prop;
    size_t gran;
    ct_vmm_prop(&prop, device,
                b->kind == K_UVMM0 ? 0
                                   : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                &gran);
    size_t at = uvmm_layout(b, gran);
    if (b->nh > 2 * MAX_PIECES)
        T_FAIL("%zu bytes would take %d allocations of %zu", b->total, b->nh,
               b->piece);
    b->va_size = 0;
    for (int i = 0; i < b->nh; i++)
        b->va_size += uvmm_piece(b, i);
    if (uvmm_kept.va) {
        b->va = uvmm_kept.va;
        b->h[0] = uvmm_kept.h[0];
        uvmm_map(b, &prop, 1);
        uvmm_kept.va = 0;
    } else {
        CU_OK(IPCP_CU(cuMemAddressReserve)(&b->va, b->va_size, 0, 0, 0));
        uvmm_map(b, &prop, 0);
    }
    return (void *)(uintptr_t)(b->va + at);
}

/* cudaMallocAsync's memory (kinds pool, spool), made ready before use. */
static void *pool_alloc(buf_t *b, int device)
{
    CUdeviceptr d;
    b->pool = NULL;
    if (b->kind == K_SPOOL) {
        CUmemPoolProps pp;
        memset(&pp, 0, sizeof(pp));
        pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        pp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        pp.location.id = device;
        CU_OK(IPCP_CU(cuMemPoolCreate)(&b->pool, &pp));
        CU_OK(IPCP_CU(cuMemAllocFromPoolAsync)(&d, b->total, b->pool, NULL));
    } else {
        CU_OK(IPCP_CU(cuMemAllocAsync)(&d, b->total, NULL));
    }
    CU_OK(IPCP_CU(cuStreamSynchronize)(NULL));
    return (void *)(uintptr_t)d;
}

static void pool_free(buf_t *b)
{
    CU_OK(IPCP_CU(cuMemFreeAsync)((CUdeviceptr)(uintptr_t)b->base, NULL));
    CU_OK(IPCP_CU(cuStreamSynchronize)(NULL));
    if (b->pool)
        CU_OK(IPCP_CU(cuMemPoolDestroy)(b->pool));
}

/* Unmaps and releases the allocations (keep: all but the first, which
 * stays mapped with the reservation for the next round). */
static void uvmm_free(buf_t *b, int keep)
{
    size_t at = 0;
    keep = keep && b->nh > 1;
    for (int i = 0; i < b->nh; i++) {
        size_t n = uvmm_piece(b, i);
        if (!keep || i > 0) {
            CU_OK(IPCP_CU(cuMemUnmap)(b->va + at, n));
            CU_OK(IPCP_CU(cuMemRelease)(b->h[i]));
        }
        at += n;
    }
    if (keep)
        uvmm_kept = *b;
    else
        CU_OK(IPCP_CU(cuMemAddressFree)(b->va, b->va_size));
}

/* Allocates, fills everything with the guard pattern, then [off, off+len)
 * with the data pattern when data_seed is not 0. */
static void *buf_alloc(ipcp_comm_t *comm, buf_t *b, kind_t kind, size_t len,
                       size_t off, int device, uint64_t guard_seed,
                       uint64_t data_seed)
{
    ipcp_alloc_params_t p;
    void *ptr = NULL;
    b->kind = kind;
    b->off = off;
    b->len = len;
    b->total = off + len + GUARD;
    ipcp_alloc_params_init(&p);
    if (kind == K_DEV) {
        CUdeviceptr d;
        CU_OK(IPCP_CU(cuMemAlloc)(&d, b->total));
        ptr = (void *)(uintptr_t)d;
    } else if (is_uvmm(kind)) {
        ptr = uvmm_alloc(b, device);
    } else if (is_pool(kind)) {
        ptr = pool_alloc(b, device);
    } else if (kind == K_HOST) {
        ptr = t_malloc(b->total);
    } else {
        p.type = kind == K_VMM ? IPCP_MEM_CUDA : IPCP_MEM_HOST;
        p.device = device;
        T_OK(ipcp_mem_alloc(comm, b->total, &p, &ptr));
    }
    b->base = ptr;
    unsigned char *h = t_malloc(b->total);
    ipcp_pattern_fill(h, b->total, guard_seed, 0);
    if (data_seed)
        ipcp_pattern_fill(h + off, len, data_seed, 0);
    buf_write(b, 0, h, b->total);
    free(h);
    return b->base + off;
}

static void buf_free(ipcp_comm_t *comm, buf_t *b, int keep)
{
    if (b->kind == K_DEV)
        CU_OK(IPCP_CU(cuMemFree)((CUdeviceptr)(uintptr_t)b->base));
    else if (is_uvmm(b->kind))
        uvmm_free(b, keep);
    else if (is_pool(b->kind))
        pool_free(b);
    else if (b->kind == K_HOST)
        free(b->base);
    else
        T_OK(ipcp_mem_free(comm, b->base));
}

static void check_range(const unsigned char *h, size_t len, uint64_t seed,
                        uint64_t off, const char *what)
{
    size_t bad = ipcp_pattern_check(h, len, seed, off);
    if (bad != len)
        T_FAIL("%s: byte %zu of %zu differs: expected 0x%02x, got 0x%02x", what,
               bad, len, ipcp_pattern_byte(seed, off + bad), h[bad]);
}

/* The data, and the guard bytes on both sides of it. */
static void buf_verify(const buf_t *b, uint64_t guard_seed, uint64_t seed,
                       const char *what)
{
    char name[128];
    unsigned char *h = t_malloc(b->total);
    buf_read(b, 0, h, b->total);
    snprintf(name, sizeof name, "%s (bytes before it)", what);
    check_range(h, b->off, guard_seed, 0, name);
    check_range(h + b->off, b->len, seed, 0, what);
    snprintf(name, sizeof name, "%s (bytes after it)", what);
    check_range(h + b->off + b->len, GUARD, guard_seed, b->off + b->len, name);
    free(h);
}

static void buf_verify_untouched(const buf_t *b, uint64_t guard_seed,
                                 const char *what)
{
    unsigned char *h = t_malloc(b->total);
    buf_read(b, 0, h, b->total);
    check_range(h, b->total, guard_seed, 0, what);
    free(h);
}

/* ---- Ranks --------------------------------------------------------------- */

static void drop_device(int device)
{
    CUdevice dev;
    CU_OK(IPCP_CU(cuDeviceGet)(&dev, device));
    CU_OK(IPCP_CU(cuDevicePrimaryCtxRelease)(dev));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether a direct path can serve the transfer: device memory on both
 * sides, a sender that can reach the receiver's GPU, and one side that
 * the other can map (the receiver copies out of the sender's allocation,
 * unless IPCPIPE_DRIVE=off, or the sender into the receiver's). */
static int direct_possible(const cfg_t *c)
{
    const char *drive = getenv("IPCPIPE_DRIVE");
    int drives = !drive || strcmp(drive, "off") != 0;
    /* The receiver's copy runs on the sender's GPU, which may write the
     * user's VMM or pool memory only where its mapping or pool grants it
     * (ours grant every GPU; these grant their own). */
    int writable = !c->split || !(is_uvmm(c->recv) || is_pool(c->recv));
    size_t rtotal = c->roff + c->size + GUARD,
           stotal = c->soff + c->size + GUARD;
    return is_device(c->recv) && is_device(c->send) && !c->isolated &&
           (exportable(c->recv, rtotal) ||
            (drives && writable && exportable(c->send, stotal)));
}

/* Whether the bounce path can serve it: device memory on both sides, and
 * a sender that can reach the receiver's GPU. */
static int bounce_possible(const cfg_t *c)
{
    return is_device(c->recv) && is_device(c->send) && !c->isolated;
}

/* Whether the receiver's forced path can serve the transfer. */
static int expect_ok(const cfg_t *c)
{
    if (c->path == IPCP_PATH_DIRECT)
        return direct_possible(c);
    if (c->path == IPCP_PATH_BOUNCE && is_device(c->send) && is_device(c->recv))
        return bounce_possible(c);
    return 1; /* a forced bounce path leaves host memory to auto */
}

/* The victim of --kill: posts its side, lets the transfer start, dies. */
static void die_mid_transfer(ipcp_comm_t *comm, const cfg_t *c, void *p)
{
    ipcp_request_t *req;
    if (t_rank == 0)
        T_OK(ipcp_isend(comm, p, c->size, 1, TAG_DATA, &req));
    else
        T_OK(ipcp_irecv(comm, p, c->size, 0, TAG_DATA, &req));
    usleep(1000);
    kill(getpid(), SIGKILL);
    T_FAIL("still alive after SIGKILL");
}

/* The survivor of --kill: its call fails with PEER_LOST within the
 * timeout, and finalize (which drains the device queues) returns.  A
 * receiver that copies out of the sender's buffer by itself (IPCPIPE_DRIVE)
 * may finish before it notices the loss (4 GiB on one GPU takes a few ms):
 * its receive then completes, with every byte (b: the receive buffer,
 * gseed its guard bytes', seed the data's). */
static void survive(ipcp_comm_t *comm, const cfg_t *c, void *p, const buf_t *b,
                    uint64_t gseed, uint64_t seed)
{
    double t0 = now_s();
    ipcp_status_t st = t_rank == 0
                           ? ipcp_send(comm, p, c->size, 1, TAG_DATA)
                           : ipcp_recv(comm, p, c->size, 0, TAG_DATA, NULL);
    double dt = now_s() - t0;
    if (st == IPCP_OK && b) {
        buf_verify(b, gseed, seed, "receive that ended before the loss");
        printf("rank %d: the receive ended before the loss was noticed, "
               "every byte in place\n",
               t_rank);
    } else {
        T_STATUS(st, IPCP_ERR_PEER_LOST);
        T_MSG_HAS("lost");
    }
    if (dt > 10.0)
        T_FAIL("PEER_LOST came after %.1f s", dt);
    printf("rank %d: %s after %.3f s: %s\n", t_rank, ipcp_strerror(st), dt,
           ipcp_last_error());
    t0 = now_s();
    T_OK(ipcp_finalize(comm));
    if (now_s() - t0 > 15.0)
        T_FAIL("finalize after a lost peer took %.1f s", now_s() - t0);
}

static void run_sender(ipcp_comm_t *comm, const cfg_t *c, int device,
                       uint64_t seed)
{
    buf_t b;
    uint64_t gseed = t_fresh_seed();
    void *p =
        buf_alloc(comm, &b, c->send, c->size, c->soff, device, gseed, seed);
    ipcp_status_t st = IPCP_OK;
    if (c->kill) {
        T_OK(ipcp_barrier(comm));
        if (c->kill == 1)
            die_mid_transfer(comm, c, p);
        survive(comm, c, p, NULL, 0, 0);
        return;
    }
    for (long i = 0; i < c->iters && st == IPCP_OK; i++) {
        T_OK(ipcp_barrier(comm));
        st = ipcp_send(comm, p, c->size, 1, TAG_DATA);
    }
    if (expect_ok(c))
        T_STATUS(st, IPCP_OK);
    else
        T_STATUS(st, IPCP_ERR_UNSUPPORTED);
    buf_verify(&b, gseed, seed, "send buffer after the send");
    if (c->end_barrier)
        T_OK(ipcp_barrier(comm));
    buf_free(comm, &b, c->keep);
}

static void run_receiver(ipcp_comm_t *comm, const cfg_t *c, int device,
                         uint64_t seed)
{
    buf_t b;
    uint64_t gseed = t_fresh_seed();
    ipcp_xfer_info_t info = {(size_t)-1, IPCP_PATH_AUTO};
    void *p = buf_alloc(comm, &b, c->recv, c->size, c->roff, device, gseed, 0);
    ipcp_status_t st = IPCP_OK;
    double t0 = 0;
    if (c->kill) {
        T_OK(ipcp_barrier(comm));
        if (c->kill == 2)
            die_mid_transfer(comm, c, p);
        survive(comm, c, p, &b, gseed, seed);
        return;
    }
    for (long i = 0; i < c->iters && st == IPCP_OK; i++) {
        T_OK(ipcp_barrier(comm));
        if (i == 1)
            t0 = now_s();
        st = ipcp_recv(comm, p, c->size, 0, TAG_DATA, &info);
    }
    if (c->iters > 1 && st == IPCP_OK)
        printf("%zu bytes x %ld by the %s path: %.1f GB/s\n", c->size,
               c->iters - 1, ipcp_path_name(info.path),
               (double)c->size * (double)(c->iters - 1) / (now_s() - t0) / 1e9);
    if (!expect_ok(c)) {
        T_STATUS(st, IPCP_ERR_UNSUPPORTED);
        T_MSG_HAS(c->path == IPCP_PATH_BOUNCE ? "bounce path was forced"
                                              : "direct path was forced");
        buf_verify_untouched(&b, gseed,
                             "receive buffer of a refused "
                             "transfer");
    } else {
        T_STATUS(st, IPCP_OK);
        T_EQ_U64(info.nbytes, c->size);
        if (c->path == IPCP_PATH_DIRECT)
            T_EQ_INT(info.path,
                     ct_direct_path(c->size, c->split && is_device(c->send) &&
                                                 is_device(c->recv)));
        else if (c->path == IPCP_PATH_BOUNCE &&
                 (!is_device(c->send) || !is_device(c->recv)))
            T_EQ_INT(info.path, IPCP_PATH_STAGED); /* host and device */
        else if (c->path != IPCP_PATH_AUTO)
            T_EQ_INT(info.path, c->path);
        else if (c->isolated && c->size > 65536) /* IPCPIPE_EAGER */
            T_EQ_INT(info.path, IPCP_PATH_STAGED);
        else if ((is_uvmm(c->send) || is_uvmm(c->recv) || is_pool(c->send) ||
                  is_pool(c->recv)) &&
                 !c->split)
            /* Never a silent fall-back: mappable memory goes direct,
             * other device memory through the device ring. */
            T_EQ_INT(info.path, direct_possible(c)   ? IPCP_PATH_DIRECT
                                : bounce_possible(c) ? IPCP_PATH_BOUNCE
                                                     : IPCP_PATH_STAGED);
        else
            T_CHECK(info.path != IPCP_PATH_AUTO);
        buf_verify(&b, gseed, seed, "received data");
    }
    if (c->end_barrier)
        T_OK(ipcp_barrier(comm));
    buf_free(comm, &b, c->keep);
}

static int rank_main(int argc, char **argv)
{
    cfg_t c = parse(argc, argv);
    ipcp_comm_t *comm = NULL;
    uint64_t seed = 0;
    T_OK(ipcp_init(NULL, &comm));
    t_rank = ipcp_comm_rank(comm);
    int device = c.split ? t_rank : 0;
    (void)ct_use_device(device);
    /* The seed goes first, on the default path; then the receiver forces
     * its path (peers learn it before our later messages). */
    seed = t_shared_seed(comm, TAG_SEED);
    if (t_rank == 1)
        T_OK(ipcp_comm_set_path(comm, c.path));
    T_OK(ipcp_barrier(comm));
    for (long r = 0; r < c.rounds; r++) {
        uint64_t rseed = seed + 0x9e3779b97f4a7c15ull * (uint64_t)r;
        c.keep = c.remap && r + 1 < c.rounds;
        if (t_rank == 0)
            run_sender(comm, &c, device, rseed);
        else
            run_receiver(comm, &c, device, rseed);
    }
    if (!c.kill)
        T_OK(ipcp_finalize(comm));
    drop_device(device);
    return 0;
}

static void isolate(int rank, void *arg)
{
    char v[16];
    (void)arg;
    snprintf(v, sizeof v, "%d", rank);
    setenv("CUDA_VISIBLE_DEVICES", v, 1);
}

int main(int argc, char **argv)
{
    if (!ipcp_launch_is_rank()) {
        cfg_t c = parse(argc, argv);
        int rc = ct_check_machine(c.split || c.isolated ? 2 : 1);
        if (rc)
            return rc;
        /* A rank meant to die, or ranks that each see only their GPU. */
        if (c.kill || c.isolated)
            return t_launch2(argv, c.kill - 1, c.isolated ? isolate : NULL,
                             NULL);
    }
    return t_mp_main(argc, argv, 2, 240, rank_main);
}
