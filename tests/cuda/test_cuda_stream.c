/* Stream-ordered transfers (ipcpipe_cuda.h) between two processes: each side
 * holds its stream on a gate (a wait on a host flag the test opens 20 ms
 * later), so that any transfer that did not wait for the stream's earlier
 * work would move stale data; and enqueues work after the call that would
 * clobber the buffer if the transfer did not finish first.
 *
 *   test_cuda_stream --op sendrecv|put|get --stream user|legacy|perthread
 *       --path direct|staged|auto --devices same|split --size S [--iters N]
 *       [--kill sender|receiver]
 *
 * Rank 0 is the source (sends, puts, or owns the region a get reads), rank
 * 1 the destination.  Every byte is checked, for fresh data each iteration.
 * --kill: that rank dies after posting; the survivor's request fails with
 * IPCP_ERR_PEER_LOST and its stream is released (synchronizes in time).
 * With IPCPIPE_SMALL at least --size the small-message lane moves them
 * (engine/lane.c); a lane send may then complete before the loss. */
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "cudatest.h"
#include "ipcpipe_cuda.h"

enum { TAG_SEED = 1, TAG_DESC = 2, TAG_DATA = 7, TAG_DONE = 8 };
enum { OP_SENDRECV, OP_PUT, OP_GET };

typedef struct cfg {
    int op;
    int stream_kind; /* 0 user, 1 legacy (NULL), 2 per-thread */
    ipcp_path_t path;
    int split;
    size_t size;
    long iters;
    int kill; /* 0, or 1 + the rank that dies */
} cfg_t;

static int pick(const char *v, const char *const *names, int n,
                const char *what)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    T_FAIL("unknown %s \"%s\"", what, v);
}

static cfg_t parse(int argc, char **argv)
{
    static const char *const ops[] = {"sendrecv", "put", "get"};
    static const char *const streams[] = {"user", "legacy", "perthread"};
    static const char *const paths[] = {"auto", "direct", "staged"};
    static const char *const devs[] = {"same", "split"};
    static const char *const kills[] = {"none", "sender", "receiver"};
    cfg_t c;
    c.op = pick(ct_opt(argc, argv, "--op", "sendrecv"), ops, 3, "--op");
    c.stream_kind =
        pick(ct_opt(argc, argv, "--stream", "user"), streams, 3, "--stream");
    c.path = (ipcp_path_t)pick(ct_opt(argc, argv, "--path", "auto"), paths, 3,
                               "--path");
    c.split =
        pick(ct_opt(argc, argv, "--devices", "same"), devs, 2, "--devices");
    c.size = t_parse_size(ct_opt(argc, argv, "--size", "1M+3"));
    c.iters = atol(ct_opt(argc, argv, "--iters", "3"));
    c.kill = pick(ct_opt(argc, argv, "--kill", "none"), kills, 3, "--kill");
    if (c.iters < 1 || c.size == 0)
        T_FAIL("--iters and --size must be positive");
    return c;
}

/* Whether the small-message lane (IPCPIPE_SMALL) moves the transfers. */
static int lane_takes(const cfg_t *c)
{
    const char *v = getenv("IPCPIPE_SMALL");
    return c->op == OP_SENDRECV && v && t_parse_size(v) >= c->size;
}

/* ---- Device helpers ------------------------------------------------------ */

typedef struct side {
    CUcontext ctx;
    CUstream stream;     /* what the test passes (may be NULL or 0x2) */
    CUstream own;        /* created when --stream user */
    CUdeviceptr buf;     /* from ipcp_mem_alloc (VMM) */
    unsigned char *host; /* pinned staging, size bytes */
    uint64_t *gate;      /* pinned: the stream waits for it */
} side_t;

static void side_init(ipcp_comm_t *comm, side_t *s, const cfg_t *c, int device)
{
    ipcp_alloc_params_t p;
    void *ptr;
    s->ctx = ct_use_device(device);
    s->own = NULL;
    if (c->stream_kind == 0) {
        CU_OK(IPCP_CU(cuStreamCreate)(&s->own, CU_STREAM_NON_BLOCKING));
        s->stream = s->own;
    } else {
        s->stream = c->stream_kind == 1 ? NULL : CU_STREAM_PER_THREAD;
    }
    ipcp_alloc_params_init(&p);
    p.type = IPCP_MEM_CUDA;
    p.device = device;
    T_OK(ipcp_mem_alloc(comm, c->size, &p, &ptr));
    s->buf = (CUdeviceptr)(uintptr_t)ptr;
    s->host = t_malloc(c->size + 4096);
    s->gate = t_malloc(4096);
    *s->gate = 0;
    CU_OK(IPCP_CU(cuMemHostRegister)(s->host, c->size + 4096, 0));
    CU_OK(IPCP_CU(cuMemHostRegister)(s->gate, 4096, 0));
}

