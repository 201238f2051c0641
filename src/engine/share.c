/* The striped share of each transfer, the receiver's decision: from the
 * calibration (IPCPIPE_STRIPE=auto) and what earlier transfers of the
 * size class taught (IPCPIPE_STRIPE_ADAPT), and the watch that teaches
 * it: when each part of a striped transfer ended. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/time.h"
#include "engine/xfer.h"
#include "engine/samegpu.h"
#include "engine/stripe.h"

/* ---- Watching striped transfers (IPCPIPE_STRIPE_ADAPT) ------------------ */

static int ipcp__watch_reached(const uint64_t *flag, uint64_t value)
{
    return ipcp__flag_reached(__atomic_load_n(flag, __ATOMIC_ACQUIRE), value);
}

/* The communicator's memo of the pair src_id -> dst, or NULL. */
static ipcp__stripe_memo_t *ipcp__stripe_memo_find(ipcp_comm_t *comm,
                                                   uint64_t src_id, int dst)
{
    for (int i = 0; i < comm->nstripe_memo; i++)
        if (comm->stripe_memo[i].src_id == src_id &&
            comm->stripe_memo[i].dst == dst)
            return &comm->stripe_memo[i];
    return NULL;
}

/* Runs every turn of the progress loop while transfers are watched: the
 * clock is read only when an end is newly seen. */
void ipcp__stripe_watch(ipcp_comm_t *comm)
{
    ipcp__list_t *e, *tmp;
    uint64_t now = 0;
    ipcp__list_for_each_safe(e, tmp, &comm->watching)
    {
        ipcp__xfer_t *x = ipcp__list_entry(e, ipcp__xfer_t, watch.link);
        ipcp__watch_t *w = &x->watch;
        if (!w->t_direct) {
            unsigned i = 0;
            while (
                i < w->np &&
                ipcp__watch_reached(
                    &w->done[ipcp__direct_queue(w->dseq, i, w->lo_s, w->snq)].v,
                    w->dseq))
                i++;
            if (i == w->np)
                w->t_direct = now ? now : (now = ipcp__now_ns());
        }
        if (!w->t_staged && ipcp__watch_reached(w->last, w->last_v))
            w->t_staged = now ? now : (now = ipcp__now_ns());
        /* A driven transfer's flags are its own queues', raised after the
         * last copy of each: its data is in place. */
        if (w->t_direct && w->t_staged && x->drive_id)
            ipcp__xfer_end_early(x);
    }
}

void ipcp__stripe_watch_end(ipcp_comm_t *comm, ipcp__xfer_t *x, int ok)
{
    ipcp__watch_t *w = &x->watch;
    if (!w->on)
        return;
    w->on = 0;
    ipcp__list_del(&w->link);
    ipcp__stripe_memo_t *m =
        w->adapt ? ipcp__stripe_memo_find(comm, w->src_id, w->dst) : NULL;
    ipcp__adapt_t *a = m ? &m->adapt[w->both][w->cls] : NULL;
    /* Both parts have ended: one not seen yet ended by now.  Where neither
     * was seen (the thread was busy, or asleep: host queues do not keep it
     * spinning), which ended first is unknown. */
    int seen = (w->t_direct != 0) + (w->t_staged != 0);
    if (a && (!ok || !x->req || !seen))
        ipcp__adapt_forget(a);
    if (!ok || !x->req)
        return;
    uint64_t now = ipcp__now_ns();
    double td = (double)((w->t_direct ? w->t_direct : now) - w->t0) / 1e3;
    double ts = (double)((w->t_staged ? w->t_staged : now) - w->t0) / 1e3;
    /* An end not seen is only bounded: a staged part that ended before
     * that bound is not known to be early (the factor may rise on it). */
    double f = a && seen
                   ? ipcp__adapt_learn(a, td, w->t_direct || ts >= td ? ts : td)
                   : -1;
    /* The line is formatted only where it is written: this runs at the
     * end of every watched transfer. */
    if (!ipcp__log_enabled(IPCP_LOG_DEBUG, IPCP_SUB_ENGINE))
        return;
    char fs[48] = "";
    if (f >= 0)
        snprintf(fs, sizeof(fs), "; %s share factor of its size now %.3f",
                 w->both ? "both-ways" : "one-way", f);
    IPCP_DEBUG(IPCP_SUB_ENGINE,
               "striped transfer of %llu bytes from rank "
               "%d: direct part ended %s%.1f us after %s, staged part "
               "(%llu bytes) %s%.1f us%s",
               (unsigned long long)x->req->nbytes, x->peer->rank,
               w->t_direct ? "" : "by ", td,
               x->drive_id ? "this process began copying" : "the CTS",
               (unsigned long long)w->slen, w->t_staged ? "" : "by ", ts, fs);
}

