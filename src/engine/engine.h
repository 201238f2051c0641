/* The engine: matching, paths (direct, staged, eager), chunking, slots and
 * progress.  It is shared by every backend and sees them only through
 * backend.h.
 *
 * Threads.  One progress thread per communicator owns all protocol state
 * (peer lists, channels, sequence numbers).  User threads hand it commands
 * (requests) through comm->cmds; backends' threads hand it finished tracks
 * through comm->dones.  Both lists are guarded by comm->lock, which also
 * guards request completion (done flag + comm->cond).  The memory registry
 * has its own lock because user threads read and write it directly. */
#ifndef IPCP_ENGINE_H
#define IPCP_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipcpipe.h"
#include "backend/backend.h"
#include "bootstrap/bootstrap.h"
#include "common/config.h"
#include "common/fault.h"
#include "common/handle.h"
#include "common/list.h"
#include "common/status.h"
#include "engine/stripe.h"
#include "engine/proto.h"

#define IPCP_COMM_MAGIC 0x636f6d6d69706370ULL /* "pcpicomm" */
#define IPCP_REQ_MAGIC  0x7265717569706370ULL
#define IPCP_MEM_MAGIC  0x6d656d5f69706370ULL
#define IPCP_RMEM_MAGIC 0x6d656d7269706370ULL
#define IPCP_DEAD_MAGIC 0xdeadbeefdeadbeefULL

/* Host chunk/slot defaults.  1 MiB slots stay inside the last-level cache of
 * the receiving core while they are copied out, which is what lets a staged
 * copy run at more than half of memcpy on a small machine. */
#define IPCP_HOST_CHUNK  (1u << 20)
#define IPCP_HOST_SLOTS  8
#define IPCP_HOST_QUEUES 2
/* CUDA defaults.  Measured on 2 x H200 (staged, 1 GiB, share of the
 * pinned-copy ceiling): 16 MiB x 4 slots on one queue 93%, 8 MiB x 8 slots
 * on two 89.5%, on four 88.7%; 16 MiB x 4 slots on four queues 48% (each
 * queue needs slots of its own in flight).  A pair's ring stays within
 * 64 MiB.  Direct copies use the four queues. */
#define IPCP_CUDA_CHUNK  (16u << 20)
#define IPCP_CUDA_SLOTS  4
#define IPCP_CUDA_QUEUES 4
/* Direct transfers (IPCPIPE_PIECE=auto): host copies split into pieces of
 * at least 256 KiB over the worker threads; copies that involve device
 * memory are not split (see ipcp__npieces). */
#define IPCP_PIECE_HOST   ((uint64_t)256 << 10)
#define IPCP_PIECE_DEVICE ((uint64_t)1 << 40)
/* A pair of GPUs whose striping was looked up (sending GPU's identity,
 * receiving GPU's ordinal); share 0: not striped. */
#define IPCP_STRIPE_MEMO 16
/* The smallest size a striping calibration considers (cuda_stripe.c): no
 * smaller transfer makes a process measure. */
#define IPCP_STRIPE_MIN_SIZE ((uint64_t)8 << 20)
/* While the pair also moves data the other way, auto stripes transfers of
 * at least this many bytes only (xfer.c, ipcp__stripe_choose), at the
 * calibration's share for both ways: on 2 x H200 at 7% both ways, 512 MiB
 * gained 4% (793 against 762 GB/s direct), 256 MiB nothing (740 / 744). */
#define IPCP_STRIPE_BIDIR_MIN ((uint64_t)512 << 20)
typedef struct ipcp__stripe_memo {
    uint64_t src_id;
    int dst;
    ipcp__stripe_entry_t e; /* share 0: not striped */
    /* 1: e is final; 0: the file had no entry and a user's stream waited,
     * so nothing was measured (e says no striping) */
    int measured;
    /* IPCPIPE_STRIPE_ADAPT: factors on e's share, one way and both ways,
     * by size class */
    ipcp__adapt_t adapt[2][IPCP_ADAPT_CLASSES];
} ipcp__stripe_memo_t;

/* Longest a caller waiting for a request polls while device transfers
 * are in flight, before it sleeps. */
#define IPCP_DEV_SPIN_NS ((uint64_t)100 * 1000 * 1000)
/* After a device send offers its buffer, the sender polls for as long as
 * the receiver's copy of it would take at this rate (bytes per ns), so
 * that the end comes without a wake-up (ipcp__await_offer).  A quarter of
 * what NVLink moves on 2 x H200 (~390 GB/s), room for a receive posted a
 * little late; copies over PCIe (25-50 GB/s) outlast it and sleep as
 * before, rather than poll for tens of milliseconds. */
#define IPCP_AWAIT_BYTES_PER_NS 100
/* Staged chunks go round-robin over at most nslots / this many queues, so
 * that every queue has a slot filling while another drains (the default
 * of IPCPIPE_SLOTS_PER_QUEUE; one slot a queue ran at 48% of the copy
 * engines on 2 x H200: every queue filled its slot at once, then drained
 * it at once). */
#define IPCP_SLOTS_PER_QUEUE 4

