/* A peer whose last messages lie unread in our socket when a write to it
 * fails: what it sent must still be read (its barrier message, an eager
 * message), a request that needs to write to it fails at once naming it,
 * and it is lost once its socket has ended (or, when it never does, after a
 * short bound).  This process is rank 1 of 2; rank 0 is the other end of a
 * socket pair that the test writes and then closes (dead) or keeps open
 * with its read side shut (alive: writes fail, no hang-up).  The requests
 * are queued and rank 0's messages written before the progress thread
 * starts, and the thread's first turn writes before it reads: the order is
 * the same on every run.
 *
 * "link" checks the link's transitions alone (engine/peer.h).
 *
 *   test_wrloss dead | alive | link */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/backend.h"
#include "common/config.h"
#include "common/time.h"
#include "engine/engine.h"
#include "api.h"
#include "testutil.h"

enum { TAG_EAGER = 5, TAG_AFTER = 6, TAG_OURS = 9, EAGER_LEN = 700 };

typedef struct fake {
    ipcp_comm_t *comm; /* the engine's object */
    ipcp_comm_t *h;    /* its public handle */
    int rank0;         /* rank 0's end of the socket */
} fake_t;

/* Rank 1 of 2 with its progress thread not started yet; requests may be
 * queued (they wake an eventfd of the test's until then). */
static void fake_new(fake_t *f)
{
    const ipcp__config_t *cfg;
    ipcp__handle_t h;
    int sv[2];
    T_OK(ipcp__config_get(&cfg));
    T_OK(ipcp__comm_new(1, 2, "wrloss", cfg->timeout_s, &f->comm));
    ipcp_comm_t *comm = f->comm;
    comm->cfg = cfg;
    comm->eager_max = cfg->eager;
    atomic_init(&comm->path, IPCP_PATH_AUTO);
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        T_FAIL("socketpair: %s", strerror(errno));
    comm->peers[0].fd = sv[0];
    comm->peers[0].pid = getpid();
    f->rank0 = sv[1];
    comm->host_ops = &ipcp__host_backend_ops;
    T_OK(comm->host_ops->open(cfg, &comm->host));
    comm->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    T_CHECK(comm->wake_fd >= 0);
    T_OK(ipcp__handle_new(IPCP_HANDLE_COMM, comm, &h));
    comm->handle = h;
    f->h = (ipcp_comm_t *)(uintptr_t)h;
}

static void fake_start(fake_t *f)
{
    int early = f->comm->wake_fd;
    T_OK(ipcp__comm_start(f->comm)); /* its own eventfd */
    close(early);
}

/* What rank 0 sent before it ended: its path, its message of barrier 0
 * (round 0), and an eager message of EAGER_LEN bytes from seed. */
static void rank0_sends(const fake_t *f, uint64_t seed)
{
    ipcp__msg_path_t path;
    struct {
        ipcp__msg_eager_t e;
        ipcp__bar_msg_t b;
    } bar = {{{IPCP_MSG_EAGER, 0}, IPCP_BAR_TAG, sizeof(ipcp__bar_msg_t)},
             {0, 0, IPCP_BAR_MAGIC}};
    static unsigned char eager[sizeof(ipcp__msg_eager_t) + EAGER_LEN];
    ipcp__msg_eager_t e = {{IPCP_MSG_EAGER, 0}, TAG_EAGER, EAGER_LEN};
    memset(&path, 0, sizeof(path));
    path.hdr.type = IPCP_MSG_PATH;
    path.path = IPCP_PATH_AUTO;
    T_OK(ipcp__sock_send(f->rank0, &path, sizeof(path), NULL, 0, 0));
    T_OK(ipcp__sock_send(f->rank0, &bar, sizeof(bar), NULL, 0, 0));
    memcpy(eager, &e, sizeof(e));
    t_fill(eager + sizeof(e), EAGER_LEN, seed);
    T_OK(ipcp__sock_send(f->rank0, eager, sizeof(eager), NULL, 0, 0));
}

static void expect_lost(ipcp_status_t st, const char *what)
{
    if (st != IPCP_ERR_PEER_LOST)
        T_FAIL("%s returned %s, expected IPCP_ERR_PEER_LOST (%s)", what,
               ipcp_strerror(st), ipcp_last_error());
    if (!strstr(ipcp_last_error(), "rank 0"))
        T_FAIL("%s: \"%s\" does not name rank 0", what, ipcp_last_error());
    /* The reason is the write that failed, not a bare "gone". */
    if (!strstr(ipcp_last_error(), "send on socket"))
        T_FAIL("%s: \"%s\" does not say which write failed", what,
               ipcp_last_error());
}

