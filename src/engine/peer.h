/* A peer as the engine keeps it: its channels and queue sets each way,
 * imports of its memory, its mailbox, and what waits to go to it. */
#ifndef IPCP_ENGINE_PEER_H
#define IPCP_ENGINE_PEER_H

#include "engine/base.h"
#include "bootstrap/bootstrap.h"

/* Tracing: the times a piece's copy started and ended on queue q. */
typedef struct ipcp__stamp {
    uint64_t a, b;
    uint64_t bytes;
    uint16_t q;
    uint8_t qset;  /* the queue's set: a driven transfer copies on two */
    uint8_t stage; /* a driven staged part's copy: IPCP_STAGE_OUT/IN */
} ipcp__stamp_t;

/* The two halves of a receiver-driven staged part, as a trace tells them
 * apart: out of the sender's buffer into the stage, then into ours. */
enum { IPCP_STAGE_OUT = 1, IPCP_STAGE_IN = 2 };

/* A set of queues of one backend and device, for one peer and direction. */
typedef struct ipcp__qset {
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;
    int device;
    int n;
    unsigned next; /* one-sided transfers: queue the next one starts on */
    ipcp__queue_t *q[IPCP_MAX_QUEUES];
    void *shm_handle; /* the channel's registration for this backend */
    int staging;      /* transfers in comm->staging with ops still to go here */
} ipcp__qset_t;

/* One direction of data between two ranks.  The channel (shared control
 * words and ring) is created by the receiving side. */
typedef struct ipcp__chan {
    void *base;
    size_t size;
    void *handle; /* host backend's alloc or import handle */
    int fd;       /* creator: the memfd, until sent; else -1 */
    int created;  /* 1 if we created it (receiver side) */
    int fd_sent;
    ipcp__chan_ctl_t *ctl;
    char *slots;
    uint32_t nslots;
    uint32_t slots_per_queue; /* staged queues = nslots / this, >= 1 */
    size_t slot_size;
    ipcp__export_t exp;            /* creator: the memfd's export */
    uint64_t seq;                  /* next ring chunk number */
    uint64_t dseq[IPCP_MAX_QSETS]; /* direct transfers per sender qset */
    uint64_t sseq;                 /* staged transfers */
} ipcp__chan_t;

/* Bytes of a peer's stage buffer for receiver-driven striped transfers (a
 * staged part is cut to fit): 15% of 1 GiB, the calibration's largest
 * share there. */
#define IPCP_DRIVE_STAGE ((size_t)160 << 20)
/* Its last bytes hold no data but the flags a watched driven transfer's
 * queues raise (IPCPIPE_STRIPE_ADAPT): one per queue of every source queue
 * set after its direct pieces, and one after the last copy in
 * (ipcp__drive_flags). */
#define IPCP_DRIVE_FLAGS_LEN ((size_t)32 << 10)

typedef struct ipcp__dir {
    ipcp__chan_t *chan;
    ipcp__qset_t *qsets[IPCP_MAX_QSETS];
    /* Receiver-driven transfers (IPCPIPE_DRIVE, rx only): the buffer their
     * staged parts pass through, pinned for the backend that copies, and
     * the number of the next one (which queues its pieces start on). */
    void *dstage;     /* IPCP_DRIVE_STAGE bytes */
    void *dstage_reg; /* shm_register handle, NULL for host queues */
    const ipcp__backend_ops_t *dstage_ops;
    ipcp__backend_t *dstage_be;
    unsigned dstage_busy;    /* driven transfers with a staged part running */
    ipcp__queue_t *dstage_b; /* the queue of the last one's copies in */
    uint64_t dseq;
    /* The bounce path (rx only): the channel's ring in device memory of
     * each device it received on, an allocation of ours (freed with the
     * communicator's), made on first use, with as many slots as the
     * channel; or that it failed (not tried again). */
    void *ring[IPCP_MAX_QSETS];
    uint64_t ring_slot[IPCP_MAX_QSETS]; /* bytes of one of its slots */
    uint64_t ring_id[IPCP_MAX_QSETS];   /* its region's number */
    unsigned char ring_failed[IPCP_MAX_QSETS];
} ipcp__dir_t;