/* Queue sets: index 0 is host memory, 1 + d is CUDA device d. */
#define IPCP_MAX_DEVICES 32
#define IPCP_MAX_QSETS   (1 + IPCP_MAX_DEVICES)
_Static_assert(IPCP_MAX_QSETS == IPCP_MAX_QSETS_WIRE, "done flags per qset");

typedef struct ipcp__peer ipcp__peer_t;
typedef struct ipcp__region ipcp__region_t;
typedef struct ipcp__sync ipcp__sync_t;
typedef struct ipcp__lane ipcp__lane_t;
typedef struct ipcp__trace_ev ipcp__trace_ev_t;

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
    int fd; /* owned duplicate, -1 if none came */
} ipcp__rexport_t;

struct ipcp__peer {
    int rank;
    int fd;
    pid_t pid;
    uint64_t probe_addr;
    atomic_int lost; /* 0, or the status that aborts waits */
    int closed;      /* socket closed (lost or said bye) */
    char *lost_why;  /* why it was lost, for later calls (owned) */
    /* A write to it failed (ipcp__peer_wr_broken): nothing more goes out
     * (lost_why says why), and it is lost once its socket has ended, what
     * it sent before read, or at wr_lost_ns (ipcp__now_ns) */
    int wr_broken;
    uint64_t wr_lost_ns;
    int bye;               /* the peer finalized */
    int pvm_to;            /* -1 unknown, 0/1: we may write its memory */
    int remote_path;       /* path the peer forces on receives; -1 unknown
                              (no eager sends until it is known) */
    ipcp__list_t txq;      /* ipcp__txmsg_t waiting for the socket */
    uint64_t next_id;      /* ids of our operations towards this peer */
    ipcp__list_t wait_cts; /* our sends/puts waiting for a CTS */
    ipcp__list_t posted;   /* our receives not matched yet */
    atomic_int n_posted;   /* how many (ipcp__posted_add) */
    ipcp__list_t unexp;    /* RTS not matched yet (ipcp__unexp_t) */
    ipcp__list_t gets;     /* our gets waiting for the owner's RTS */
    ipcp__list_t maps;     /* our imports waiting for MAP_REP */
    ipcp__list_t active;   /* transfers in queues (ipcp__xfer_t) */
    ipcp__list_t imports;  /* ipcp__import_t */
    ipcp__list_t rexports; /* ipcp__rexport_t */
    ipcp__dir_t tx;
    ipcp__dir_t rx;
    unsigned logged_paths; /* path reasons already logged at info */
    int samegpu_noted;     /* engine/samegpu.c said it shares our GPU */
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
    pthread_mutex_t rx_lock;
    pthread_mutex_t tx_lock;
    atomic_int pending; /* our commands to the peer not yet run */
    atomic_int backlog; /* messages in txq */
    atomic_int waiters; /* callers reading the inbox */
    atomic_int blind;   /* the progress thread sleeps without the
                           inbox's sleeping word: callers read it */
    atomic_int gone;    /* lost or finalized, as callers see it */
    atomic_int kick;    /* a caller left a message for the thread */
    /* mailbox counts for the log at finalize: messages written by callers
     * and by the thread, sends the callers left to the thread, wake-ups
     * written (under tx_lock); messages read by callers and by the thread,
     * receives the callers left to it (under rx_lock) */
    uint64_t n_tx_fast, n_tx_thread, n_tx_refused, n_wakes;
    uint64_t n_rx_fast, n_rx_thread, n_rx_refused;
    uint32_t mbox_slots; /* of both rings (ipcp__mbox_slots) */
    /* the outbox's next record and its reader's tail when we last read it
     * (tx_lock); the inbox's next record (written under rx_lock, read
     * without it by ipcp__mbox_ready): ours, not in the shared ring,
     * which the peer may write */
    uint64_t out_head, out_tail, in_tail;
    /* the thread: the eager message at the inbox's head (its slot + 1)
     * and when it saw it first (ipcp__mbox_fresh_eager) */
    uint64_t eager_tail, eager_ns;
    /* keepalive (engine/comm.c, ipcp__keepalive): when a message of the
     * peer last came, and when we last asked it for one (ns) */
    _Atomic uint64_t heard_ns;
    uint64_t ping_ns;
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

enum {
    IPCP_REQ_SEND = 1,
    IPCP_REQ_RECV,
    IPCP_REQ_PUT,
    IPCP_REQ_GET,
    IPCP_REQ_BARRIER,
    IPCP_REQ_IMPORT,
    IPCP_REQ_NOTIFY,   /* internal: tell peers a region is gone */
    IPCP_REQ_INTERNAL, /* internal: owner's side of a staged put/get */
    IPCP_REQ_BYE,      /* finalize: tell peers, wait for theirs */
    IPCP_REQ_PATH,     /* internal: tell peers our receive path */
    IPCP_REQ_LANE,     /* internal: send a peer our lane block */
    IPCP_REQ_DEREG,    /* deregistration: tell peers, wait until no
                          operation on the region is in flight */
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
 * the progress loop (engine/xfer.c, ipcp__stage_poll), so that a message
 * that arrives meanwhile - the CTS of our own send, both ways at once - is
 * not held behind a dozen driver calls. */
typedef struct ipcp__stage {
    ipcp__list_t link; /* comm->staging */
    ipcp__qset_t *qs;
    ipcp__chan_t *ch;
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
    uint64_t drive_id;
    ipcp_rmem_t *rmem_busy; /* one-sided without the owner: counted in
                               this imported region's busy until it ends */
    ipcp__stage_t stage;    /* staged chunks still to enqueue */
    ipcp__watch_t watch;    /* receiving side of a striped transfer */
} ipcp__xfer_t;

struct ipcp_request {
    uint64_t magic;
    ipcp_comm_t *comm;
    ipcp_request_t *cache_next; /* comm->req_cache */
    ipcp__handle_t handle;      /* what the user holds; 0: none (internal) */
    ipcp__list_t link;          /* comm->cmds, then a peer list */
    ipcp__list_t all_link;      /* comm->reqs (user requests) */
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
    char errmsg[IPCP_ERRMSG_MAX];
    ipcp__xfer_t xfer;
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
    double lane_t0;         /* when posted (a warning once it waits too long) */
    uint64_t tm[IPCP_TM_N]; /* trace marks (IPCP_TM_*), when tracing */
};

/* A local region: an ipcp_mem_alloc allocation or a registration. */
struct ipcp__region {
    ipcp__list_t link;
    uint64_t id;
    int is_alloc;
    int is_auto; /* device memory the user allocated, exported by
                    the library when first received into */
    void *ptr;
    size_t len;
    ipcp__mem_attr_t attr;
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;
    void *handle; /* backend allocation (is_alloc) */
    int exportable;
    ipcp__export_t exp;     /* describes ptr..ptr+len (or the alloc) */
    int exp_fd;             /* owned, -1 if none */
    ipcp__region_t *parent; /* registration inside an allocation */
    size_t parent_off;
    unsigned char *shared_with; /* [size]: peers holding a mapping */
    int busy; /* owner-side operations on it in flight (under mem_lock) */
};

struct ipcp_mem {
    uint64_t magic;
    ipcp_comm_t *comm;
    ipcp__handle_t handle;
    ipcp__region_t region;
};

enum { IPCP_RMEM_MAPPED = 1, IPCP_RMEM_PVM, IPCP_RMEM_STAGED };

struct ipcp_rmem {
    uint64_t magic;
    ipcp_comm_t *comm;
    ipcp__handle_t handle;
    ipcp__list_t link; /* comm->rmems */
    int owner;
    uint64_t reg_id;
    size_t len;
    uint64_t addr; /* owner's address of the region */
    ipcp_mem_type_t type;
    int mode;
    /* MAPPED: the owner's export, mapped lazily for each local queue set
     * (index 0 host, 1 + d device d) on the progress thread, since device
     * memory must be mapped in the context of the device that copies. */
    ipcp__export_t exp;
    int fd;         /* owned duplicate, -1 if none came */
    size_t map_off; /* of the region in the export */
    void *maps[IPCP_MAX_QSETS];
    void *handles[IPCP_MAX_QSETS];
    unsigned char map_failed[IPCP_MAX_QSETS];
    atomic_int valid;
    /* One-sided operations of this process on the region in flight (the
     * progress thread counts; ipcp_rmem_release reads), and whether the
     * owner waits for them to end (REG_GONE asked for an answer). */
    atomic_int busy;
    int ack_owed;
};

struct ipcp_comm {
    uint64_t magic;
    ipcp__handle_t handle;
    int rank;
    int size;
    char job[IPCP_JOB_MAX];
    uint64_t job_hash;
    double timeout_s;
    const ipcp__config_t *cfg;
    atomic_int path; /* receive path override (ipcp_path_t) */
    /* Transfers on device queues in flight: while there are any, the
     * progress thread and waiting callers poll rather than sleep (device
     * copies need no CPU, and in a virtual machine a sleeping thread's
     * wake-up cost up to a hundred microseconds a hop). */
    atomic_int dev_inflight;
    /* Device sends that offered their buffer and wait for the CTS (the
     * receiver may be copying it): while there are any, the progress
     * thread and waiting callers poll too, until await_until
     * (ipcp__now_ns; see ipcp__await_offer).  Written by the progress
     * thread only; read by waiters. */
    atomic_int offers;
    _Atomic uint64_t await_until;
    /* IPCPIPE_STRIPE=auto: measured pairs (progress thread only). */
    ipcp__stripe_memo_t stripe_memo[IPCP_STRIPE_MEMO];
    int nstripe_memo;
    unsigned stripe_memo_next; /* full: the entry replaced next */
    size_t eager_max;
    ipcp__boot_t *boot;
    ipcp__peer_t *peers; /* [size] */
    uint64_t probe_word; /* peers read it to test process_vm_readv */

