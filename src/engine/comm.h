/* The communicator, and the calls that make it, run it and move
 * messages to its peers (comm.c, req.c, peer.c, incoming.c,
 * progress.c). */
#ifndef IPCP_ENGINE_COMM_H
#define IPCP_ENGINE_COMM_H

#include "engine/peer.h"
#include "engine/req.h"
#include "engine/region.h"
#include "common/config.h"
#include "common/fault.h"
#include "common/status.h"

/* Finalize's steps on the progress thread, in order; a state is left only
 * for a later one. */
typedef enum ipcp__fin {
    IPCP_FIN_NONE, /* not asked */
    IPCP_FIN_HELD, /* asked while transfers whose requests ended early run:
                      the goodbye waits for them, up to the timeout */
    IPCP_FIN_SAID, /* goodbye sent: waiting for every peer's, up to the
                      timeout */
    IPCP_FIN_DONE, /* its request completed */
} ipcp__fin_t;

struct ipcp_comm {
    uint64_t magic;
    ipcp__handle_t handle;
    int rank; /* this node's ranks: rank among them, and how many */
    int size;
    /* Ranks of the job on other nodes, through a transport (NULL: the
     * job is this node's; engine/remote.h) */
    struct ipcp__remote *remote;
    /* Its stream-ordered transfers waiting or running
     * (engine/remote_order.h); read by the progress thread. */
    atomic_int remote_ordered;
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
    /* What a turn reads each peer message into (IPCP_RX_MAX bytes; under
     * prog_lock): uint64_t keeps it aligned for the structs of proto.h. */
    uint64_t *rxbuf;

    const ipcp__backend_ops_t *host_ops;
    ipcp__backend_t *host;
    /* The device backend: its table is chosen at init (NULL: none built,
     * or IPCPIPE_CUDA=off) and never changes; its instance is opened on
     * first use (engine/dev.c) and read through ipcp__dev().  dev_lock
     * serializes the opening and is taken with no other lock held. */
    const ipcp__backend_ops_t *dev_ops;
    ipcp__backend_t *dev_be;
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
     * whoever holds it.  Taken before any other lock of comm but
     * dev_lock (common/lockorder.h has the order). */
    pthread_mutex_t prog_lock;
    /* The thread is in (or going to) a poll() that blocks until a
     * descriptor it chose before a caller's turn is ready (written under
     * prog_lock); a caller's last turn left work only further turns move
     * on (ipcp__comm_drive, ipcp__comm_undrive). */
    atomic_int thread_blocks;
    atomic_int turn_left;
    atomic_int nstaging; /* transfers in staging (callers read it) */
    atomic_int sleepers; /* callers in (or going to) cond's wait */
    ipcp__list_t cmds;
    ipcp__list_t dones;
    /* Progress thread: transfers whose requests ended early still running
     * (ipcp__xfer_end_early). */
    int early_live;
    /* prog_lock (the thread, or a caller's turn): where finalize is
     * (changed only by ipcp__fin_to), its request while it runs, and when
     * the step it is in gives up waiting. */
    ipcp__fin_t fin;
    ipcp_request_t *fin_req;
    double fin_deadline;
    /* Keepalive (progress thread): when peers are checked next (ns), and
     * whether a request waited on any of them at the last check. */
    uint64_t ka_next;
    int ka_awaited;
    int wr_broken; /* progress thread: peers whose link is BROKEN */

    pthread_mutex_t mem_lock; /* regions, rmems, next_region_id */
    ipcp__list_t regions;
    /* How many regions there are (changed under mem_lock): a buffer's
     * classification skips the lock and the list while there are none */
    atomic_int nregions;
    /* Why a user's device buffer goes staged was logged at info level
     * once (ipcp__region_auto); later ones go to debug: it is asked at
     * every transfer of such a buffer (no region is kept for it). */
    atomic_int unshared_said;
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

    /* barrier (src/api_barrier.c: its caller's, one at a time) */
    atomic_int bar_busy; /* a barrier runs */
    uint64_t bar_epoch;  /* barriers this rank has entered */
    int bar_broken;      /* one failed midway: ranks disagree on epochs */
    /* Its messages of each round, out and in: a failed barrier's sends
     * and receives may still run, into memory that stays. */
    ipcp__bar_msg_t bar_out[IPCP_BAR_ROUNDS], bar_in[IPCP_BAR_ROUNDS];
};

/* The object behind a public handle, or NULL when the handle is not live
 * (the public pointer types carry handle values; api.c resolves them the
 * same way before every use).  For tests that reach into internals. */
