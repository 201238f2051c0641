/* The backend interface.  The engine moves data only through this const
 * table of functions; a backend knows nothing of the protocol.
 *
 * A queue executes its operations in order, asynchronously to the caller
 * (host: a worker thread; CUDA: a stream).  Flags are 64-bit words in memory
 * shared between processes; a wait finishes when (int64_t)(*flag - value)
 * >= 0, the comparison CUDA's CU_STREAM_WAIT_VALUE_GEQ makes, so counters may
 * wrap.  A flag write is ordered after every earlier operation of its queue
 * and makes their data visible to the peer that sees the flag. */
#ifndef IPCP_BACKEND_H
#define IPCP_BACKEND_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipcpipe.h"
#include "backend/lane_abi.h"
#include "common/config.h"
#include "common/status.h"

typedef struct ipcp__backend ipcp__backend_t; /* a backend instance */
typedef struct ipcp__queue ipcp__queue_t;     /* defined by each backend */

/* Whether a flag's value cur has reached value: the wrapping comparison a
 * wait makes (top of this file). */
static inline int ipcp__flag_reached(uint64_t cur, uint64_t value)
{
    return (int64_t)(cur - value) >= 0;
}

/* Completion tracking of a group of operations spread over queues.  The
 * engine sets pending to the number of notify operations it will enqueue
 * and cb before enqueueing any.  Operations carry the track; once status is
 * not IPCP_OK they are skipped (a failed transfer stops moving data). */
typedef struct ipcp__track ipcp__track_t;
struct ipcp__track {
    atomic_int pending;
    atomic_int status;
    void (*cb)(ipcp__track_t *t); /* once, when pending reaches 0 */
    void *arg;                    /* the engine's */
    pthread_mutex_t lock;         /* guards errmsg */
    char errmsg[IPCP_ERRMSG_MAX]; /* written by the first failure */
};

void ipcp__track_init(ipcp__track_t *t, int pending,
                      void (*cb)(ipcp__track_t *t), void *arg);