static void run(int alive)
{
    fake_t f;
    uint64_t seed = t_fresh_seed();
    unsigned char got[EAGER_LEN + 16], ours[64] = {0};
    ipcp_request_t *recv = NULL, *send = NULL, *bar = NULL;
    ipcp__bar_msg_t in;
    uint64_t x = 0;

    fake_new(&f);
    rank0_sends(&f, seed);
    if (alive)
        T_CHECK(shutdown(f.rank0, SHUT_RD) == 0);
    else
        close(f.rank0);
    /* The receive of rank 0's round of barrier 0, as ipcp_barrier posts
     * it (a tag no user may take). */
    memset(&in, 0, sizeof(in));
    T_OK(ipcp__post(f.comm, IPCP_REQ_RECV, &in, sizeof(in), 0, IPCP_BAR_TAG,
                    &bar));
    memset(got, 0x5a, sizeof(got));
    T_OK(ipcp_irecv(f.h, got, sizeof(got), 0, TAG_EAGER, &recv));
    T_OK(ipcp_isend(f.h, ours, sizeof(ours), 0, TAG_OURS, &send));
    double t0 = ipcp__now_s();
    fake_start(&f);

    ipcp_xfer_info_t info;
    T_OK(ipcp_wait(bar, &info));
    T_EQ_U64(info.nbytes, sizeof(in));
    T_EQ_U64(in.epoch, 0);
    T_EQ_INT(in.round, 0);
    T_EQ_INT(in.magic, IPCP_BAR_MAGIC);
    T_OK(ipcp_wait(recv, &info));
    T_EQ_U64(info.nbytes, EAGER_LEN);
    t_verify(got, EAGER_LEN, seed, "rank 0's eager message");
    for (size_t i = EAGER_LEN; i < sizeof(got); i++)
        T_EQ_INT(got[i], 0x5a);
    expect_lost(ipcp_wait(send, NULL), "a send to rank 0");
    /* Lost by now or soon: a receive posted now fails, well within the
     * timeout (a hang-up, or the bound when the socket never ends). */
    expect_lost(ipcp_recv(f.h, &x, sizeof(x), 0, TAG_AFTER, NULL),
                "a receive from rank 0 posted afterwards");
    double el = ipcp__now_s() - t0;
    if (el >= 1.0)
        T_FAIL("the loss took %.3f s", el);
    /* The link went OPEN -> BROKEN -> CLOSED; no broken peer is left to
     * count.  (The thread has stopped writing either by now: the loss is
     * its last step for this peer.) */
    T_EQ_INT(f.comm->peers[0].link, IPCP_PEER_CLOSED);
    T_EQ_INT(f.comm->wr_broken, 0);
    if (alive)
        close(f.rank0);
    T_OK(ipcp_finalize(f.h));
    printf("%s peer: barrier and eager message read, send refused, lost "
           "after %.3f s\n",
           alive ? "live" : "dead", el);
}

static void case_dead(void)
{
    run(0);
}

static void case_alive(void)
{
    run(1);
}

/* The link's transitions alone: forward only, a step back or in place
 * changes nothing, and comm->wr_broken counts the BROKEN peers. */
static void case_link(void)
{
    static ipcp_comm_t comm;
    static ipcp__peer_t peers[3];
    comm.size = 3;
    comm.peers = peers;
    T_EQ_INT(peers[0].link, IPCP_PEER_OPEN); /* zero is OPEN */
    T_EQ_INT(ipcp__peer_to(&comm, &peers[0], IPCP_PEER_OPEN), 0);
    T_EQ_INT(ipcp__peer_to(&comm, &peers[0], IPCP_PEER_BROKEN), 1);
    T_EQ_INT(ipcp__peer_to(&comm, &peers[1], IPCP_PEER_BROKEN), 1);
    T_EQ_INT(comm.wr_broken, 2);
    T_CHECK(ipcp__peer_unwritten(&peers[0]) && !ipcp__peer_closed(&peers[0]));
    T_EQ_INT(ipcp__peer_to(&comm, &peers[0], IPCP_PEER_BROKEN), 0);
    T_EQ_INT(ipcp__peer_to(&comm, &peers[0], IPCP_PEER_OPEN), 0);
    T_EQ_INT(comm.wr_broken, 2);
    T_EQ_INT(ipcp__peer_to(&comm, &peers[0], IPCP_PEER_CLOSED), 1);
    T_EQ_INT(comm.wr_broken, 1);
    T_CHECK(ipcp__peer_closed(&peers[0]));
    T_EQ_INT(ipcp__peer_to(&comm, &peers[0], IPCP_PEER_BROKEN), 0);
    T_EQ_INT(ipcp__peer_to(&comm, &peers[0], IPCP_PEER_CLOSED), 0);
    T_EQ_INT(comm.wr_broken, 1);
    /* OPEN straight to CLOSED (a loss, finalize) counts nothing. */
    T_EQ_INT(ipcp__peer_to(&comm, &peers[2], IPCP_PEER_CLOSED), 1);
    T_EQ_INT(comm.wr_broken, 1);
    T_EQ_INT(ipcp__peer_to(&comm, &peers[1], IPCP_PEER_CLOSED), 1);
    T_EQ_INT(comm.wr_broken, 0);
    T_EQ_INT(peers[1].link, IPCP_PEER_CLOSED);
    printf("peer link: forward only, BROKEN peers counted\n");
}

static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"dead", case_dead},
    {"alive", case_alive},
    {"link", case_link},
};

int main(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    cases[i].fn();
    return 0;
}
