/* A path that lives in this file alone: what adding a path takes
 * (engine/route.h).  The route "peek" serves host-to-host transfers whose
 * sender offered its address: the receiver's progress thread reads the
 * whole buffer at once with process_vm_readv, completes the receive, and
 * ends the send with a DRIVEN CTS (no queues, no channel).  Both ranks add
 * it before ipcp_init, ahead of the table's routes.
 *
 *   moves:    every message above the eager size takes the added route,
 *             every byte arrives, both sides report the direct path.
 *   mismatch: only rank 0 adds it; the hello's protocol differs, so the
 *             ranks never connect and ipcp_init fails on both, rank 0
 *             naming the two protocols. */
#include <errno.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "engine/engine.h"
#include "engine/progress.h"
#include "engine/route.h"
#include "testutil.h"

/* The tags (below 64) of the transfers the route took.  Any message
 * between the two ranks may take it, even a small one: until a peer has
 * said it leaves the path to us, small ones go as an RTS too. */
static _Atomic uint64_t peeked;

static int peek_serves(const ipcp__offer_t *o, const ipcp__config_t *cfg)
{
    (void)cfg;
    return o->len && o->src_addr && !o->sync && o->src_type == IPCP_MEM_HOST &&
           o->dst_type == IPCP_MEM_HOST && o->force != IPCP_PATH_STAGED;
}

/* Declined (the sent route then takes it) when the kernel forbids the
 * read before a byte moved. */
static int peek_start(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                      const ipcp__offer_t *o)
{
    uint64_t got = 0;
    (void)o;
    if (rts->len > req->len)
        return 0;
    while (got < rts->len) {
        struct iovec l = {(char *)req->buf + got, rts->len - got};
        struct iovec r = {(void *)(uintptr_t)(rts->src_offset + got),
                          rts->len - got};
        ssize_t n = process_vm_readv(peer->pid, &l, 1, &r, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 && got == 0)
            return 0;
        if (n <= 0) {
            char why[96];
            snprintf(why, sizeof(why), "peek: process_vm_readv: %s",
                     n < 0 ? strerror(errno) : "read nothing");
            ipcp__req_complete(req, IPCP_ERR_SYSTEM, why);
            ipcp__drive_end(comm, peer, rts->id, IPCP_PATH_DIRECT,
                            IPCP_ERR_SYSTEM, why);
            return 1;
        }
        got += (uint64_t)n;
    }
    req->path = IPCP_PATH_DIRECT;
    req->nbytes = rts->len;
    atomic_fetch_or(&peeked, 1ull << (rts->tag & 63));
    ipcp__req_complete(req, IPCP_OK, NULL);
    ipcp__drive_end(comm, peer, rts->id, IPCP_PATH_DIRECT, IPCP_OK, NULL);
    return 1;
}

static const ipcp__route_t peek = {
    .name = "peek",
    .serves = peek_serves,
    .start = peek_start,
};

#define NMSG 24 /* their tags: 0 .. NMSG - 1 */
enum { TAG_PROBE = 40, TAG_VERDICT = 41 };
/* Above IPCPIPE_EAGER (at most 256 KiB): an RTS the route may take. */
#define PROBE_LEN ((size_t)512 << 10)

static size_t msg_size(int i)
{
    /* From above the eager size to 4 MiB, odd lengths among them. */
    static const size_t sizes[] = {(256 << 10) + 3, 300 << 10, 1 << 20,
                                   (4 << 20) - 1};
    return sizes[i % 4];
}

/* Whether the kernel lets rank 0 read rank 1 (Yama's ptrace scope may
 * forbid it, and IPCPIPE_PVM or IPCPIPE_DRIVE may turn reading off): a
 * first message, and rank 0's verdict to rank 1, so that both ranks skip
 * together where the route can never serve. */
static int peek_works(ipcp_comm_t *comm, unsigned char *buf)
{
    unsigned char verdict = 0;
    if (t_rank == 1) {
        T_OK(ipcp_send(comm, buf, PROBE_LEN, 0, TAG_PROBE));
        T_OK(ipcp_recv(comm, &verdict, 1, 0, TAG_VERDICT, NULL));
    } else {
        T_OK(ipcp_recv(comm, buf, PROBE_LEN, 1, TAG_PROBE, NULL));
        verdict = (atomic_load(&peeked) >> TAG_PROBE) & 1;
        T_OK(ipcp_send(comm, &verdict, 1, 1, TAG_VERDICT));
    }
    return verdict;
}

static void moves(void)
{
    ipcp_comm_t *comm;
    T_EQ_INT(ipcp__route_add(&peek), 0);
    T_OK(ipcp_init(NULL, &comm));
    T_EQ_INT(ipcp__route_add(&peek), -1); /* numbers fixed by the hello */
    t_rank = ipcp_comm_rank(comm);
    unsigned char *buf = t_malloc(4 << 20);
    if (!peek_works(comm, buf)) {
        fprintf(stderr, "SKIP: rank 0 may not read rank 1's memory here\n");
        T_OK(ipcp_finalize(comm));
        exit(77);
    }
    for (int i = 0; i < NMSG; i++) {
        size_t n = msg_size(i);
        ipcp_xfer_info_t info;
        uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        if (t_rank == 1) {
            t_fill(buf, n, seed);
            T_OK(ipcp_send(comm, buf, n, 0, i));
        } else {
            memset(buf, 0xa5, 4 << 20); /* poisoned: stale bytes show */
            T_OK(ipcp_recv(comm, buf, 4 << 20, 1, i, &info));
            T_EQ_U64(info.nbytes, n);
            T_EQ_INT(info.path, IPCP_PATH_DIRECT);
            t_verify(buf, n, seed, "a message on the added route");
        }
    }
    if (t_rank == 0) /* every message rank 1 sent */
        T_EQ_U64(atomic_load(&peeked) & ((1ull << NMSG) - 1),
                 (1ull << NMSG) - 1);
    T_OK(ipcp_barrier(comm));
    T_OK(ipcp_finalize(comm));
    free(buf);
}

static void mismatch(void)
{
    ipcp_comm_t *comm = NULL;
    const char *rank = getenv("IPCPIPE_RANK");
    if (rank && strcmp(rank, "0") == 0)
        T_EQ_INT(ipcp__route_add(&peek), 0);
    ipcp_status_t st = ipcp_init(NULL, &comm);
    T_EQ_INT(st, IPCP_ERR_TIMEOUT);
    T_CHECK(comm == NULL);
    /* The rank that refused says why; the other, that it was refused. */
    T_CHECK(strstr(ipcp_last_error(), rank && strcmp(rank, "0") == 0
                                          ? "protocol 0x"
                                          : "refused our hello"));
}

static const struct {
    const char *name;
    void (*run)(void);
} cases[] = {{"moves", moves}, {"mismatch", mismatch}};

static int pick(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        exit(rc);
    return i;
}

static int rank_main(int argc, char **argv)
{
    cases[pick(argc, argv)].run();
    return 0;
}

int main(int argc, char **argv)
{
    if (!ipcp_launch_is_rank())
        pick(argc, argv);
    return t_mp_main(argc, argv, 2, 60, rank_main);
}