    const ipcp__backend_ops_t *host_ops;
    ipcp__backend_t *host;
    /* The device backend: its table is chosen at init (NULL: none built,
     * or IPCPIPE_CUDA=off) and never changes; its instance is opened on
     * first use (engine/dev.c) and read through ipcp__dev().  dev_lock
     * serializes the opening and is taken with no other lock held. */
    const ipcp__backend_ops_t *cuda_ops;
    ipcp__backend_t *cuda;
    pthread_mutex_t dev_lock;
    atomic_int dev_state;          /* IPCP_DEV_* */
    char dev_err[IPCP_ERRMSG_MAX]; /* why it did not open (dev_lock) */

    pthread_t thread;
    int thread_started;
    int wake_fd; /* eventfd */
    atomic_int stop;
    pthread_mutex_t lock; /* cmds, dones, request completion */
    pthread_cond_t cond;
    /* One turn of progress at a time: the thread's, or a waiting caller's
     * (ipcp__comm_drive).  What the engine calls the progress thread's
     * (its lists, the peers' queues and protocol state) belongs to
     * whoever holds it.  Taken before any other lock of comm. */
    pthread_mutex_t prog_lock;
    atomic_int sleepers;       /* callers in (or going to) cond's wait */
    pthread_mutex_t req_lock;  /* req_cache */
    ipcp_request_t *req_cache; /* freed requests kept for reuse */
    int req_cached;
    ipcp__list_t cmds;
    ipcp__list_t dones;
    ipcp__list_t reqs;       /* user requests not yet waited for */
    ipcp_request_t *bye_req; /* progress thread: finalize in progress */
    /* Progress thread: transfers whose requests ended early still running
     * (ipcp__xfer_end_early), and a goodbye held until they are done
     * (ipcp__check_bye sends it). */
    int early_live;
    ipcp_request_t *bye_held;
    double bye_deadline;
    /* Keepalive (progress thread): when peers are checked next (ns), and
     * whether a request waited on any of them at the last check. */
    uint64_t ka_next;
    int ka_awaited;
    int wr_broken; /* progress thread: peers with wr_broken, not yet lost */

