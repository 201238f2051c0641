/*
 * ipcpipe: pipelined transfers between the buffers of processes on one
 * machine (host memory, and GPU memory through CUDA IPC).
 *
 * Ownership
 *   Every object the library hands out (communicator, request, registration,
 *   imported registration) is allocated by the library and released by the
 *   matching call: ipcp_finalize, ipcp_wait/ipcp_test (on completion),
 *   ipcp_mem_deregister, ipcp_rmem_release.  Memory from ipcp_mem_alloc is
 *   released with ipcp_mem_free.  On error, output arguments are left
 *   untouched and nothing stays allocated.
 *
 *   The values of ipcp_comm_t *, ipcp_request_t *, ipcp_mem_t * and
 *   ipcp_rmem_t * are handles, not addresses: never NULL, to be compared
 *   and passed back only.  A handle goes stale when its object is released:
 *     - a request at ipcp_wait (from the call on), or at the ipcp_test
 *       that reports it done (*done = 1), whatever the transfer's status;
 *     - a registration at ipcp_mem_deregister, an imported region at
 *       ipcp_rmem_release;
 *     - a communicator at ipcp_finalize, and with it the handles of its
 *       requests not yet waited for, its registrations and its imported
 *       regions.
 *   A call given a stale handle touches nothing and fails with a message
 *   naming the handle ("request handle 0x... is stale: ..."):
 *   IPCP_ERR_STATE for a communicator, IPCP_ERR_INVALID for the others.
 *   A value the library never issued, or a handle of another type, is
 *   IPCP_ERR_INVALID.  Calls that return a value rather than a status
 *   (ipcp_comm_rank, ipcp_comm_size, ipcp_comm_job, ipcp_rmem_size,
 *   ipcp_rmem_owner) return -1, 0 or "" and set ipcp_last_error().  No
 *   handle value is ever issued twice in a process (a slot of the handle
 *   table is retired after 2^36 releases), so a stale handle never names
 *   a newer object.  Two threads that release one handle at once (two
 *   ipcp_mem_deregister calls, say) are safe too: one call releases it,
 *   the other fails as stale.  A call that merely uses a handle while
 *   another thread releases it remains the caller's race.
 *
 * Thread safety
 *   Any function may be called from any thread, concurrently, on the same
 *   communicator, except ipcp_finalize, which must not race with other calls
 *   on that communicator.  One request is waited on or tested by one thread
 *   at a time.
 *
 * Errors
 *   Every call returns an ipcp_status_t; negative values are errors.
 *   ipcp_strerror() gives the constant name of a status; ipcp_last_error()
 *   gives the message of the last error returned on the calling thread,
 *   naming its exact cause.  The library never exits or aborts the process.
 *
 * Ordering
 *   Two-sided messages between one pair of ranks match in order per
 *   (peer, tag): the n-th send to a peer with a tag matches the n-th receive
 *   posted for that peer and tag.  The receiver chooses the path.
 */
#ifndef IPCPIPE_H
#define IPCPIPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define IPCP_API __attribute__((visibility("default")))
#else
#define IPCP_API
#endif

#define IPCP_VERSION_MAJOR              0
#define IPCP_VERSION_MINOR              1
#define IPCP_VERSION_PATCH              0
#define IPCP_VERSION_ENCODE(ma, mi, pa) (((ma) << 16) | ((mi) << 8) | (pa))
#define IPCP_VERSION                                                           \
    IPCP_VERSION_ENCODE(IPCP_VERSION_MAJOR, IPCP_VERSION_MINOR,                \
                        IPCP_VERSION_PATCH)

/* Run-time version, IPCP_VERSION_ENCODE form, and as "major.minor.patch". */
IPCP_API unsigned ipcp_version(void);
IPCP_API const char *ipcp_version_string(void);

/* X(name, value, description).  Negative values are errors. */
#define IPCP_STATUS_MAP(X)                                                     \
    X(OK, 0, "success")                                                        \
    X(IN_PROGRESS, 1, "operation in progress")                                 \
    X(ERR_INVALID, -1, "invalid argument")                                     \
    X(ERR_NOMEM, -2, "out of memory")                                          \
    X(ERR_SYSTEM, -3, "system call failed")                                    \
    X(ERR_TIMEOUT, -4, "timed out")                                            \
    X(ERR_PEER_LOST, -5, "peer lost")                                          \
    X(ERR_TRUNCATED, -6, "message larger than receive buffer")                 \
    X(ERR_NOT_REGISTERED, -7, "memory not registered")                         \
    X(ERR_OUT_OF_RANGE, -8, "outside the registered region")                   \
    X(ERR_BAD_DESCRIPTOR, -9, "bad memory descriptor")                         \
    X(ERR_STATE, -10, "invalid state")                                         \
    X(ERR_UNSUPPORTED, -11, "not supported")                                   \
    X(ERR_CUDA, -12, "cuda error")                                             \
    X(ERR_BOOTSTRAP, -13, "bootstrap failed")                                  \
    X(ERR_PERMISSION, -14, "permission denied")                                \
    X(ERR_CONFIG, -15, "invalid setting")

