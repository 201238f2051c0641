/* Requests and the transfers they run: the staged part being enqueued,
 * the watch of a striped one, the trace marks. */
#ifndef IPCP_ENGINE_REQ_H
#define IPCP_ENGINE_REQ_H

#include <stddef.h>
#include <string.h>

#include "engine/peer.h"
#include "common/handle.h"

enum {
    IPCP_REQ_SEND = 1,
    IPCP_REQ_RECV,
    IPCP_REQ_PUT,
    IPCP_REQ_GET,
    IPCP_REQ_DROP,  /* internal: end a peer that broke the protocol (the
                       reason in errmsg; none: it is gone already), and
                       fail with why it is gone */
    IPCP_REQ_FENCE, /* internal: done when run, after the commands
                       queued before it */
    IPCP_REQ_IMPORT,
    IPCP_REQ_NOTIFY,   /* internal: tell peers a region is gone */
    IPCP_REQ_INTERNAL, /* internal: owner's side of a staged put/get */
    IPCP_REQ_BYE,      /* finalize: tell peers, wait for theirs */
    IPCP_REQ_PATH,     /* internal: tell peers our receive path */
    IPCP_REQ_LANE,     /* internal: send a peer our lane block */
    IPCP_REQ_DEREG,    /* deregistration: tell peers, wait until no
                          operation on the region is in flight */
    IPCP_REQ_REMOTE,   /* a send or receive with a rank on another node,
                          through its transport (api_remote.c) */
};

/* Protocol marks of a request in a trace (CLOCK_MONOTONIC ns, 0 = not
 * reached): the call; the progress thread taking it up (a sender's RTS
 * leaves then); meeting the peer (receiver: its RTS matched; sender: the
 * CTS came); the receiver's CTS sent; the call that enqueues this side's
 * first copy returned (the copy was submitted by then); all of this side's
 * operations in its queues; its device work seen finished.
 * trace_stats.py lines the two sides up on them. */
enum {
    IPCP_TM_CALL,
    IPCP_TM_START,
    IPCP_TM_MEET,
    IPCP_TM_CTS,
    IPCP_TM_COPY,
    IPCP_TM_ENQ,
    IPCP_TM_DONE,
    IPCP_TM_N
};

/* One side's half of a staged transfer (or of a striped transfer's staged
 * part) while its chunks are being enqueued: a sender's first chunk goes
 * in with the rest of the transfer, the other chunks a chunk per turn of
 * the progress loop (engine/staged.c, ipcp__stage_poll), so that a message
 * that arrives meanwhile - the CTS of our own send, both ways at once - is
 * not held behind a dozen driver calls. */
typedef struct ipcp__stage {
    ipcp__list_t link; /* comm->staging */
    ipcp__qset_t *qs;
    ipcp__chan_t *ch;
    char *slots;        /* the channel's, or the bounce path's ring */
    uint64_t slot_size; /* of a slot of that ring */
    uint64_t ramp_slot; /* the slot the layout ramps to, or 0: no ramp */
    int flush;          /* a receiver's waits flush remote writes (that ring) */
    int gate;           /* a chunk goes in once the host sees its wait met */
    char *buf;
    uint64_t len, unit, base, nchunks, next;
    int send, remote_done, reported;
    ipcp__errslot_t *slot;
    uint64_t seq;
    uint64_t *held[IPCP_MAX_QUEUES]; /* a queue's last mark, not yet in */
    uint64_t held_v[IPCP_MAX_QUEUES];
    unsigned mask;   /* the queues of this side of the transfer */
    uint64_t due_ns; /* a receiver's chunks wait for this (ipcp__stage_poll) */
} ipcp__stage_t;

/* The receiving side of a striped transfer, watched for when each part
 * ends (IPCPIPE_STRIPE_ADAPT; ipcp__stripe_watch).  Times in ns, 0 until
 * seen. */
typedef struct ipcp__watch {
    ipcp__list_t link; /* comm->watching */
    int on;
    uint64_t t0; /* the CTS sent: both parts may start */
    uint64_t t_direct, t_staged;
    const ipcp__flag_t *done; /* the direct part's done flags */
    uint64_t dseq;
    unsigned np, lo_s, snq;
    const uint64_t *last; /* the staged part's last mark, and its value */
    uint64_t last_v;
    uint64_t slen;
    int both;        /* the share was the both-ways one */
    int adapt;       /* the share came from the calibration: adapt it */
    unsigned cls;    /* the transfer's size class (ipcp__adapt_class) */
    uint64_t src_id; /* the pair, for its memo */
    int dst;
} ipcp__watch_t;