static inline ipcp_comm_t *ipcp__comm_of(const ipcp_comm_t *handle)
{
    return (ipcp_comm_t *)ipcp__handle_get((uintptr_t)handle, IPCP_HANDLE_COMM);
}

/* A communicator of rank in size for job, with its locks, lists and
 * peers set up (no sockets, backends or thread yet). */
ipcp_status_t ipcp__comm_new(int rank, int size, const char *job,
                             double timeout_s, ipcp_comm_t **out);
/* Frees what ipcp__comm_new made (sockets, backends and thread are the
 * caller's to end first). */
void ipcp__comm_delete(ipcp_comm_t *comm);
/* Starts the progress thread and returns once every peer's thread has
 * announced itself (its PATH), or fails (thread stopped) when a peer was
 * lost or the timeout passed first. */
ipcp_status_t ipcp__comm_start(ipcp_comm_t *comm);
void ipcp__comm_stop(ipcp_comm_t *comm);
/* Wakes the progress thread (any thread). */
void ipcp__comm_wake(ipcp_comm_t *comm);
/* Hands a request to the progress thread. */
void ipcp__comm_submit(ipcp_comm_t *comm, ipcp_request_t *req);
/* A caller's turn of progress, for a host-only process (no device backend
 * open: the driver's calls bind contexts to the thread that makes them);
 * returns how much it did, 0 also when the turn is taken or not allowed.
 * For callers that hold no lock of comm. */
int ipcp__comm_drive(ipcp_comm_t *comm);
/* A caller that took turns stops taking them (it returns, or sleeps):
 * wakes the thread if a turn left work and the thread blocks. */
void ipcp__comm_undrive(ipcp_comm_t *comm);
/* Whether callers may take turns (ipcp__comm_drive): not once the device
 * backend is open. */
int ipcp__comm_can_drive(const ipcp_comm_t *comm);
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
/* Moves peer's link to state `to` (forward only; a step back or in place
 * returns 0 and changes nothing), counting BROKEN peers in
 * comm->wr_broken; 1 when it moved. */
int ipcp__peer_to(ipcp_comm_t *comm, ipcp__peer_t *peer, ipcp__peer_link_t to);
/* Nothing more may be written to it (BROKEN or CLOSED). */
static inline int ipcp__peer_unwritten(const ipcp__peer_t *peer)
{
    return peer->link != IPCP_PEER_OPEN;
}
static inline int ipcp__peer_closed(const ipcp__peer_t *peer)
{
    return peer->link == IPCP_PEER_CLOSED;
}
void ipcp__peer_lost(ipcp_comm_t *comm, ipcp__peer_t *peer, const char *why);
/* IPCP_REQ_DROP: ends req's peer with the reason in req->errmsg unless
 * it is gone already, and fails req with why it is gone. */
void ipcp__peer_drop_cmd(ipcp_comm_t *comm, ipcp_request_t *req);
/* A write to the peer failed (why): later ones fail at once, and the loss
 * waits until what it sent is read (the end of its socket). */
void ipcp__peer_wr_broken(ipcp_comm_t *comm, ipcp__peer_t *peer,
                          const char *why);
/* "rank N finalized", or "rank N is gone" with why it was lost, in buf;
 * N as the caller numbers ranks (ipcp__job_rank). */
const char *ipcp__peer_gone(const ipcp_comm_t *comm, const ipcp__peer_t *peer,
                            char *buf, size_t len);
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
 * never freed, never given a handle) made ready as ipcp__req_new
 * makes one. */
void ipcp__req_init(ipcp_comm_t *comm, ipcp_request_t *req, int type);
ipcp_request_t *ipcp__req_new(ipcp_comm_t *comm, int type);
/* How many freed requests this thread keeps for reuse (default 1024). */
void ipcp__req_cache_cap(unsigned n);
/* Sleeps until req is done (completion broadcasts to sleepers), or until
 * `until` (ipcp__now_ns's clock; 0: no limit); whether it is done. */
int ipcp__req_sleep(ipcp_request_t *req, uint64_t until);
/* Drops a reference (the owner's, or the engine's after an early end);
 * the last one frees, and with it the request's handle if it has one. */
void ipcp__req_free(ipcp_request_t *req);
/* Drops the owner's reference: its handle goes stale at once, even while
 * the engine still holds the request (a transfer that ended early). */
void ipcp__req_disown(ipcp_request_t *req);
void ipcp__comm_teardown(ipcp_comm_t *comm);
/* Tells every peer the path this rank forces on what it receives. */
void ipcp__comm_announce_path(ipcp_comm_t *comm);

#endif