    pthread_mutex_t mem_lock; /* regions, rmems, next_region_id */
    ipcp__list_t regions;
    ipcp__list_t rmems;
    uint64_t next_region_id;

    /* stream-ordered operations (engine/sync.c) */
    pthread_mutex_t sync_lock;
    void *sync_mem;
    void *sync_handle;
    size_t sync_size;
    ipcp__sync_t *sync_entries;
    ipcp__sync_t *sync_free;
    ipcp__sync_t *sync_draining; /* ended before their start landed */
    atomic_int sync_held;        /* entries out of the pool */
    atomic_int calibrating;      /* striping measured: streams wait to wait */
    /* Device memory seen in this process's calls (allocated, or a buffer
     * of a transfer): staged rings it makes get device slots. */
    atomic_int dev_used;
    void *sync_reg[IPCP_MAX_DEVICES];
    ipcp__list_t deferred; /* progress thread: waiting for a start */
    ipcp__list_t staging;  /* progress thread: ipcp__stage_t, in order */
    ipcp__list_t deregs;   /* progress thread: DEREG requests */
    ipcp__list_t watching; /* progress thread: ipcp__watch_t */

    /* small-message lanes (engine/lane.c), one per peer once used */
    pthread_mutex_t lane_lock;
    ipcp__lane_t **lanes;    /* [size] */
    atomic_int lane_reqs;    /* user requests in lanes' lists */
    atomic_int queued;       /* in cmds and dones (under lock; read
                                without it by the progress thread) */
    atomic_int lane_posting; /* user threads in ipcp__lane_post */
    uint64_t lane_poll_ns;   /* progress thread: its last lane poll */
    int lane_leaked;         /* finalize left lane kernels queued: the
                                backends (their memory) stay open */

    /* tracing (progress thread) */
    int trace_on;
    ipcp__trace_ev_t *trace_ev;
    size_t trace_n, trace_cap, trace_dropped;