/* ---- Striping (receiver's decision) -------------------------------------- */

/* This process's ordinal of the device whose identity is id, or -1. */
int ipcp__local_device(ipcp_comm_t *comm, uint64_t id)
{
    for (int d = 0; d < IPCP_MAX_DEVICES; d++) {
        uint64_t mine;
        if (comm->dev_ops->device_reach(ipcp__dev(comm), d, &mine, 1) != 1)
            break;
        if (mine == id)
            return d;
    }
    return -1;
}

/* IPCPIPE_STRIPE=auto: the measured share and smallest size for the pair,
 * remembered per communicator (the measurement runs at most once per pair
 * and machine, the file keeps it). */
static ipcp__stripe_memo_t *ipcp__stripe_auto(ipcp_comm_t *comm,
                                              ipcp__peer_t *peer,
                                              uint64_t src_id, int dst)
{
    ipcp__stripe_memo_t *m = ipcp__stripe_memo_find(comm, src_id, dst);
    ipcp__stripe_entry_t e;
    int fresh = !m;
    if (m && m->measured)
        return m;
    if (fresh) {
        int i = comm->nstripe_memo;
        if (i == IPCP_STRIPE_MEMO) /* full: replace in turn (the file has it) */
            i = (int)(comm->stripe_memo_next++ % IPCP_STRIPE_MEMO);
        m = &comm->stripe_memo[i];
        m->src_id = src_id;
        m->dst = dst;
        for (unsigned b = 0; b < 2; b++)
            for (unsigned c = 0; c < IPCP_ADAPT_CLASSES; c++)
                ipcp__adapt_init(&m->adapt[b][c]);
        if (comm->nstripe_memo < IPCP_STRIPE_MEMO)
            comm->nstripe_memo = i + 1;
    }
    /* A measurement allocates and registers memory, which waits for every
     * stream of the context: with a user's stream waiting on us that never
     * ends (a stream-ordered receive of 8 MiB with no cache file hung the
     * benchmark).  Then only the file is read, once, and the transfers go
     * unstriped until one finds no stream waiting.  calibrating, raised
     * before the streams are counted, holds back stream-ordered calls made
     * meanwhile (ipcp__sync_acquire) until the measurement is over. */
    atomic_store(&comm->calibrating, 1);
    int waiting = ipcp__streams_wait(comm);
    if (waiting && !fresh) { /* the file was read already */
        atomic_store(&comm->calibrating, 0);
        return m;
    }
    memset(&m->e, 0, sizeof(m->e));
    m->measured = 1;
    int src = ipcp__local_device(comm, src_id);
    ipcp_status_t st;
    if (src < 0) {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "no striping from rank %d: its GPU is "
                  "not visible to this process, so the links cannot be "
                  "measured here",
                  peer->rank);
    } else if ((st = ipcp__stripe_tune(
                    comm->cfg, comm->dev_ops, ipcp__dev(comm), src, dst,
                    waiting ? IPCP_TUNE_CACHED : IPCP_TUNE_AUTO, &e)) ==
               IPCP_OK) {
        m->e = e;
    } else if (waiting && st == IPCP_ERR_STATE) {
        m->measured = 0;
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "striping from rank %d (GPU %d -> GPU "
                  "%d) not measured yet, and a stream of this process waits "
                  "on a transfer, so it is not measured now: unstriped until "
                  "a transfer finds no stream waiting (ipcpipe-bench --tune "
                  "measures it beforehand)",
                  peer->rank, src, dst);
    } else {
        IPCP_INFO(IPCP_SUB_ENGINE,
                  "no striping from rank %d (GPU %d -> "
                  "GPU %d): %s",
                  peer->rank, src, dst, ipcp__last_error());
    }
    atomic_store(&comm->calibrating, 0);
    return m;
}