typedef enum {
#define IPCP_STATUS_ENUM_(name, value, desc) IPCP_##name = (value),
    IPCP_STATUS_MAP(IPCP_STATUS_ENUM_)
#undef IPCP_STATUS_ENUM_
} ipcp_status_t;

/* Constant name of a status, e.g. "IPCP_ERR_TIMEOUT"; never NULL. */
IPCP_API const char *ipcp_strerror(ipcp_status_t status);
/* Constant one-line description of a status; never NULL. */
IPCP_API const char *ipcp_status_desc(ipcp_status_t status);
/* Message of the last error returned on this thread ("" if none). */
IPCP_API const char *ipcp_last_error(void);

typedef struct ipcp_comm ipcp_comm_t;
typedef struct ipcp_request ipcp_request_t;
typedef struct ipcp_mem ipcp_mem_t;
typedef struct ipcp_rmem ipcp_rmem_t;

/* How a transfer moves: written into the receiver's mapped buffer (direct),
 * through a ring of slots in shared memory that both sides copy through
 * (staged), inline in the control message (eager, small host messages), or
 * split between direct and staged at once, over different links (striped:
 * GPU to GPU; see IPCPIPE_STRIPE), or by kernels storing into the peer's
 * GPU memory (lane: small stream-ordered messages; see IPCPIPE_SMALL), or
 * through a ring of slots in device memory on the receiver's GPU (bounce:
 * GPU buffers that neither side can share, such as those of the default
 * cudaMallocAsync pool), or through the transport of a job that spans
 * nodes (remote: MPI, for ranks on other nodes; see ipcpipe_mpi.h).
 * Eager, striped, lane and remote are reported, never forced; a forced
 * bounce path applies to device to device transfers, and leaves those
 * with host memory to auto. */
typedef enum {
    IPCP_PATH_AUTO = 0,
    IPCP_PATH_DIRECT = 1,
    IPCP_PATH_STAGED = 2,
    IPCP_PATH_EAGER = 3,
    IPCP_PATH_STRIPED = 4,
    IPCP_PATH_LANE = 5,
    IPCP_PATH_BOUNCE = 6,
    IPCP_PATH_REMOTE = 7,
} ipcp_path_t;

IPCP_API const char *ipcp_path_name(ipcp_path_t path);

/* ------------------------------------------------------------------------ */
/* Communicator                                                              */

typedef struct ipcp_comm_params {
    size_t struct_size; /* sizeof(ipcp_comm_params_t); set by _init */
    int rank;           /* < 0: from the environment */
    int size;           /* < 0: from the environment */
    const char *job_id; /* NULL: from the environment */
    double timeout_s;   /* <= 0: IPCPIPE_TIMEOUT */
    ipcp_path_t path;   /* AUTO: IPCPIPE_PATH */
} ipcp_comm_params_t;

/* Fills *params with "take everything from the environment". */
IPCP_API void ipcp_comm_params_init(ipcp_comm_params_t *params);

/* Joins the job: finds rank and size (params, else IPCPIPE_RANK/SIZE/JOB,
 * else the variables of mpirun, srun or torchrun), meets every other rank
 * and starts the progress engine.  params may be NULL. */
IPCP_API ipcp_status_t ipcp_init(const ipcp_comm_params_t *params,
                                 ipcp_comm_t **comm);
/* Leaves the job and frees the communicator.  It tells every peer and waits
 * (at most IPCPIPE_TIMEOUT) for each to finalize or disconnect, so that no
 * transfer is cut short; peers' operations that still expect this rank fail
 * with IPCP_ERR_PEER_LOST.  Requests not yet waited for, registrations and
 * imported regions are freed, and their handles go stale (IPCP_ERR_INVALID
 * afterwards).  A second call on the same handle, like any call with it,
 * returns IPCP_ERR_STATE. */
IPCP_API ipcp_status_t ipcp_finalize(ipcp_comm_t *comm);