/* A peer's memory we mapped (two-sided direct targets), by region id. */
typedef struct ipcp__import {
    ipcp__list_t link;
    uint64_t id;
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;
    void *ptr;
    void *handle;
    size_t size;
    int device; /* local device it is mapped for (-1: host) */
    int refs;   /* cache's own 1 + active transfers */
    int stale;  /* owner freed it */
} ipcp__import_t;

/* A peer's export of one of its regions (two-sided direct targets). */
typedef struct ipcp__rexport {
    ipcp__list_t link;
    uint64_t id;
    ipcp__export_t exp;
    ipcp__fds_t fds; /* owned duplicates of those that came with it */
    int spent;       /* 2 + the device whose import closed them, or 0 */
} ipcp__rexport_t;

/* The state of the link to a peer, changed only by ipcp__peer_to and
 * only forward (the progress thread's, or finalize's after it stopped):
 *
 *   OPEN --a write failed--> BROKEN --its socket ended, or wr_lost_ns-->
 *   CLOSED, and OPEN --lost, or finalize--> CLOSED.
 *
 * BROKEN: nothing more goes out (lost_why says why); the peer is lost
 * once its socket has ended, what it sent before read, or at wr_lost_ns.
 * CLOSED: its socket is closed, its waits failed.  A rank's own entry is
 * CLOSED from the start.  Whether the peer finalized (bye) is a fact
 * beside the state, not one of its steps: a peer that said goodbye may
 * still break a write and then close, and the messages name the
 * goodbye. */
typedef enum ipcp__peer_link {
    IPCP_PEER_OPEN = 0,
    IPCP_PEER_BROKEN,
    IPCP_PEER_CLOSED
} ipcp__peer_link_t;