static void side_fini(ipcp_comm_t *comm, side_t *s)
{
    CU_OK(IPCP_CU(cuMemHostUnregister)(s->host));
    CU_OK(IPCP_CU(cuMemHostUnregister)(s->gate));
    free(s->host);
    free(s->gate);
    T_OK(ipcp_mem_free(comm, (void *)(uintptr_t)s->buf));
    if (s->own)
        CU_OK(IPCP_CU(cuStreamDestroy)(s->own));
}

/* Holds the stream until gate_open: work the test enqueues next would
 * otherwise run at once and hide an ordering bug. */
static void gate_close(side_t *s, uint64_t i)
{
    CU_OK(IPCP_CU(cuStreamWaitValue64)(s->stream,
                                       (CUdeviceptr)(uintptr_t)s->gate, i,
                                       CU_STREAM_WAIT_VALUE_GEQ));
}

static void gate_open(side_t *s, uint64_t i)
{
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    __atomic_store_n(s->gate, i, __ATOMIC_RELEASE);
}

static void sync_within(side_t *s, double limit_s, const char *what)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CU_OK(IPCP_CU(cuStreamSynchronize)(s->stream));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt =
        (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    if (dt > limit_s)
        T_FAIL("%s: the stream took %.1f s to drain", what, dt);
}

/* ---- The two roles ------------------------------------------------------- */

/* Source: fresh data arrives in the buffer behind the gate, the transfer
 * is ordered after it, and a memset after the call would clobber the data
 * of a transfer still reading. */
static void source_iter(ipcp_comm_t *comm, side_t *s, const cfg_t *c,
                        ipcp_rmem_t *rm, uint64_t seed, long i)
{
    ipcp_request_t *req = NULL;
    t_fill(s->host, c->size, seed + (uint64_t)i);
    gate_close(s, (uint64_t)i + 1);
    CU_OK(IPCP_CU(cuMemcpyHtoDAsync)(s->buf, s->host, c->size, s->stream));
    if (c->op == OP_SENDRECV)
        T_OK(ipcp_isend_on_stream(comm, (void *)(uintptr_t)s->buf, c->size, 1,
                                  TAG_DATA, s->stream, &req));
    else if (c->op == OP_PUT)
        T_OK(ipcp_iput_on_stream(comm, (void *)(uintptr_t)s->buf, c->size, rm,
                                 0, s->stream, &req));
    if (req)
        CU_OK(IPCP_CU(cuMemsetD8Async)(s->buf, 0xEE, c->size, s->stream));
    if (c->kill == 1) {
        usleep(1000);
        kill(getpid(), SIGKILL);
    }
    gate_open(s, (uint64_t)i + 1);
    if (req) {
        ipcp_status_t st = ipcp_wait(req, NULL);
        if (c->kill == 2 && lane_takes(c) && st == IPCP_OK) {
            /* A lane send is done once its bytes are in the peer's GPU
             * memory, which its kernel does without asking the peer. */
        } else if (c->kill == 2) {
            T_STATUS(st, IPCP_ERR_PEER_LOST);
        } else {
            T_OK(st);
        }
    }
    sync_within(s, 20, "source");
    if (c->op == OP_PUT && !c->kill) /* tell the owner the data is there */
        T_OK(ipcp_send(comm, &i, sizeof i, 1, TAG_DONE));
}

/* Destination: a poison written behind the gate must not land after the
 * data (a receive not ordered after it would be clobbered), and the copy
 * to the host enqueued after the call must see the data. */