IPCP_API int ipcp_comm_rank(const ipcp_comm_t *comm);
IPCP_API int ipcp_comm_size(const ipcp_comm_t *comm);
/* Job identifier in use (constant for the communicator's life). */
IPCP_API const char *ipcp_comm_job(const ipcp_comm_t *comm);

/* Path used for transfers this rank receives (the receiver chooses), and
 * for one-sided operations this rank starts.  A forced path that cannot
 * serve a transfer fails it with a clear error.  Peers learn of a change by
 * a message: a send they start after a later synchronization (a barrier, a
 * message from this rank) sees it; small messages are sent eagerly only to
 * ranks that leave the path to auto. */
IPCP_API ipcp_status_t ipcp_comm_set_path(ipcp_comm_t *comm, ipcp_path_t path);

/* Returns once every rank has entered the barrier.  IPCP_ERR_PEER_LOST
 * when a rank is gone (or sent a message out of order), IPCP_ERR_TIMEOUT
 * when one did not come within IPCPIPE_TIMEOUT; after a timeout or a
 * message out of order, later barriers on the communicator fail with
 * IPCP_ERR_STATE, as one does while another thread's barrier on it runs. */
IPCP_API ipcp_status_t ipcp_barrier(ipcp_comm_t *comm);

/* ------------------------------------------------------------------------ */
/* Two-sided transfers and requests                                          */

typedef struct ipcp_xfer_info {
    size_t nbytes;    /* bytes moved */
    ipcp_path_t path; /* path that moved them */
} ipcp_xfer_info_t;

/* Non-blocking.  buf may be host or device memory; the library tells which.
 * tag >= 0.  On success *req is a new request for ipcp_wait/ipcp_test.
 * A receive smaller than the matching message fails with
 * IPCP_ERR_TRUNCATED and writes nothing into the receive buffer; the send
 * fails the same way, except an eager one (host memory, at most
 * IPCPIPE_EAGER bytes, receiver on path auto), which completed when it
 * left. */
IPCP_API ipcp_status_t ipcp_isend(ipcp_comm_t *comm, const void *buf,
                                  size_t len, int peer, int tag,
                                  ipcp_request_t **req);
IPCP_API ipcp_status_t ipcp_irecv(ipcp_comm_t *comm, void *buf, size_t len,
                                  int peer, int tag, ipcp_request_t **req);

/* Blocking forms. info may be NULL. */
IPCP_API ipcp_status_t ipcp_send(ipcp_comm_t *comm, const void *buf, size_t len,
                                 int peer, int tag);
IPCP_API ipcp_status_t ipcp_recv(ipcp_comm_t *comm, void *buf, size_t len,
                                 int peer, int tag, ipcp_xfer_info_t *info);

/* Waits for completion, frees the request (its handle is stale from then
 * on), returns the transfer's status.  info (may be NULL) is written on
 * success. */
IPCP_API ipcp_status_t ipcp_wait(ipcp_request_t *req, ipcp_xfer_info_t *info);
/* *done = 0: still running (returns IPCP_IN_PROGRESS, request kept).
 * *done = 1: completed; the request is freed and its status returned. */
IPCP_API ipcp_status_t ipcp_test(ipcp_request_t *req, int *done,
                                 ipcp_xfer_info_t *info);
/* ipcp_wait for at most timeout_s seconds (0 to 1e9): as ipcp_test when it
 * returns, so a caller can look at something else (a signal, a deadline)
 * between waits. */
IPCP_API ipcp_status_t ipcp_wait_for(ipcp_request_t *req, double timeout_s,
                                     int *done, ipcp_xfer_info_t *info);

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */

typedef enum {
    IPCP_MEM_HOST = 0,
    IPCP_MEM_CUDA = 1,
} ipcp_mem_type_t;

typedef struct ipcp_alloc_params {
    size_t struct_size;   /* sizeof(ipcp_alloc_params_t) */
    ipcp_mem_type_t type; /* HOST (default) or CUDA */
    int device;           /* CUDA device ordinal, for IPCP_MEM_CUDA */
} ipcp_alloc_params_t;

IPCP_API void ipcp_alloc_params_init(ipcp_alloc_params_t *params);

/* Memory that peers can map (memfd on host, VMM on CUDA).  params may be
 * NULL (host).  Receiving into it lets the sender write directly. */
IPCP_API ipcp_status_t ipcp_mem_alloc(ipcp_comm_t *comm, size_t len,
                                      const ipcp_alloc_params_t *params,
                                      void **ptr);