struct ipcp__peer {
    int rank;
    int fd;
    pid_t pid;
    uint64_t probe_addr;
    atomic_int lost;        /* 0, or the status that aborts waits */
    ipcp__peer_link_t link; /* ipcp__peer_to */
    char *lost_why;         /* why it was lost, for later calls (owned) */
    uint64_t wr_lost_ns;    /* BROKEN: when it is lost at the latest */
    int bye;                /* the peer finalized */
    int pvm_to;             /* -1 unknown, 0/1: we may write its memory */
    int remote_path;        /* path the peer forces on receives; -1 unknown
                               (no eager sends until it is known) */
    ipcp__list_t txq;       /* ipcp__txmsg_t waiting for the socket */
    uint64_t next_id;       /* ids of our operations towards this peer */
    ipcp__list_t wait_cts;  /* our sends/puts waiting for a CTS */
    ipcp__list_t posted;    /* our receives not matched yet */
    atomic_int n_posted;    /* how many (ipcp__posted_add) */
    /* Of those, the ones no caller reads the inbox for (watch 0): only
     * for them does an eager message need the progress thread awake
     * (changed under rx_lock, read without it: engine/mbox.c) */
    atomic_int n_posted_thread;
    ipcp__list_t unexp; /* RTS not matched yet (ipcp__unexp_t) */
    /* How many (changed under rx_lock, read without it: a hint for
     * ipcp__recv_maybe) */
    atomic_uint n_unexp;
    ipcp__list_t gets;     /* our gets waiting for the owner's RTS */
    ipcp__list_t maps;     /* our imports waiting for MAP_REP */
    ipcp__list_t active;   /* transfers in queues (ipcp__xfer_t) */
    ipcp__list_t imports;  /* ipcp__import_t */
    ipcp__list_t rexports; /* ipcp__rexport_t */
    ipcp__dir_t tx;
    ipcp__dir_t rx;
    unsigned logged_paths; /* path reasons already logged at info */
    int samegpu_noted;     /* engine/samegpu.c said it shares our GPU */
    int no_bounce;         /* a bounce ring of its could not be mapped here */
    /* shared-memory mailbox (engine/mbox.c) */
    void *inbox;  /* ours: the peer writes, we read */
    void *outbox; /* the peer's inbox: we write */
    int out_wake; /* the peer's wake eventfd, -1 none */
    int in_on;    /* the peer switched: read our inbox */
    int out_on;   /* we switched: write its inbox */
    /* Callers' own way for small host messages (engine/mbox.c): they write
     * the outbox and read the inbox themselves.  rx_lock (recursive: the
     * progress thread may meet a loss while it holds it) guards reading
     * the inbox, posted and unexp; tx_lock writing the outbox.  in_on,
     * out_on and remote_path are read by callers with atomic loads. */
    ipcp__rmutex_t rx_lock;
    ipcp__mutex_t tx_lock;
    atomic_int pending;   /* our commands to the peer not yet run */
    atomic_int backlog;   /* messages in txq */
    atomic_int waiters;   /* callers reading the inbox */
    atomic_int blind;     /* the progress thread sleeps without the
                             inbox's sleeping word: callers read it */
    atomic_int gone;      /* lost or finalized, as callers see it */
    atomic_int kick;      /* a caller left a message for the thread */
    atomic_int pipe_dead; /* a pipelined record's writer stopped
                             (ipcp__mbox_pipe_copy): read no more */
    /* mailbox counts for the log at finalize: messages written by callers
     * and by the thread, sends the callers left to the thread (under
     * tx_lock), wake-ups written (atomic adds: after tx_lock's unlock);
     * messages read by callers and by the thread,
     * receives the callers left to it (under rx_lock) */
    uint64_t n_tx_fast, n_tx_thread, n_tx_refused, n_wakes;
    uint64_t n_rx_fast, n_rx_thread, n_rx_refused;
    uint32_t mbox_slots; /* of both rings (ipcp__mbox_slots) */
    /* the outbox's next record and its reader's tail when we last read it
     * (tx_lock); the inbox's next record (written under rx_lock, read
     * without it by ipcp__mbox_ready): ours, not in the shared ring,
     * which the peer may write */
    uint64_t out_head, out_tail, in_tail;
    /* in_tail at the outbox's last record (tx_lock): a message came
     * between two of ours when it moved (ipcp__mbox_publish); out_head at
     * the last look at the reader's tail for a lazy one (tx_lock,
     * ipcp__mbox_lazy_full) */
    uint64_t out_rx_seen, out_lazy_look;
    /* The outbox's head when we last woke a lazy reader for room (atomic:
     * written after tx_lock's unlock, read under it);
     * the inbox position up to which the records were seen to be eager
     * ones (ipcp__mbox_lazy_wants) */
    uint64_t out_lazy_woke;
    _Atomic uint64_t lazy_seen;
    /* the thread: the eager message at the inbox's head (its slot + 1)
     * and when it saw it first (ipcp__mbox_fresh_eager) */
    uint64_t eager_tail, eager_ns;
    /* keepalive (engine/peer.c, ipcp__keepalive): when a message of the
     * peer last came, and when we last asked it for one (ns) */
    _Atomic uint64_t heard_ns;
    uint64_t ping_ns;
    /* the inbox's tail at the keepalive's last step (the thread's) */
    uint64_t ka_tail;
};

/* Outgoing message. */
typedef struct ipcp__txmsg {
    ipcp__list_t link;
    size_t len;
    int nfds;
    int fds[IPCP_SOCK_MAX_FDS]; /* owned: closed once sent */
    unsigned char data[];
} ipcp__txmsg_t;

/* A received RTS waiting for its receive. */
typedef struct ipcp__unexp {
    ipcp__list_t link;
    ipcp__msg_rts_t rts;
    unsigned char *eager; /* rts.len bytes when eager */
} ipcp__unexp_t;

#endif