/* Only transfers large enough to stripe count: a small message the other
 * way (a control receive posted ahead, as ipcpipe-bench's rank 1 posts one
 * for rank 0's verdict) loads no link for long, and counting it left every
 * 256 MiB transfer beside it unstriped.  Posted and waiting ones of any
 * memory (a host buffer may still be filled from the peer's GPU, over the
 * PCIe link a staged part uses), by their buffer's size; those in queues
 * of device memory, as before, by what they move. */
int ipcp__peer_busy(ipcp__peer_t *peer, int rx)
{
    ipcp__list_t *e, *tmp;
    ipcp__list_for_each_safe(e, tmp, rx ? &peer->posted : &peer->wait_cts)
    {
        if (ipcp__list_entry(e, ipcp_request_t, link)->len >=
            IPCP_STRIPE_MIN_SIZE)
            return 1;
    }
    ipcp__list_for_each_safe(e, tmp, &peer->active)
    {
        const ipcp__xfer_t *x = ipcp__list_entry(e, ipcp__xfer_t, link);
        if (x->rx == rx && x->dev && x->req &&
            x->req->nbytes >= IPCP_STRIPE_MIN_SIZE)
            return 1;
    }
    return 0;
}

_Static_assert(IPCP_ADAPT_CLASS0 == IPCP_STRIPE_MIN_SIZE,
               "adapt's first size class starts where auto striping does");

/* IPCPIPE_STRIPE=auto: the staged share of a transfer between two GPUs
 * (0: none) and *min, the smallest size it applies from on the path that
 * moves it: driven (the receiver copies, as the calibration did), or the
 * ring (ring = 1), which starts later whatever layout the pair was
 * measured in (a stream-ordered transfer takes the ring under
 * IPCPIPE_DRIVE too).  With IPCPIPE_STRIPE_ADAPT on, the share follows the
 * pair's adapt state (*a, which w then names), on either path, except for
 * driven transfers both ways (below).
 *
 * Below the smallest size a calibration picks, none is needed.  While both
 * directions run, each GPU's copy engines move NVLink traffic both ways
 * and both staged parts: on 2 x H200 the one-way share lost both ways at
 * 256 MiB (striped 605-632 GB/s against 738-741 direct), and fixed shares
 * from 9% lost at every size, while 7% gained from 512 MiB (793 / 762,
 * 1 GiB 810-815 / 771).  So both ways stripe from IPCP_STRIPE_BIDIR_MIN
 * only, at the share the calibration found both ways.  The sender says
 * whether it receives from us too: our own send may not be posted yet when
 * its RTS meets our receive (which left 655 against 741 at 256 MiB). */
double ipcp__stripe_auto_share(ipcp_comm_t *comm, ipcp__peer_t *peer,
                               const ipcp__msg_rts_t *rts,
                               const ipcp_request_t *req, ipcp_path_t force,
                               int ring, ipcp__watch_t *w, uint64_t *min,
                               ipcp__adapt_t **a)
{
    if (force != IPCP_PATH_AUTO || rts->len < IPCP_STRIPE_MIN_SIZE)
        return 0;
    int both =
        ipcp__peer_busy(peer, 0) || (rts->hdr.flags & IPCP_RTS_PEER_RECV);
    if (both && rts->len < IPCP_STRIPE_BIDIR_MIN)
        return 0;
    ipcp__stripe_memo_t *m =
        ipcp__stripe_auto(comm, peer, rts->reach[0], req->attr.device);
    double share = ipcp__stripe_share(&m->e, rts->len, both);
    *min = ipcp__stripe_engine_min(m->e.min_size, ring ? IPCP_STRIPE_RING
                                                       : IPCP_STRIPE_DRIVEN);
    /* Driven both ways, the share stays the calibrated one and nothing is
     * watched (ipcp__xfer_drive): on 2 x H200 the adapt left 4 of 16 rounds
     * of 512 MiB / 1 GiB both ways at 91-97% of the copy engines (their
     * watched parts ending as usual, 1247-1264 us at 512 MiB, so the time
     * went elsewhere), and none of 10 with IPCPIPE_STRIPE_ADAPT=off
     * (105.9-108.1%; session 15, calls 1 and 8).  The price: no defence
     * against a loaded staged path both ways. */
    if (comm->cfg->stripe_adapt && share > 0 && rts->len >= *min &&
        (ring || !both)) {
        w->cls = ipcp__adapt_class(rts->len);
        double f = ipcp__adapt_next(&m->adapt[both][w->cls]);
        share *= f;
        /* A zero factor (the class is off, or a probe of another transfer
         * is in flight) teaches nothing, and must not end that probe. */
        if (f > 0) {
            *a = &m->adapt[both][w->cls];
            w->adapt = 1;
        }
    }
    w->both = both;
    w->src_id = m->src_id;
    w->dst = m->dst;
    return share;
}