    /* barrier (progress thread) */
    uint64_t bar_epoch; /* epochs this rank has entered */
    int bar_count[2];   /* rank 0: arrivals per epoch parity */
    uint64_t *bar_seen; /* rank 0: [size] last epoch + 1 heard */
    ipcp_request_t *bar_pending;
    double bar_deadline;
    int bar_broken; /* a barrier timed out */
};

/* The object behind a public handle, or NULL when the handle is not live
 * (the public pointer types carry handle values; api.c resolves them the
 * same way before every use).  For tests that reach into internals. */
static inline ipcp_comm_t *ipcp__comm_of(const ipcp_comm_t *handle)
{
    return (ipcp_comm_t *)ipcp__handle_get((uintptr_t)handle, IPCP_HANDLE_COMM);
}

/* ---- engine/comm.c ---------------------------------------------------- */
/* A communicator of rank in size for job, with its locks, lists and
 * peers set up (no sockets, backends or thread yet). */
ipcp_status_t ipcp__comm_new(int rank, int size, const char *job,
                             double timeout_s, ipcp_comm_t **out);
/* Frees what ipcp__comm_new made (sockets, backends and thread are the
 * caller's to end first). */
void ipcp__comm_delete(ipcp_comm_t *comm);
ipcp_status_t ipcp__comm_start(ipcp_comm_t *comm);
void ipcp__comm_stop(ipcp_comm_t *comm);
/* Wakes the progress thread (any thread). */
void ipcp__comm_wake(ipcp_comm_t *comm);
/* Hands a request to the progress thread. */
void ipcp__comm_track(ipcp_comm_t *comm, ipcp_request_t *req);
void ipcp__comm_submit(ipcp_comm_t *comm, ipcp_request_t *req);
/* A caller's turn of progress, for a host-only process (no device backend
 * open: the driver's calls bind contexts to the thread that makes them);
 * returns how much it did, 0 also when the turn is taken or not allowed.
 * For callers that hold no lock of comm. */
int ipcp__comm_drive(ipcp_comm_t *comm);
/* ipcp__comm_submit, then the command run by the caller when it may. */
void ipcp__comm_submit_drive(ipcp_comm_t *comm, ipcp_request_t *req);
/* Marks a request done (any thread); user requests wake their waiter,
 * internal ones are freed. */
void ipcp__req_complete(ipcp_request_t *req, ipcp_status_t st, const char *msg);
/* Queues a message for a peer; fds are owned by the message afterwards. */
ipcp_status_t ipcp__peer_post(ipcp_comm_t *comm, ipcp__peer_t *peer,
                              const void *msg, size_t len, const int *fds,
                              int nfds);
/* The same for a message in two parts (a header and a payload). */
ipcp_status_t ipcp__peer_postv(ipcp_comm_t *comm, ipcp__peer_t *peer,
                               const void *msg, size_t len, const void *tail,
                               size_t tail_len, const int *fds, int nfds);
void ipcp__peer_lost(ipcp_comm_t *comm, ipcp__peer_t *peer, const char *why);
/* A write to the peer failed (why): later ones fail at once, and the loss
 * waits until what it sent is read (the end of its socket). */
void ipcp__peer_wr_broken(ipcp_comm_t *comm, ipcp__peer_t *peer,
                          const char *why);
/* "rank N finalized", or "rank N is gone" with why it was lost, in buf. */
const char *ipcp__peer_gone(const ipcp__peer_t *peer, char *buf, size_t len);
/* Handles one control message from a peer (socket or inbox); fds are owned
 * by it afterwards.  Progress thread (and the fuzz harness of tests/fuzz). */
void ipcp__dispatch(ipcp_comm_t *comm, ipcp__peer_t *peer,
                    const unsigned char *msg, size_t len, int *fds, int nfds);
/* Track callback: hands the finished transfer to the progress thread. */
void ipcp__xfer_track_done(ipcp__track_t *t);
/* Completes the user's request of a transfer whose data is all in place
 * (its queues' flags seen), before its track ends; the request then stays
 * allocated until ipcp__run_done.  Progress thread only. */
void ipcp__xfer_end_early(ipcp__xfer_t *x);
/* A zeroed request of the caller's own (a blocking call's, on its stack:
 * never freed, never listed in comm->reqs) made ready as ipcp__req_new
 * makes one. */
void ipcp__req_init(ipcp_comm_t *comm, ipcp_request_t *req, int type);
ipcp_request_t *ipcp__req_new(ipcp_comm_t *comm, int type);
/* Sleeps until req is done (completion broadcasts to sleepers). */
void ipcp__req_sleep(ipcp_request_t *req);
/* Drops a reference (the owner's, or the engine's after an early end);
 * the last one frees, and with it the request's handle if it has one. */
void ipcp__req_free(ipcp_request_t *req);
/* Drops the owner's reference: its handle goes stale at once, even while
 * the engine still holds the request (a transfer that ended early). */
void ipcp__req_disown(ipcp_request_t *req);
void ipcp__comm_teardown(ipcp_comm_t *comm);
/* Tells every peer the path this rank forces on what it receives. */
void ipcp__comm_announce_path(ipcp_comm_t *comm);

/* ---- engine/match.c ---------------------------------------------------- */
void ipcp__match_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
void ipcp__match_msg(ipcp_comm_t *comm, ipcp__peer_t *peer,
                     const unsigned char *msg, size_t len, int *fds, int nfds);
/* Answers an RTS with a CTS that ends the sender's transfer: st (msg with
 * an error), flags and path (a DRIVEN one: the receiver copied it). */
void ipcp__cts_end(ipcp_comm_t *comm, ipcp__peer_t *peer, uint64_t id,
                   uint32_t flags, int path, ipcp_status_t st, const char *msg);
/* Answers an RTS with a CTS that carries an error. */
void ipcp__nack(ipcp_comm_t *comm, ipcp__peer_t *peer, uint64_t id,
                ipcp_status_t st, const char *msg);
void ipcp__match_fail_peer(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           ipcp_status_t st, const char *msg);
/* The caller's own way (no progress thread): a small host send written
 * into the peer's inbox, or a host receive matched or posted at once.
 * Returns 1 when it took req (a send is complete then), 0 when req must
 * go to the progress thread. */
int ipcp__match_fast(ipcp_comm_t *comm, ipcp_request_t *req);
/* Whether a receive with tag is posted for peer's messages: 0 none, 1 one
 * whose caller reads the inbox itself (watch), or rx_lock is taken, 2
 * another. */
int ipcp__match_posted(ipcp__peer_t *peer, int tag);
/* An eager message (IPCP_MSG_EAGER): to the first receive posted with its
 * tag, or kept.  caller: a waiting caller reads it, which leaves it (0)
 * when it would need the device or the message is malformed. */
int ipcp__match_eager(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      const unsigned char *msg, size_t len, int caller);

/* ---- engine/xfer.c ----------------------------------------------------- */
/* Receiver side: chooses the path for a matched RTS, enqueues its half and
 * answers with a CTS.  dst/attr describe where the data lands. */
void ipcp__xfer_accept(ipcp_comm_t *comm, ipcp__peer_t *peer,
                       const ipcp__msg_rts_t *rts, ipcp_request_t *req,
                       ipcp_path_t force);
/* Sender side: runs its half on a CTS. */
void ipcp__xfer_on_cts(ipcp_comm_t *comm, ipcp__peer_t *peer,
                       ipcp_request_t *req, const ipcp__msg_cts_t *cts,
                       int *fds, int nfds);
/* ---- engine/mbox.c --------------------------------------------------- */
void ipcp__mbox_offer(ipcp_comm_t *comm);
void ipcp__mbox_on_offer(ipcp_comm_t *comm, ipcp__peer_t *peer,
                         const unsigned char *msg, size_t len, int *fds,
                         int nfds);
void ipcp__mbox_try_switch(ipcp_comm_t *comm, ipcp__peer_t *peer);
/* One message into the peer's inbox (through the socket and a marker when
 * it has descriptors or does not fit a slot); IPCP_IN_PROGRESS: full. */
ipcp_status_t ipcp__mbox_send(ipcp__peer_t *peer, const void *data, size_t len,
                              const int *fds, int nfds);
int ipcp__mbox_read(ipcp_comm_t *comm, ipcp__peer_t *peer,
                    void (*dispatch)(ipcp_comm_t *, ipcp__peer_t *,
                                     const unsigned char *, size_t, int *, int),
                    void *buf, size_t cap);
int ipcp__mbox_sleep(ipcp_comm_t *comm);
void ipcp__mbox_awake(ipcp_comm_t *comm);
/* Longest message the mailbox carries in its slots (headers included). */
size_t ipcp__mbox_msg_max(const ipcp__peer_t *peer);
/* Slots of every ring of a job of size ranks (engine/mbox.c). */
uint32_t ipcp__mbox_slots(int size);
/* Bytes of a ring of that many slots, its header included. */
size_t ipcp__mbox_bytes(uint32_t slots);
/* A caller's message into the peer's inbox, when nothing of ours waits
 * before it (commands, the socket's queue); IPCP_IN_PROGRESS: not now. */
ipcp_status_t ipcp__mbox_send_fast(ipcp__peer_t *peer, const void *hdr,
                                   size_t hlen, const void *data, size_t len);
/* A caller waits for req (a receive it posted) reading the peer's inbox
 * itself, up to spin_ns. */
void ipcp__mbox_wait(ipcp_comm_t *comm, ipcp_request_t *req, uint64_t spin_ns);
/* One look at the inbox for req (a receive its caller posted itself), as
 * ipcp_test makes: the progress thread leaves such messages to callers
 * for spin_us. */
void ipcp__mbox_poll(ipcp_comm_t *comm, ipcp_request_t *req);
void ipcp__mbox_close(ipcp__peer_t *peer);

/* Progress loop: enqueues the next chunk of the oldest transfer still
 * being staged (ipcp__stage_t); returns 1 when it did. */
int ipcp__stage_poll(ipcp_comm_t *comm);
/* Enqueues every chunk still to go (the progress thread's exit). */
void ipcp__stage_flush_all(ipcp_comm_t *comm);
/* Progress loop: notes which parts of the watched striped transfers have
 * ended (IPCPIPE_STRIPE_ADAPT). */
void ipcp__stripe_watch(ipcp_comm_t *comm);
/* A watched transfer completed (ok: without failure): its watch ends. */
void ipcp__stripe_watch_end(ipcp_comm_t *comm, ipcp__xfer_t *x, int ok);
/* Fills a transfer's error slot in the channel for the receiver. */
void ipcp__err_report(ipcp__errslot_t *slot, uint64_t seq, ipcp__track_t *t);
/* Receiver: copies eager bytes into a device buffer on its queue. */
void ipcp__xfer_eager_to_device(ipcp_comm_t *comm, ipcp__peer_t *peer,
                                ipcp_request_t *req, const void *data,
                                size_t len);
/* One-sided ops on a mapped or pvm-reachable region, without the owner. */
void ipcp__xfer_onesided_direct(ipcp_comm_t *comm, ipcp_request_t *req);
/* Returns the queue set for a direction, creating it. */
ipcp_status_t ipcp__qset_get(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             ipcp__dir_t *dir, const ipcp__mem_attr_t *attr,
                             ipcp__qset_t **qs);
int ipcp__qset_index(const ipcp__mem_attr_t *attr);
void ipcp__dir_destroy(ipcp_comm_t *comm, ipcp__dir_t *dir);
void ipcp__import_put(ipcp_comm_t *comm, ipcp__peer_t *peer,
                      ipcp__import_t *imp);
/* Forgets the peer's export of region id (0: all of them). */
void ipcp__rexport_drop(ipcp__peer_t *peer, uint64_t id);
void ipcp__rexport_put(ipcp__peer_t *peer, uint64_t id,
                       const ipcp__export_t *exp, int fd);
/* Lost peer: releases device waits by writing the flags (host waits see
 * peer->lost themselves). */
void ipcp__xfer_release_waits(ipcp_comm_t *comm, ipcp__peer_t *peer);

/* ---- engine/dev.c ------------------------------------------------------ */
/* Where the device backend stands (comm->dev_state). */
enum { IPCP_DEV_CLOSED = 0, IPCP_DEV_OPEN = 1, IPCP_DEV_FAILED = 2 };

/* The device backend's instance if it is open, else NULL (any thread). */
static inline ipcp__backend_t *ipcp__dev(ipcp_comm_t *comm)
{
    return __atomic_load_n(&comm->cuda, __ATOMIC_ACQUIRE);
}
/* The device backend's instance, opened now if it is not yet (once per
 * communicator, whichever thread comes first); NULL when there is none or
 * it cannot open here, with the reason as last error (logged once, at the
 * level of `level`).  why names the use, for the log.  No lock held. */
ipcp__backend_t *ipcp__dev_get(ipcp_comm_t *comm, int level, const char *why);
/* As ipcp__dev_get for a pointer of unknown kind: opens the backend only
 * if memory of its kind can exist in this process (its ops' present). */
ipcp__backend_t *ipcp__dev_for_ptr(ipcp_comm_t *comm);
/* Whether the device backend is open or may still open (a peer's lane
 * waits for us then, rather than being told we have none). */
int ipcp__dev_possible(ipcp_comm_t *comm);

/* ---- engine/mem.c ------------------------------------------------------ */
ipcp_status_t ipcp__mem_attr(ipcp_comm_t *comm, const void *ptr, size_t len,
                             ipcp__mem_attr_t *attr,
                             const ipcp__backend_ops_t **ops,
                             ipcp__backend_t **be);
/* The allocation (from ipcp_mem_alloc) that holds [ptr, ptr+len), or NULL.
 * Call with comm->mem_lock held. */
ipcp__region_t *ipcp__region_find_alloc(ipcp_comm_t *comm, const void *ptr,
                                        size_t len);
/* As ipcp__region_find_alloc, but not a region made for the user's memory
 * (auto) once that memory was freed and another allocation, buffer_id,
 * took its place.  mem_lock held. */
ipcp__region_t *ipcp__region_find_live(ipcp_comm_t *comm, const void *ptr,
                                       size_t len, uint64_t buffer_id);
ipcp__region_t *ipcp__region_find_id(ipcp_comm_t *comm, uint64_t id);
/* The exported record of the device allocation holding attr's pointer
 * (attr->base/size/buffer_id), made on first use; NULL when it cannot be
 * exported (reason logged).  A record for an older allocation at the same
 * address (other buffer id) is retired first.  Takes comm->mem_lock. */
ipcp__region_t *ipcp__region_auto(ipcp_comm_t *comm,
                                  const ipcp__mem_attr_t *attr);
void ipcp__mem_on_map_req(ipcp_comm_t *comm, ipcp__peer_t *peer,
                          const ipcp__msg_map_req_t *m);
void ipcp__mem_on_map_rep(ipcp_comm_t *comm, ipcp__peer_t *peer,
                          const ipcp__msg_map_rep_t *m, int *fds, int nfds);
void ipcp__mem_on_reg_gone(ipcp_comm_t *comm, ipcp__peer_t *peer,
                           const ipcp__msg_reg_gone_t *m);
void ipcp__mem_notify_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
/* Deregistration (mem.c): tells every peer, then waits for the answers of
 * those that imported the region and for our own operations on it. */
void ipcp__mem_dereg_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
/* Ends the DEREG requests that are done, gave up on a lost peer, or
 * reached their deadline; returns 1 while any still waits. */
int ipcp__mem_dereg_poll(ipcp_comm_t *comm);
/* A one-sided operation without the owner, or an owner-side one, ended. */
/* The end of a one-sided operation without the owner: 1 when the owner
 * waits for an answer (ipcp__rmem_answer, after the request completed, so
 * that the caller the owner tells finds it ended); *owner and *reg_id
 * name the region (the imported region may be released once the request
 * completed). */
int ipcp__rmem_op_end(ipcp_comm_t *comm, ipcp_rmem_t *rm, int *owner,
                      uint64_t *reg_id);
void ipcp__rmem_answer(ipcp_comm_t *comm, int owner, uint64_t reg_id);
void ipcp__region_op_end(ipcp_comm_t *comm, ipcp__region_t *r);
void ipcp__mem_import_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
void ipcp__mem_cleanup(ipcp_comm_t *comm);
/* pvm probe of a peer (cached in peer->pvm_to). */
int ipcp__pvm_allowed(ipcp_comm_t *comm, ipcp__peer_t *peer);
/* The region mapped for copies by the queues of attr's kind and device
 * (made on first use); NULL when it cannot be (reason logged once). */
void *ipcp__rmem_mapping(ipcp_comm_t *comm, ipcp_rmem_t *rm,
                         const ipcp__mem_attr_t *attr);

/* ---- engine/sync.c ----------------------------------------------------- */
ipcp_status_t ipcp__sync_acquire(ipcp_comm_t *comm, int device,
                                 ipcp__sync_t **e);
void ipcp__sync_put(ipcp__sync_t *e);
uint64_t *ipcp__sync_start(ipcp__sync_t *e);
uint64_t *ipcp__sync_done(ipcp__sync_t *e);
uint64_t ipcp__sync_gen(const ipcp__sync_t *e);
int ipcp__sync_started(const ipcp__sync_t *e);
/* The operation ended (any thread): releases the user's stream and the
 * entry (at once, or once its start lands). */
void ipcp__sync_end(ipcp_comm_t *comm, ipcp__sync_t *e);
/* Progress thread: starts deferred operations whose stream got there. */
int ipcp__sync_poll(ipcp_comm_t *comm);
int ipcp__sync_pending(ipcp_comm_t *comm);
/* Whether a user's stream of this process may be waiting on a flag the
 * progress thread writes: a stream-ordered operation or a small-message
 * lane kernel in flight.  The driver calls that synchronize a context
 * (memory allocation and registration, module loading) must not run then:
 * they would wait for that stream, and it for us. */
int ipcp__streams_wait(ipcp_comm_t *comm);
void ipcp__sync_cleanup(ipcp_comm_t *comm);

/* Whether this rank also moves data with the peer in one direction:
 * receives (rx = 1: posted and not matched, or in queues) or sends (rx = 0:
 * waiting for a CTS, or in queues) of at least IPCP_STRIPE_MIN_SIZE bytes,
 * those in queues of device memory only.  Progress thread. */
int ipcp__peer_busy(ipcp__peer_t *peer, int rx);
/* A device send offered its buffer (an RTS with IPCP_RTS_SRC): the sender
 * polls until its CTS comes, at most IPCPIPE_SPIN_US plus as long as the
 * receiver's copy would take at IPCP_AWAIT_BYTES_PER_NS, from the offer.
 * ipcp__await_end when the CTS came (or the send ended otherwise;
 * ipcp__req_complete calls it).  Progress thread only. */
void ipcp__await_offer(ipcp_comm_t *comm, ipcp_request_t *req);
void ipcp__await_end(ipcp_request_t *req);
/* Whether an offered send may end at any moment (now: ipcp__now_ns). */
static inline int ipcp__awaiting(ipcp_comm_t *comm, uint64_t now)
{
    return atomic_load_explicit(&comm->offers, memory_order_relaxed) > 0 &&
           now < atomic_load_explicit(&comm->await_until, memory_order_relaxed);
}

/* ---- engine/lane.c ----------------------------------------------------- */
/* Whether a stream-ordered send or receive (a CUDA buffer, attr filled)
 * goes through the small-message lane. */
int ipcp__lane_takes(const ipcp_comm_t *comm, const ipcp_request_t *req);
/* With IPCPIPE_SMALL set: makes this rank's lanes with every peer on
 * device, unless made already (user thread; at ipcp_mem_alloc and
 * ipcp_mem_register of device memory).  Loading kernels synchronizes the
 * context under CUDA's lazy loading, which must not happen while a user's
 * stream waits for the peer. */
void ipcp__lane_preload(ipcp_comm_t *comm, int device);
/* Launches its kernel on the user's stream (user thread).  Takes req: on
 * success it is in the lane's list (out set) or freed (out NULL); on
 * failure freed. */
ipcp_status_t ipcp__lane_post(ipcp_comm_t *comm, ipcp_request_t *req,
                              void *stream, ipcp_request_t **out);
/* Progress thread: a peer's LANE message; our LANE command; completions. */
void ipcp__lane_on_msg(ipcp_comm_t *comm, ipcp__peer_t *peer, const void *msg,
                       size_t len, int *fds, int nfds);
void ipcp__lane_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
int ipcp__lane_poll(ipcp_comm_t *comm);
/* The peer is gone: kernels waiting on it leave, their requests fail. */
void ipcp__lane_abort(ipcp_comm_t *comm, int peer, ipcp_status_t st,
                      const char *msg);
/* Teardown: waits (bounded) for every lane kernel, completes what is left
 * and frees the lanes. */
void ipcp__lane_teardown(ipcp_comm_t *comm);

/* ---- engine/trace.c ---------------------------------------------------- */
void ipcp__trace_open(ipcp_comm_t *comm);
void ipcp__trace_prepare(ipcp_comm_t *comm, ipcp__xfer_t *x, size_t n);
void ipcp__trace_mark(ipcp_request_t *req, int mark);
void ipcp__trace_piece(ipcp__xfer_t *x, size_t i, ipcp__qset_t *qs, int qi,
                       uint64_t bytes, int before);
/* Piece i is one half of a driven staged part's chunk (IPCP_STAGE_*). */
void ipcp__trace_piece_stage(ipcp__xfer_t *x, size_t i, int half);
void ipcp__trace_xfer(ipcp_comm_t *comm, ipcp__xfer_t *x, int rx, int path);
/* A send the receiver copied (IPCPIPE_DRIVE), ended by its last message:
 * the protocol's marks on one span from the call (no copies of ours). */
void ipcp__trace_send_driven(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             ipcp_request_t *req, int path);
void ipcp__trace_flush(ipcp_comm_t *comm);
void ipcp__trace_merge(ipcp_comm_t *comm);
void ipcp__trace_close(ipcp_comm_t *comm);

/* ---- engine/barrier.c -------------------------------------------------- */
void ipcp__barrier_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
void ipcp__barrier_msg(ipcp_comm_t *comm, ipcp__peer_t *peer, int type,
                       uint64_t epoch);
void ipcp__barrier_fail(ipcp_comm_t *comm, const char *msg);
/* Fails a barrier whose deadline passed (progress loop). */
void ipcp__barrier_check(ipcp_comm_t *comm);

#endif