/* A transfer in queues (one side). */
typedef struct ipcp__xfer {
    ipcp__list_t link; /* peer->active */
    ipcp_comm_t *comm;
    ipcp__track_t track;
    ipcp__peer_t *peer;
    ipcp_request_t *req;    /* user request, or NULL (internal) */
    ipcp__import_t *import; /* mapping held while the copies run */
    /* tracing (engine/trace.c) */
    ipcp__stamp_t *stamps;
    size_t nstamps;
    uint64_t t_post;
    int rx;       /* 1: this side receives the data */
    int dev;      /* counted in comm->dev_inflight */
    size_t tbase; /* trace index of the first staged chunk */
    /* receiving side: the slot where the sender reports a failure */
    ipcp__errslot_t *err_slot;
    uint64_t err_seq;
    ipcp__errslot_t *err_slot2; /* a striped transfer's staged part */
    uint64_t err_seq2;
    /* sending side of a direct part: where a failure is reported */
    ipcp__errslot_t *tx_slot;
    uint64_t tx_seq;
    ipcp__list_t done_link; /* comm->dones */
    /* receiving side of a receiver-driven transfer: the sender's RTS id
     * (ids start at 1; 0: not driven), answered with a DRIVEN CTS when it
     * completes, or when its data is seen in place (early) */
    int drive_staged; /* counted in peer->rx.dstage_busy until it ends
                       * well, or ends after an early end */
    int early;        /* its request completed before its notifies came back */
    int split_wait;   /* a SPLIT send: one pending count for the DRIVEN CTS */
    /* A SPLIT receive: the status of its own half, kept off track, whose
     * failure would end the waits for the sender's flags early and let the
     * receive end while the sender still writes the buffer */
    int split_head;
    ipcp__track_t head;
    uint64_t drive_id;
    ipcp_rmem_t *rmem_busy; /* one-sided without the owner: counted in
                               this imported region's busy until it ends */
    ipcp__stage_t stage;    /* staged chunks still to enqueue */
    ipcp__watch_t watch;    /* receiving side of a striped transfer */
} ipcp__xfer_t;

struct ipcp_request {
    uint64_t magic;
    ipcp_comm_t *comm;
    ipcp_request_t *cache_next; /* a thread's freed ones (req.c) */
    ipcp__handle_t handle;      /* what the user holds; 0: none (internal) */
    ipcp__list_t link;          /* comm->cmds, then a peer list */
    int type;
    int peer;
    int tag;
    void *buf;
    size_t len;
    ipcp__mem_attr_t attr; /* of buf */
    uint64_t id;           /* protocol id towards the peer */
    ipcp_path_t path;
    size_t nbytes;
    int user;             /* 1: a user waits on it; 0: internal, freed */
    int watch;            /* a receive its caller posted itself: the
                             waiter reads the peer's inbox (mbox.c) */
    int in_posted;        /* in its peer's posted (under rx_lock) */
    uint64_t polled;      /* ipcp__mbox_poll: the slot + 1 it left to the
                             progress thread last */
    int on_stack;         /* a blocking call's (api.c): it lives until
                             the call returns, so it never ends early */
    int offered;          /* counted in comm->offers (ipcp__await_offer) */
    uint64_t await_until; /* when offered: its polling window's end */
    /* one-sided */
    ipcp_rmem_t *rmem;
    size_t offset;
    ipcp__region_t *region; /* INTERNAL: the owner's region, counted in
                               its busy while the request lives; DEREG:
                               the region going away */
    double deadline;        /* DEREG: when it stops waiting for peers */
    uint64_t region_id;
    /* completion (written under comm->lock; done is also read without it
     * by callers that spin before they sleep) */
    atomic_int done;
    /* The owner's reference, and the engine's while a transfer whose
     * request completed early still runs (ipcp__xfer_end_early); the last
     * ipcp__req_free frees. */
    atomic_int refs;
    ipcp_status_t status;
    /* staging of eager data towards device memory and similar */
    void *scratch;
    /* stream-ordered (ipcpipe_cuda.h): the flags shared with the user's
     * stream; armed once the user's stream reached the operation */
    ipcp__sync_t *sync;
    int sync_armed;
    /* small-message lane (engine/lane.c): message lane_k of direction
     * lane_dir, in its lane's list until its record says it is done */
    uint64_t lane_k;
    int lane_dir;
    double lane_t0; /* when posted (a warning once it waits too long) */
    /* IPCP_REQ_REMOTE: its transfer (engine/remote_xfer.h) while it
     * runs */
    void *remote_op;
    /* A stream-ordered one (engine/remote_order.h), and its direction. */
    int remote_ordered, remote_send;
    /* It ended as an eager message in host memory or as a transfer with
     * another node (ipcp__remote_done), xfer as ipcp__req_init left it: a
     * reuse need not clear it (ipcp__req_new). */
    int xfer_clean;
    /* xfer holds whatever the stack held (a blocking call's receive,
     * api.c): cleared where a transfer first needs it
     * (ipcp__req_xfer_ready), which a small message never does. */
    int xfer_unset;
    /* From here on a new request is not cleared whole (ipcp__req_clear):
     * 1.7 of its 2 KB are the error text, read only after a failure, the
     * trace marks, written only when tracing, and the transfer, which a
     * small message never uses. */
    char errmsg[IPCP_ERRMSG_MAX];
    uint64_t tm[IPCP_TM_N]; /* trace marks (IPCP_TM_*), when tracing */
    ipcp__xfer_t xfer;
};

/* Clears a request for a new use, but for the parts named above: errmsg
 * becomes an empty string, tm zero when the communicator traces, xfer
 * zero unless keep_xfer (it is clean already, or cleared later). */
static inline void ipcp__req_clear(ipcp_request_t *req, int trace_on,
                                   int keep_xfer)
{
    memset(req, 0, offsetof(ipcp_request_t, errmsg));
    req->errmsg[0] = '\0';
    if (trace_on)
        memset(req->tm, 0, sizeof(req->tm));
    if (!keep_xfer)
        memset(&req->xfer, 0, sizeof(req->xfer));
}

/* Makes a request's xfer usable (cleared) if it is not yet: every way
 * into a transfer of a receive calls it first (ipcp__xfer_accept,
 * ipcp__xfer_eager_to_device). */
static inline void ipcp__req_xfer_ready(ipcp_request_t *req)
{
    if (!req->xfer_unset)
        return;
    memset(&req->xfer, 0, sizeof(req->xfer));
    ipcp__list_init(&req->xfer.link);
    req->xfer_unset = 0;
}

#endif