/* A transfer given adapt state a (may be NULL) that stages n bytes after
 * all: with none, not striped, it has nothing to teach (a probe it took is
 * tried again later). */
void ipcp__stripe_settle(ipcp__adapt_t *a, ipcp__watch_t *w, uint64_t n)
{
    if (a && !n) {
        ipcp__adapt_forget(a);
        w->adapt = 0;
    }
}

/* The bytes of a direct transfer (at the end of the buffer) that go
 * through the ring at the same time: 0 for none.  Both GPUs must differ
 * (on one GPU both parts would share its memory) and each side needs a
 * queue beside the staged ones for the direct part (*lo_s, *lo_r: the
 * first such queue of the sender and of this side).  Host memory has one
 * memory bus for both parts, so only a fixed share stripes it: that is
 * how the split itself is tested where there is no GPU.  w gets whether
 * the share is the calibrated one, and for which pair and direction. */
uint64_t ipcp__stripe_choose(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             const ipcp__msg_rts_t *rts,
                             const ipcp_request_t *req, const ipcp__choice_t *c,
                             ipcp_path_t force, const ipcp__chan_t *ch,
                             const ipcp__qset_t *qs, unsigned *lo_s,
                             unsigned *lo_r, ipcp__watch_t *w)
{
    double share = comm->cfg->stripe;
    uint64_t min = 0, mine;
    unsigned snq = rts->src_nq ? rts->src_nq : 1;
    ipcp__adapt_t *a = NULL; /* IPCPIPE_STRIPE_ADAPT's state for this one */

    if (share < 0 || c->path != IPCP_PATH_DIRECT ||
        (rts->hdr.flags & (IPCP_RTS_PUT | IPCP_RTS_GET_REPLY)))
        return 0;
    if (rts->src_type == IPCP_MEM_HOST && req->attr.type == IPCP_MEM_HOST) {
        if (share == 0)
            return 0;
    } else if (!ipcp__dev(comm) || c->mode != IPCP_DST_MAPPED ||
               rts->src_type != IPCP_MEM_CUDA ||
               req->attr.type != IPCP_MEM_CUDA || rts->nreach < 1 ||
               comm->dev_ops->device_reach(ipcp__dev(comm), req->attr.device,
                                           &mine, 1) != 1 ||
               mine == rts->reach[0]) {
        return 0;
    }
    unsigned ls = (unsigned)ipcp__staged_nq(ch, (int)snq);
    unsigned lr = (unsigned)ipcp__staged_queues(ch, qs);
    if (ls >= snq || lr >= (unsigned)qs->n)
        return 0;
    if (share == 0)
        share = ipcp__stripe_auto_share(comm, peer, rts, req, force, 1, w, &min,
                                        &a);
    uint64_t n = ipcp__stripe_bytes(rts->len, share, min);
    ipcp__stripe_settle(a, w, n);
    if (n) { /* the direct part's queues, clear of the staged ones */
        *lo_s = ls;
        *lo_r = lr;
    }
    return n;
}