void ipcp__track_destroy(ipcp__track_t *t);
/* Copies the failure message (any thread, any time). */
void ipcp__track_errmsg(ipcp__track_t *t, char *buf, size_t len);
/* Records the first failure (later ones are ignored). */
void ipcp__track_fail(ipcp__track_t *t, ipcp_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int ipcp__track_ok(ipcp__track_t *t)
{
    return atomic_load_explicit(&t->status, memory_order_acquire) == IPCP_OK;
}
/* Called by a backend when a notify operation is reached (any thread). */
void ipcp__track_notify(ipcp__track_t *t);

/* What the engine learns about a pointer. */
typedef struct ipcp__mem_attr {
    ipcp_mem_type_t type;
    int device;     /* CUDA ordinal; -1 for host */
    uintptr_t base; /* base of the allocation holding it; 0 unknown */
    size_t size;    /* size of that allocation; 0 unknown */
    /* The part of it that can be shared as one: the allocation, or, for
     * VMM memory mapped piece by piece, the mapping holding the pointer
     * (base/size then span the reservation).  0: as base/size. */
    uintptr_t map_base;
    size_t map_size;
    uint64_t buffer_id; /* unique id of the allocation (CUDA); 0 unknown */
} ipcp__mem_attr_t;

/* Exported memory, as it travels to a peer, with up to
 * IPCP_EXPORT_MAX_FDS file descriptors sent beside it (SCM_RIGHTS): one
 * for memory of one piece, one a piece for device memory mapped piece by
 * piece (PyTorch's expandable segments). */
#define IPCP_EXPORT_MAX     96
#define IPCP_EXPORT_MAX_FDS 64
typedef struct ipcp__export {
    uint32_t kind; /* backend-defined */
    uint32_t len;  /* bytes of data used */
    uint64_t size; /* bytes mappable from the export's base */
    uint8_t data[IPCP_EXPORT_MAX];
} ipcp__export_t;

/* The descriptors of one export, owned by whoever holds the set. */
typedef struct ipcp__fds {
    int n;
    int fd[IPCP_EXPORT_MAX_FDS];
} ipcp__fds_t;

/* Closes every descriptor of the set and empties it. */
void ipcp__fds_close(ipcp__fds_t *s);
/* Replaces the set's descriptors with duplicates of fds[0..n) (n at most
 * IPCP_EXPORT_MAX_FDS); -1 when one cannot be duplicated (the set is
 * then empty). */
int ipcp__fds_dup(ipcp__fds_t *s, const int *fds, int n);

/* How the staged part of a striped copy is ordered, which sets what it
 * can take (backend stripe_calibrate measures the one the engine will
 * use): RING, the two-sided ring between processes (flags handed over in
 * host memory for each chunk of a few slots); DRIVEN, one process's
 * copies (IPCPIPE_DRIVE: the receiver copies out, then in, each chunk
 * ordered by an event, through a buffer that holds the whole part). */
enum { IPCP_STRIPE_RING = 0, IPCP_STRIPE_DRIVEN = 1 };

/* A striping calibration between two devices (backend stripe_calibrate). */
typedef struct ipcp__stripe_cal {
    double share;      /* staged share that gained most; 0: none gained */
    uint64_t min_size; /* smallest size measured to gain with it */
    uint64_t size;     /* size of the figures below */
    double direct_gbs, staged_gbs, striped_gbs;
    /* The same at a larger size (0: not measured), where the fixed costs
     * of the staged part weigh less and its best share is larger. */
    uint64_t size_large;
    double share_large, direct_large_gbs, striped_large_gbs;
    /* Both directions at once at size_large, each split at share_bidir
     * (0: striping both ways did not gain or was not measured). */
    double share_bidir, bidir_direct_gbs, bidir_gbs;
} ipcp__stripe_cal_t;

typedef struct ipcp__backend_ops {
    const char *name;
    ipcp_mem_type_t type;

    /* Opens the backend.  Returns IPCP_ERR_UNSUPPORTED (quietly, with the
     * reason as last error) when it cannot run here. */
    ipcp_status_t (*open)(const ipcp__config_t *cfg, ipcp__backend_t **be);
    void (*close)(ipcp__backend_t *be);

    /* Whether memory of this backend can exist in this process, answered
     * without opening it and cheaply enough for every transfer (CUDA:
     * whether libcuda.so.1 is loaded; no process holds device memory
     * without it).  The engine opens a device backend for a buffer of
     * unknown kind only when this says 1.  NULL: always 1. */
    int (*present)(void);

    /* 1 when none of this backend's memory lies in the process's brk heap
     * or in a thread's stack (common/heap.h), so that a buffer there is
     * host memory without asking owns (CUDA: the driver reserves device
     * and managed memory elsewhere).  0: owns is asked about every
     * buffer. */
    int heap_free;

    /* 1 if ptr is this backend's memory (attr filled), else 0. */
    int (*owns)(ipcp__backend_t *be, const void *ptr, ipcp__mem_attr_t *attr);

    /* Memory peers can map.  *handle is the backend's record of it. */
    ipcp_status_t (*mem_alloc)(ipcp__backend_t *be, size_t len, int device,
                               void **ptr, void **handle);
    ipcp_status_t (*mem_free)(ipcp__backend_t *be, void *handle);
    /* Describes [ptr, ptr+len) for a peer; the export's base is ptr (a
     * backend that maps whole allocations keeps ptr's offset in data and
     * applies it on import), and exp->size is the bytes mappable from ptr.
     * handle is mem_alloc's, or NULL for memory the user allocated.  *fd is
     * -1 or a new descriptor that the caller closes.  IPCP_ERR_UNSUPPORTED
     * when it cannot be exported (the reason is the last error). */
    ipcp_status_t (*mem_export)(ipcp__backend_t *be, void *handle,
                                const void *ptr, size_t len,
                                ipcp__export_t *exp, int *fd);
    /* The descriptors a peer needs besides exp, an export of ptr whose
     * mem_export gave none (memory the backend did not allocate): made
     * anew for each peer, so that nothing of the user's memory is held
     * open here between transfers (an open descriptor would keep memory
     * the user frees allocated).  Returns how many were written to fds
     * (at most max, 0 when the export needs none), or -1 (the reason is
     * the last error).  NULL: no export needs any. */
    int (*mem_share)(ipcp__backend_t *be, const void *ptr,
                     const ipcp__export_t *exp, int *fds, int max);
    /* Where [ptr, +len) lies in memory mapped piece by piece (CUDA: VMM
     * mappings of equal size back to back, as PyTorch's expandable
     * segments make): the pieces' extent from the first one's base, and
     * an identity that changes when any of them is mapped anew.  0 when
     * it cannot be exported so (quietly).  NULL: never. */
    int (*mem_span)(ipcp__backend_t *be, const void *ptr, size_t len,
                    uintptr_t *base, size_t *size, uint64_t *id);
    /* Maps a peer's export for use by queues on `device` (CUDA: in that
     * device's context, since a copy issued on a stream of one device into a
     * mapping owned by another device's context is a cross-context copy that
     * serializes).  fds[0..nfds) are borrowed (what came with the export).
     * *ptr is where the export's base (the exporter's ptr) is mapped.  A
     * bad export is rejected, never trusted. */
    ipcp_status_t (*mem_import)(ipcp__backend_t *be, const ipcp__export_t *exp,
                                const int *fds, int nfds, int device,
                                void **ptr, void **handle);
    ipcp_status_t (*mem_unimport)(ipcp__backend_t *be, void *handle);

    /* Makes shared host memory (rings, flags) usable by this backend's
     * queues on `device` (CUDA: host registration); host: nothing to do. */
    ipcp_status_t (*shm_register)(ipcp__backend_t *be, void *ptr, size_t len,
                                  int device, void **handle);
    void (*shm_unregister)(ipcp__backend_t *be, void *handle);

    /* Identities of `device` and of every device whose memory it can
     * access directly (itself first), as 64-bit hashes of PCI bus ids that
     * mean the same in every process whatever CUDA_VISIBLE_DEVICES says.
     * Returns how many were written (at most max).  NULL for host. */
    int (*device_reach)(ipcp__backend_t *be, int device, uint64_t *ids,
                        int max);
    /* Whether work of several processes on `device` runs at once through
     * an MPS server (1), in turns of time slices (0), or unknown (-1).
     * NULL for host, and where the backend cannot tell. */
    int (*device_mps)(ipcp__backend_t *be, int device);
    /* Lets copies on src's queues reach dst's memory directly, for memory
     * this process allocated on dst outside mem_alloc (CUDA: peer access
     * of src's context to dst's; once per pair).  NULL for host. */
    ipcp_status_t (*device_link)(ipcp__backend_t *be, int src, int dst);
    /* Whether copies on device's queues may write [ptr, +len), memory the
     * user mapped (CUDA: VMM memory another allocator made answers with
     * the access its mapping grants device, which peer access does not
     * change; other memory IPCP_OK once device_link succeeded).  NULL:
     * always. */
    ipcp_status_t (*mem_access)(ipcp__backend_t *be, const void *ptr,
                                size_t len, int device);

    /* Queues.  Enqueueing never waits for earlier operations.  destroy
     * waits for what was enqueued, then frees. */
    ipcp_status_t (*queue_create)(ipcp__backend_t *be, int device,
                                  ipcp__queue_t **q);
    void (*queue_destroy)(ipcp__queue_t *q);
    /* As queue_create, for a queue whose copies and notifies are enqueued
     * from the user's threads (transfers with ranks on other nodes): each
     * call leaves what the thread had current as it found it (CUDA: the
     * device's context is pushed and popped).  NULL where unsupported. */
    ipcp_status_t (*queue_user)(ipcp__backend_t *be, int device,
                                ipcp__queue_t **q);
    ipcp_status_t (*copy)(ipcp__queue_t *q, void *dst, const void *src,
                          size_t len, ipcp__track_t *t);
    /* Copies to (write = 1) or from another process's memory at address
     * remote (host: process_vm_writev/readv).  NULL where unsupported. */
    ipcp_status_t (*rcopy)(ipcp__queue_t *q, pid_t pid, uint64_t remote,
                           void *local, size_t len, int write,
                           ipcp__track_t *t);
    /* t may be NULL: the write then happens even after a failure (the
     * engine uses that to release a peer that waits for the flag). */
    ipcp_status_t (*flag_write)(ipcp__queue_t *q, uint64_t *flag,
                                uint64_t value, ipcp__track_t *t);
    /* Waits for the flag.  abort (may be NULL) is checked while waiting; when
     * it becomes non-zero the wait fails the track with the status held in
     * *abort (e.g. IPCP_ERR_PEER_LOST).  Backends that wait on the device
     * ignore abort: the engine releases such waits by writing the flag. */
    ipcp_status_t (*flag_wait)(ipcp__queue_t *q, uint64_t *flag, uint64_t value,
                               const atomic_int *abort, ipcp__track_t *t);
    /* As flag_wait, for waits after which the queue reads only host
     * memory (the staged ring): a device's wait then need not flush remote
     * writes into its memory.  NULL: flag_wait serves. */
    ipcp_status_t (*flag_wait_ring)(ipcp__queue_t *q, uint64_t *flag,
                                    uint64_t value, const atomic_int *abort,
                                    ipcp__track_t *t);
    /* flag_write of wflag (untracked, as with t NULL) followed by
     * flag_wait_ring on flag, on one queue, for a staged ring that marks a
     * chunk and waits for the next.  Where the device takes both in one
     * submission the pair costs less than two operations.  NULL: the engine
     * calls the two. */
    ipcp_status_t (*flag_write_wait)(ipcp__queue_t *q, uint64_t *wflag,
                                     uint64_t wvalue, uint64_t *flag,
                                     uint64_t value, const atomic_int *abort);
    /* A queue over a stream the user owns (CUDA: a cudaStream_t of
     * `device`'s context; NULL, cudaStreamLegacy and cudaStreamPerThread
     * included), for flag operations made on the user's thread; destroy
     * frees the wrapper only.  NULL where unsupported. */
    ipcp_status_t (*queue_wrap)(ipcp__backend_t *be, int device, void *native,
                                ipcp__queue_t **q);
    /* Whether a user's stream (as queue_wrap takes it) can take a
     * stream-ordered transfer now: not while it captures a graph, which
     * would replay a transfer that happens once (its flags and message
     * numbers are the call's).  NULL: always. */
    ipcp_status_t (*stream_check)(ipcp__backend_t *be, int device,
                                  void *native);
    /* Makes dst wait for everything enqueued in src so far (queues of
     * this backend, also of two devices: a receiver-driven transfer joins
     * a stream of the sender's GPU and one of its own).  NULL where
     * unsupported. */
    ipcp_status_t (*join)(ipcp__queue_t *dst, ipcp__queue_t *src);
    /* Writes to *ns the CLOCK_MONOTONIC time (ns) at which every earlier
     * operation of the queue was done, before a later notify of the queue
     * completes (tracing).  NULL where unsupported. */
    ipcp_status_t (*stamp)(ipcp__queue_t *q, uint64_t *ns);
    /* Calls ipcp__track_notify(t) once every earlier operation is done,
     * even when t has failed. */
    ipcp_status_t (*notify)(ipcp__queue_t *q, ipcp__track_t *t);
    /* Runs fn(arg) in the queue's order, once every earlier operation is
     * done (also after a failure): for a report that must reach the peer
     * before a later flag does, when a copy can fail after it was queued
     * (host: process_vm_writev).  NULL where unsupported (a failed device
     * copy ends its context, which the peer sees as a loss). */
    ipcp_status_t (*call)(ipcp__queue_t *q, void (*fn)(void *arg), void *arg);
    /* Calls ipcp__track_notify(t) from a backend thread once the flag
     * reaches value, in no queue's order (for waits only the host needs:
     * it spares a queue's wait and the notify behind it).  When *abort
     * (may be NULL) becomes non-zero first, t fails with that status.
     * IPCP_ERR_UNSUPPORTED (or NULL) where not offered: the engine then
     * waits in a queue. */
    ipcp_status_t (*flag_watch)(ipcp__backend_t *be, uint64_t *flag,
                                uint64_t value, const atomic_int *abort,
                                ipcp__track_t *t);

    /* The small-message lane (engine/lane.c, layout in lane_abi.h).
     * lane_prepare loads the kernels for device and, unless ptr is NULL,
     * makes len bytes at ptr (this backend's mem_alloc memory on device) a
     * lane block, zeroed before it returns.  lane_launch enqueues the send
     * or receive kernel (IPCP_LANE_SEND/RECV) in a user's stream of device
     * (as queue_wrap takes it), from the user's thread.
     * NULL where there are no kernels (host; CUDA built without nvcc). */
    ipcp_status_t (*lane_prepare)(ipcp__backend_t *be, int device, void *ptr,
                                  size_t len);
    ipcp_status_t (*lane_launch)(ipcp__backend_t *be, int device, void *stream,
                                 int op, const ipcp__lane_kargs_t *a);

    /* The device's UUID as text and the driver's version (striping cache
     * keys).  0, or -1 when unknown.  NULL for host. */
    int (*device_ident)(ipcp__backend_t *be, int device, char *uuid, size_t len,
                        int *driver);
    /* Measures, in this process, a copy from device src to device dst over
     * the direct link alone and split with a pipelined copy through pinned
     * host memory at several shares, its staged part ordered as layout
     * (IPCP_STRIPE_*) orders it (engine/stripe.h).  NULL for host. */
    ipcp_status_t (*stripe_calibrate)(ipcp__backend_t *be, int src, int dst,
                                      int layout, ipcp__stripe_cal_t *out);
} ipcp__backend_ops_t;

extern const ipcp__backend_ops_t ipcp__host_backend_ops;
#ifdef IPCP_HAVE_CUDA
extern const ipcp__backend_ops_t ipcp__cuda_backend_ops;
#endif
/* Tests only: when set before ipcp_init, the device backend in place of
 * CUDA's (tests/engine/test_lane.c runs the small-message lane's kernels
 * on CPU threads, so that CI covers the engine's side of the lane). */
extern const ipcp__backend_ops_t *ipcp__device_backend_for_tests;

/* The nominal chunk of the staged part of a striped transfer of len bytes
 * (ring slots of slot bytes): a quarter of it, rounded down to a power of
 * two between 1 MiB and a slot.  Each chunk costs a hand-over through flags
 * in host memory, which measured about 20 us on H200s while the direct
 * part loads the same copy engines, so the part is cut in few chunks; it
 * must still start soon enough to end with the direct part.  The engine
 * and the backends' striping calibrations cut it the same way. */
static inline uint64_t ipcp__stripe_unit(uint64_t len, uint64_t slot)
{
    uint64_t u = (uint64_t)1 << 20;
    while (u * 2 <= len / 4 && u * 2 <= slot)
        u *= 2;
    return u < slot ? u : slot;
}

/* The staged share of a transfer of len bytes from the best shares s1 at
 * l1 and s2 at l2 > l1 (s2 <= 0: s1 everywhere).  The staged part ends
 * with the direct one when (1 - s) L / D = f + s L / S (D, S the two
 * paths' rates, f the staged part's fixed cost: pipeline fill,
 * hand-overs), so s = a - b / L: the line in 1 / L through the two
 * points, kept between 0 and the larger of them (past the best share the
 * staged part sets the time and costs far more than it gains below it).
 * The engine and the backends' calibrations (its smallest gaining size)
 * use the same line. */
static inline double ipcp__stripe_fit(double s1, uint64_t l1, double s2,
                                      uint64_t l2, uint64_t len)
{
    if (s1 <= 0 || len == 0)
        return 0;
    if (s2 <= 0 || l1 == 0 || l2 <= l1)
        return s1;
    double b = (s2 - s1) / (1.0 / (double)l1 - 1.0 / (double)l2);
    double hi = s1 > s2 ? s1 : s2;
    double s = s2 + b / (double)l2 - b / (double)len;
    return s < 0 ? 0 : s > hi ? hi : s;
}

/* Export kinds. */
enum {
    IPCP_EXPORT_HOST_MEMFD = 1,
    IPCP_EXPORT_CUDA_LEGACY = 2,
    IPCP_EXPORT_CUDA_VMM = 3,
    IPCP_EXPORT_CUDA_POOL = 4,
};

#endif
