/* A receive the receiver copies itself completes when its queues' watch
 * flags show every copy done (ipcp__stripe_watch), before the notifies
 * behind them end its track; the request then stays allocated until the
 * engine is done with the transfer, whoever frees it first.  These cases
 * drive the bookkeeping on a fake communicator; the time saved shows on
 * GPUs (the bench's 256 MiB figure). */
#include <pthread.h>
#include <string.h>

#include "common/config.h"
#include "engine/engine.h"
#include "testutil.h"

static ipcp__config_t cfg;
static ipcp_comm_t comm;
static ipcp__peer_t peers[2];
static ipcp__flag_t flags[4];
static uint64_t last;

static void fake_comm(void)
{
    memset(&cfg, 0, sizeof(cfg));
    memset(&comm, 0, sizeof(comm));
    memset(peers, 0, sizeof(peers));
    memset(flags, 0, sizeof(flags));
    last = 0;
    comm.cfg = &cfg;
    comm.size = 2;
    comm.peers = peers;
    peers[1].link =
        IPCP_PEER_CLOSED; /* the sender's end (a DRIVEN CTS) is not sent */
    ipcp__list_init(&comm.watching);
    pthread_mutex_init(&comm.lock, NULL);
    pthread_cond_init(&comm.cond, NULL);
}

static void fake_comm_end(void)
{
    pthread_cond_destroy(&comm.cond);
    pthread_mutex_destroy(&comm.lock);
}

static void no_cb(ipcp__track_t *t)
{
    (void)t;
}

/* A driven receive of seq 7 from rank 1, watched: its one direct piece on
 * queue 1 of two (from 1 on), its staged part's last flag. */
static ipcp_request_t *watched_recv(uint64_t drive_id)
{
    ipcp_request_t *req = ipcp__req_new(&comm, IPCP_REQ_RECV);
    T_CHECK(req != NULL);
    ipcp__xfer_t *x = &req->xfer;
    x->comm = &comm;
    x->peer = &peers[1];
    x->req = req;
    x->drive_id = drive_id;
    ipcp__track_init(&x->track, 1, no_cb, x);
    ipcp__watch_t *w = &x->watch;
    w->on = 1;
    w->done = flags;
    w->dseq = 7;
    w->np = 1;
    w->lo_s = 1;
    w->snq = 2;
    w->last = &last;
    w->last_v = 7;
    ipcp__list_push_back(&comm.watching, &w->link);
    return req;
}

static void drop(ipcp_request_t *req)
{
    ipcp__list_del(&req->xfer.watch.link);
    ipcp__track_destroy(&req->xfer.track);
}

static int done(const ipcp_request_t *req)
{
    return atomic_load(&req->done);
}

/* Both parts' flags raised: the request completes with its status, holds
 * a second reference, and survives its owner's free until the engine's.
 * (Under ASan the owner's free would show as a use after free below, and
 * a missing last free as a leak.) */
static void case_both(void)
{
    fake_comm();
    ipcp_request_t *req = watched_recv(5);
    ipcp__stripe_watch(&comm);
    T_EQ_INT(done(req), 0);
    flags[1].v = 7; /* the direct part's queue */
    ipcp__stripe_watch(&comm);
    T_EQ_INT(done(req), 0);
    last = 7; /* the staged part's last copy in */
    ipcp__stripe_watch(&comm);
    T_EQ_INT(done(req), 1);
    T_EQ_INT(req->status, IPCP_OK);
    T_EQ_INT(req->xfer.early, 1);
    T_EQ_INT(comm.early_live, 1);
    T_EQ_INT(atomic_load(&req->refs), 2);
    ipcp__stripe_watch(&comm); /* seen again: nothing more */
    T_EQ_INT(atomic_load(&req->refs), 2);
    T_EQ_INT(comm.early_live, 1);
    drop(req);
    ipcp__req_free(req); /* the owner's */
    T_EQ_INT(atomic_load(&req->refs), 1);
    T_EQ_INT((int)(req->magic == IPCP_REQ_MAGIC), 1);
    ipcp__req_free(req); /* the engine's, at the end of ipcp__run_done */
    fake_comm_end();
}

/* Not ended early: a sender's copy (no drive id), a failed track, a
 * stream-ordered request, an internal one. */
static void case_not(void)
{
    fake_comm();
    flags[1].v = 7;
    last = 7;
    ipcp_request_t *a = watched_recv(0);
    ipcp_request_t *b = watched_recv(5);
    ipcp__track_fail(&b->xfer.track, IPCP_ERR_PEER_LOST, "lost");
    ipcp_request_t *c = watched_recv(5);
    c->sync = (ipcp__sync_t *)&flags[3]; /* only tested against NULL */
    ipcp_request_t *d = watched_recv(5);
    d->user = 0;
    ipcp__stripe_watch(&comm);
    ipcp_request_t *all[] = {a, b, c, d};
    for (int i = 0; i < 4; i++) {
        T_EQ_INT(done(all[i]), 0);
        T_EQ_INT(all[i]->xfer.early, 0);
        T_EQ_INT(atomic_load(&all[i]->refs), 1);
        T_EQ_INT(comm.early_live, 0);
        all[i]->sync = NULL;
        drop(all[i]);
        ipcp__req_free(all[i]);
    }
    fake_comm_end();
}

typedef struct {
    const char *name;
    void (*fn)(void);
} early_case_t;

int main(int argc, char **argv)
{
    static const early_case_t cases[] = {
        {"both", case_both},
        {"not", case_not},
    };
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    cases[i].fn();
    return 0;
}