static void dest_iter(ipcp_comm_t *comm, side_t *s, const cfg_t *c,
                      ipcp_rmem_t *rm, uint64_t seed, long i)
{
    ipcp_request_t *req = NULL;
    memset(s->host, 0x11, c->size);
    if (c->op == OP_PUT) {
        /* One-sided: the target's stream takes no part; the origin says
         * when its put (complete at the target) is done. */
        T_OK(ipcp_recv(comm, &i, sizeof i, 0, TAG_DONE, NULL));
        CU_OK(IPCP_CU(cuMemcpyDtoH)(s->host, s->buf, c->size));
        t_verify(s->host, c->size, seed + (uint64_t)i, "data after the put");
        return;
    }
    gate_close(s, (uint64_t)i + 1);
    CU_OK(IPCP_CU(cuMemsetD8Async)(s->buf, 0x5A, c->size, s->stream));
    if (c->op == OP_SENDRECV)
        T_OK(ipcp_irecv_on_stream(comm, (void *)(uintptr_t)s->buf, c->size, 0,
                                  TAG_DATA, s->stream, &req));
    else
        T_OK(ipcp_iget_on_stream(comm, (void *)(uintptr_t)s->buf, c->size, rm,
                                 0, s->stream, &req));
    CU_OK(IPCP_CU(cuMemcpyDtoHAsync)(s->host, s->buf, c->size, s->stream));
    if (c->kill == 2) {
        usleep(1000);
        kill(getpid(), SIGKILL);
    }
    gate_open(s, (uint64_t)i + 1);
    if (req) {
        ipcp_status_t st = ipcp_wait(req, NULL);
        if (c->kill == 1) {
            T_STATUS(st, IPCP_ERR_PEER_LOST);
            sync_within(s, 20, "destination after the loss");
            return;
        }
        T_OK(st);
    }
    sync_within(s, 20, "destination");
    t_verify(s->host, c->size, seed + (uint64_t)i,
             "data after the ordered "
             "transfer");
}

static int rank_main(int argc, char **argv)
{
    cfg_t c = parse(argc, argv);
    ipcp_comm_t *comm = NULL;
    uint64_t seed = 0;
    side_t s;
    ipcp_mem_t *mem = NULL;
    ipcp_rmem_t *rm = NULL;
    unsigned char desc[IPCP_DESC_MAX];
    size_t dlen = 0;

    T_OK(ipcp_init(NULL, &comm));
    t_rank = ipcp_comm_rank(comm);
    side_init(comm, &s, &c, c.split ? t_rank : 0);
    seed = t_shared_seed(comm, TAG_SEED);
    if (t_rank == 1)
        T_OK(ipcp_comm_set_path(comm, c.path));
    /* put: rank 1 owns the region; get: rank 0 owns it. */
    int owner = c.op == OP_PUT ? 1 : c.op == OP_GET ? 0 : -1;
    if (owner == t_rank) {
        T_OK(ipcp_mem_register(comm, (void *)(uintptr_t)s.buf, c.size, &mem));
        T_OK(ipcp_mem_pack(mem, desc, sizeof desc, &dlen));
        T_OK(ipcp_send(comm, desc, dlen, 1 - t_rank, TAG_DESC));
    } else if (owner >= 0) {
        ipcp_xfer_info_t info;
        T_OK(ipcp_recv(comm, desc, sizeof desc, owner, TAG_DESC, &info));
        T_OK(ipcp_rmem_import(comm, desc, info.nbytes, &rm));
        if (c.op == OP_GET) /* the origin forces the path of its gets */
            T_OK(ipcp_comm_set_path(comm, c.path));
    }
    T_OK(ipcp_barrier(comm));
    for (long i = 0; i < c.iters; i++) {
        if (c.op == OP_GET && t_rank == 0) {
            /* The owner of a get: fresh data, then a barrier. */
            t_fill(s.host, c.size, seed + (uint64_t)i);
            ct_htod(s.buf, s.host, c.size);
        }
        if (c.op == OP_GET)
            T_OK(ipcp_barrier(comm));
        if (t_rank == 0 && c.op != OP_GET)
            source_iter(comm, &s, &c, rm, seed, i);
        else if (t_rank == 1)
            dest_iter(comm, &s, &c, rm, seed, i);
        if (c.kill)
            break;
        T_OK(ipcp_barrier(comm));
    }
    if (rm)
        T_OK(ipcp_rmem_release(rm));
    if (mem)
        T_OK(ipcp_mem_deregister(mem));
    if (!c.kill)
        T_OK(ipcp_barrier(comm));
    side_fini(comm, &s);
    T_OK(ipcp_finalize(comm));
    return 0;
}

int main(int argc, char **argv)
{
    if (ipcp_launch_is_rank())
        return t_mp_main(argc, argv, 2, 240, rank_main);
    cfg_t c = parse(argc, argv);
    int rc = ct_check_machine(c.split ? 2 : 1);
    if (rc)
        return rc;
    if (!c.kill)
        return t_mp_main(argc, argv, 2, 240, rank_main);
    return t_launch2(argv, c.kill - 1, NULL, NULL);
}
