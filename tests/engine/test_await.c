/* A device send that offered its buffer to the receiver (which may copy it
 * and tell the sender only at the end) keeps the sender polling until its
 * CTS comes, for at most as long as the copy would take at
 * IPCP_AWAIT_BYTES_PER_NS after IPCPIPE_SPIN_US: on 2 x H200 a sleeping
 * sender learned of the end ~30 us after the receiver did.  These cases
 * check the bookkeeping that decides it (engine/comm.c); the time saved is
 * seen on GPUs, in the bench's protocol table (send done). */
#include <pthread.h>
#include <string.h>

#include "common/config.h"
#include "common/time.h"
#include "engine/engine.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

static ipcp__config_t cfg;
static ipcp_comm_t comm;
static ipcp__peer_t peers[2];

static void fake_comm(int spin_us)
{
    memset(&cfg, 0, sizeof(cfg));
    cfg.spin_us = spin_us;
    memset(&comm, 0, sizeof(comm));
    memset(peers, 0, sizeof(peers));
    comm.cfg = &cfg;
    comm.size = 2;
    comm.peers = peers;
    for (int r = 0; r < 2; r++)
        ipcp__list_init(&peers[r].wait_cts);
    pthread_mutex_init(&comm.lock, NULL);
    pthread_cond_init(&comm.cond, NULL);
}

static void fake_comm_end(void)
{
    pthread_cond_destroy(&comm.cond);
    pthread_mutex_destroy(&comm.lock);
}

static void fake_send(ipcp_request_t *req, size_t len)
{
    memset(req, 0, sizeof(*req));
    req->comm = &comm;
    req->type = IPCP_REQ_SEND;
    req->user = 1;
    req->len = len;
    req->attr.type = IPCP_MEM_CUDA;
    ipcp__list_init(&req->link);
}

/* As ipcp__send_rts does: offered, then waiting for its CTS at rank 1. */
static void offer(ipcp_request_t *req)
{
    ipcp__await_offer(&comm, req);
    ipcp__list_push_back(&peers[1].wait_cts, &req->link);
}

/* As a CTS does: out of the list, then the end. */
static void cts(ipcp_request_t *req)
{
    ipcp__list_del(&req->link);
    ipcp__await_end(req);
}

static int offers(void)
{
    return atomic_load(&comm.offers);
}

/* The window: the spin, then len at IPCP_AWAIT_BYTES_PER_NS, from the
 * offer; offering one send twice counts it once. */
static void case_window(void)
{
    ipcp_request_t req;
    fake_comm(50);
    fake_send(&req, 256 * MIB);
    T_EQ_INT(ipcp__awaiting(&comm, ipcp__now_ns()), 0);
    uint64_t t0 = ipcp__now_ns();
    offer(&req);
    uint64_t t1 = ipcp__now_ns();
    uint64_t span = 50 * 1000 + 256 * MIB / IPCP_AWAIT_BYTES_PER_NS;
    T_EQ_INT(offers(), 1);
    T_EQ_INT(ipcp__awaiting(&comm, t1), 1);
    T_EQ_INT(ipcp__awaiting(&comm, t0 + span - 1), 1);
    T_EQ_INT(ipcp__awaiting(&comm, t1 + span), 0);
    ipcp__await_offer(&comm, &req);
    T_EQ_INT(offers(), 1);
    cts(&req);
    T_EQ_INT(offers(), 0);
    T_EQ_INT(ipcp__awaiting(&comm, t1), 0);
    ipcp__await_end(&req); /* a second end changes nothing */
    T_EQ_INT(offers(), 0);
    fake_comm_end();
}

/* Two sends: the window is the later end of the two, and shrinks to the
 * other's when the later one has its CTS (a send whose receive is posted
 * late no longer keeps the sender polling after the others ended). */
static void case_two(void)
{
    ipcp_request_t big, small;
    fake_comm(50);
    fake_send(&big, 1024 * MIB);
    fake_send(&small, 8 * MIB);
    uint64_t t0 = ipcp__now_ns();
    offer(&big);
    offer(&small);
    uint64_t t1 = ipcp__now_ns();
    uint64_t sspan = 50 * 1000 + 8 * MIB / IPCP_AWAIT_BYTES_PER_NS;
    uint64_t bspan = 50 * 1000 + 1024 * MIB / IPCP_AWAIT_BYTES_PER_NS;
    T_EQ_INT(offers(), 2);
    T_EQ_INT(ipcp__awaiting(&comm, t0 + bspan - 1), 1);
    cts(&big);
    T_EQ_INT(offers(), 1);
    T_EQ_INT(ipcp__awaiting(&comm, t0 + sspan - 1), 1);
    T_EQ_INT(ipcp__awaiting(&comm, t1 + sspan), 0);
    /* The other order: the shorter one ending keeps the longer window. */
    offer(&big);
    uint64_t t2 = ipcp__now_ns();
    cts(&small);
    T_EQ_INT(ipcp__awaiting(&comm, t2 + sspan), 1);
    cts(&big);
    T_EQ_INT(offers(), 0);
    T_EQ_INT(ipcp__awaiting(&comm, t2), 0);
    fake_comm_end();
}

/* IPCPIPE_SPIN_US=0: the sender does not poll for its CTS. */
static void case_nospin(void)
{
    ipcp_request_t req;
    fake_comm(0);
    fake_send(&req, 1024 * MIB);
    uint64_t t0 = ipcp__now_ns();
    offer(&req);
    T_EQ_INT(offers(), 0);
    T_EQ_INT(ipcp__awaiting(&comm, t0), 0);
    cts(&req);
    T_EQ_INT(offers(), 0);
    fake_comm_end();
}

/* A send that ends without its CTS (a failure, the peer lost) stops
 * counting as it completes, with its status kept. */
static void case_complete(void)
{
    ipcp_request_t req;
    fake_comm(50);
    fake_send(&req, 64 * MIB);
    uint64_t t0 = ipcp__now_ns();
    offer(&req);
    T_EQ_INT(offers(), 1);
    ipcp__list_del(&req.link);
    ipcp__req_complete(&req, IPCP_ERR_PEER_LOST, "rank 1 is gone");
    T_EQ_INT(offers(), 0);
    T_EQ_INT(ipcp__awaiting(&comm, t0), 0);
    T_EQ_INT(atomic_load(&req.done), 1);
    T_EQ_INT(req.status, IPCP_ERR_PEER_LOST);
    T_EQ_STR(req.errmsg, "rank 1 is gone");
    fake_comm_end();
}

typedef struct {
    const char *name;
    void (*fn)(void);
} await_case_t;

int main(int argc, char **argv)
{
    static const await_case_t cases[] = {
        {"window", case_window},
        {"two", case_two},
        {"nospin", case_nospin},
        {"complete", case_complete},
    };
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    cases[i].fn();
    return 0;
}