/* ptr must be exactly what ipcp_mem_alloc returned. */
IPCP_API ipcp_status_t ipcp_mem_free(ipcp_comm_t *comm, void *ptr);

/* Registers [buf, buf+len) for one-sided access by peers.  Memory from
 * ipcp_mem_alloc and memory the user allocated are both accepted. */
IPCP_API ipcp_status_t ipcp_mem_register(ipcp_comm_t *comm, void *buf,
                                         size_t len, ipcp_mem_t **mem);
/* Ends the registration.  It returns once no operation on the region is in
 * flight anywhere: every peer that imported it has finished its puts and
 * gets on it (later ones fail with IPCP_ERR_NOT_REGISTERED), and so has
 * this rank on their behalf; the memory may then be freed or reused.  A
 * peer that does not confirm within IPCPIPE_TIMEOUT is cut off (its later
 * operations fail with IPCP_ERR_PEER_LOST) and IPCP_ERR_TIMEOUT is
 * returned: a stopped process could still write the region when it
 * resumes, so keep the memory until that peer is known to be gone. */
IPCP_API ipcp_status_t ipcp_mem_deregister(ipcp_mem_t *mem);

/* Upper bound on a packed descriptor's size. */
#define IPCP_DESC_MAX 256

/* Writes an opaque descriptor of the registration into desc (capacity cap)
 * and its length into *len.  The application moves it to peers however it
 * likes; it carries no pointers a peer would dereference. */
IPCP_API ipcp_status_t ipcp_mem_pack(const ipcp_mem_t *mem, void *desc,
                                     size_t cap, size_t *len);

/* Checks a descriptor (size, checksum, job, owner), asks the owner to
 * confirm the region it names (id, address, length, memory type: the
 * checksum detects corruption, not forgery) and maps the region where
 * possible.  A bad or forged descriptor is rejected with
 * IPCP_ERR_BAD_DESCRIPTOR without being used. */
IPCP_API ipcp_status_t ipcp_rmem_import(ipcp_comm_t *comm, const void *desc,
                                        size_t len, ipcp_rmem_t **rmem);
/* Refused (IPCP_ERR_STATE) while operations on the region are in flight:
 * wait for them first. */
IPCP_API ipcp_status_t ipcp_rmem_release(ipcp_rmem_t *rmem);
/* Size in bytes and owner rank of an imported region. */
IPCP_API size_t ipcp_rmem_size(const ipcp_rmem_t *rmem);
IPCP_API int ipcp_rmem_owner(const ipcp_rmem_t *rmem);

/* One-sided: put copies len bytes from local src to the remote region at
 * offset; get copies from the remote region at offset into local dst.
 * Completion of a put means the data is in the remote region. */
IPCP_API ipcp_status_t ipcp_iput(ipcp_comm_t *comm, const void *src, size_t len,
                                 ipcp_rmem_t *dst, size_t offset,
                                 ipcp_request_t **req);
IPCP_API ipcp_status_t ipcp_iget(ipcp_comm_t *comm, void *dst, size_t len,
                                 ipcp_rmem_t *src, size_t offset,
                                 ipcp_request_t **req);
IPCP_API ipcp_status_t ipcp_put(ipcp_comm_t *comm, const void *src, size_t len,
                                ipcp_rmem_t *dst, size_t offset);
IPCP_API ipcp_status_t ipcp_get(ipcp_comm_t *comm, void *dst, size_t len,
                                ipcp_rmem_t *src, size_t offset);

/* ------------------------------------------------------------------------ */
/* Settings (the IPCPIPE_* environment variables)                            */

typedef struct ipcp_setting_info {
    const char *name;  /* e.g. "IPCPIPE_CHUNK" */
    const char *value; /* value in effect, formatted */
    const char *deflt; /* default, formatted */
    const char *doc;   /* one line */
    int is_set;        /* 1 when the environment set it */
} ipcp_setting_info_t;

/* Number of settings; index them 0..count-1 with ipcp_setting_get.  An
 * invalid value in the environment is reported by ipcp_init and by
 * ipcp_settings_check (IPCP_ERR_CONFIG, naming the variable). */
IPCP_API int ipcp_settings_count(void);
IPCP_API ipcp_status_t ipcp_setting_get(int index, ipcp_setting_info_t *info);
IPCP_API ipcp_status_t ipcp_settings_check(void);

#ifdef __cplusplus
}
#endif

#endif /* IPCPIPE_H */
