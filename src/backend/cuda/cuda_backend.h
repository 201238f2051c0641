/* Private to the CUDA backend (and its tests): the instance, contexts, the
 * layout of CUDA exports, and the functions each file provides.
 *
 * Contexts.  Every device is used through its primary context (the one the
 * CUDA runtime uses too), retained on first use and released at close.  Calls
 * made for the user's threads (owns, alloc, export, close) push the context
 * they need and pop it afterwards, so the caller's current context is left
 * as it was.  Queue operations run on the engine's progress thread, which
 * only the library uses: there the context is switched with cuCtxSetCurrent
 * and remembered in a thread-local cache, so consecutive operations on one
 * device cost no driver call for it. */
#ifndef IPCP_BACKEND_CUDA_BACKEND_H
#define IPCP_BACKEND_CUDA_BACKEND_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_driver.h"
#include "common/list.h"

typedef struct ipcp__cuda_dev {
    CUdevice dev;
    CUcontext ctx; /* primary context once retained, else NULL (atomic) */
    int vmm;       /* shareable VMM allocations (POSIX fd handles) */
    int memops;    /* 64-bit stream memory operations */
    size_t gran;   /* VMM allocation granularity; 0 until asked (atomic) */
    uint64_t id;   /* hash of the PCI bus id: the same in every process */
    int flush;     /* waits can flush remote writes */
    int mps;       /* ipcp__cu_device_mps() */
    /* Tracing: an event and the CLOCK_MONOTONIC time it completed, to turn
     * event times into host times (progress thread only). */
    CUevent anchor;
    uint64_t anchor_ns;
    /* Small-message lane kernels, loaded on first use (under be->lock). */
    CUmodule lane_mod;
    CUfunction lane_fn[2]; /* IPCP_LANE_SEND, IPCP_LANE_RECV */
    int lane_pdl;          /* launch with programmatic stream serialization */
} ipcp__cuda_dev_t;

typedef struct ipcp__cuda_poller ipcp__cuda_poller_t;

struct ipcp__backend {
    ipcp__config_t cfg;          /* zeroed when opened without one */
    ipcp__cuda_poller_t *poller; /* IPCPIPE_CUDA_NOTIFY=event */
    unsigned gen; /* tells this instance apart in thread caches */
    int driver_version;
    int ndev;
    ipcp__cuda_dev_t dev[IPCP_CU_MAX_DEVICES];
    /* peer[a][b]: device a can access device b's memory (1 when a == b). */
    unsigned char peer[IPCP_CU_MAX_DEVICES][IPCP_CU_MAX_DEVICES];
    /* linked[a][b]: device_link turned peer access of a to b on */
    unsigned char linked[IPCP_CU_MAX_DEVICES][IPCP_CU_MAX_DEVICES];
    pthread_mutex_t lock; /* retaining contexts; allocs; linked */
    ipcp__list_t allocs;  /* ipcp__cuda_alloc_t */
};

/* ---- Contexts (cuda_backend.c) ------------------------------------------- */

/* device's primary context, retained on first use.  Fails (logged at level)
 * for a device that does not exist here. */
ipcp_status_t ipcp__cuda_ctx(ipcp__backend_t *be, int device, int level,
                             CUcontext *ctx);

/* Makes device's context current for a few calls on a user's thread;
 * ipcp__cuda_leave restores what was current.  Leave only after a
 * successful enter. */
typedef struct ipcp__cuda_scope {
    int pushed;
} ipcp__cuda_scope_t;
ipcp_status_t ipcp__cuda_enter(ipcp__backend_t *be, int device, int level,
                               ipcp__cuda_scope_t *s);
void ipcp__cuda_leave(ipcp__cuda_scope_t *s);

/* Makes ctx current on the progress thread and leaves it there (see the
 * top of this file). */
ipcp_status_t ipcp__cuda_bind(ipcp__backend_t *be, CUcontext ctx);
/* After the thread's context was changed without ipcp__cuda_bind. */
void ipcp__cuda_bind_forget(void);

/* What the driver says about a pointer. */
typedef struct ipcp__cuda_ptr {
    unsigned memtype; /* CUmemorytype, 0 when unknown to CUDA */
    int device;       /* ordinal of the device it belongs to */
    CUdeviceptr base; /* start of its allocation (address range) */
    size_t size;
    unsigned long long buffer_id;
    int managed;
    int legacy_ipc; /* cuIpcGetMemHandle can export it (cudaMalloc'd) */
    /* The mapping holding it (VMM memory: one cuMemMap of an allocation,
     * where base/size span the whole reservation); else base/size. */
    CUdeviceptr map_base;
    size_t map_size;
    /* The cudaMallocAsync pool it came from (base/size and the mapping
     * are then its allocation); NULL for other memory. */
    CUmemoryPool pool;
} ipcp__cuda_ptr_t;

/* 1 when ptr is device memory this backend moves (CU_MEMORYTYPE_DEVICE, not
 * managed, on a device it sees), with *out filled; 0 otherwise, quietly. */
int ipcp__cuda_query(ipcp__backend_t *be, const void *ptr,
                     ipcp__cuda_ptr_t *out);

/* ---- Exports ------------------------------------------------------------- */

/* ipcp__export_t.data of IPCP_EXPORT_CUDA_VMM: npieces allocations of
 * alloc_size bytes each, mapped back to back from the fds that travel
 * beside it (one each, in order; one piece for ours). */
typedef struct ipcp__cuda_vmm_data {
    uint64_t magic;      /* IPCP_CUDA_VMM_MAGIC */
    uint64_t alloc_size; /* bytes of each allocation, whole granules */
    uint64_t offset;     /* of the exported pointer in the first */
    int32_t device;      /* exporter's ordinal (for messages only) */
    uint32_t npieces;    /* 1 to IPCP_EXPORT_MAX_FDS */
    uint64_t check;      /* ipcp__cuda_export_check() */
} ipcp__cuda_vmm_data_t;

#define IPCP_CUDA_VMM_MAGIC 0x6d6d766170637069ULL /* "ipcpavmm" */

/* ipcp__export_t.data of IPCP_EXPORT_CUDA_LEGACY: cuIpcGetMemHandle of the
 * allocation's base, which is what cuIpcOpenMemHandle maps. */
typedef struct ipcp__cuda_legacy_data {
    unsigned char handle[CU_IPC_HANDLE_SIZE];
    uint64_t offset;    /* of the exported pointer from the base */
    uint64_t base_size; /* bytes of the allocation */
    uint64_t buffer_id; /* CU_POINTER_ATTRIBUTE_BUFFER_ID in the exporter */
    uint64_t check;     /* ipcp__cuda_export_check() */
} ipcp__cuda_legacy_data_t;

/* ipcp__export_t.data of IPCP_EXPORT_CUDA_POOL: an allocation of a
 * cudaMallocAsync pool made with POSIX fd handles, which the importer maps
 * from the pool (its fd travels beside it) and the pointer's export data.
 * The importer keeps the mapping while the exporter's region lives. */
typedef struct ipcp__cuda_pool_data {
    uint64_t magic; /* IPCP_CUDA_POOL_MAGIC */
    unsigned char ptr[sizeof(CUmemPoolPtrExportData)];
    uint64_t alloc_size; /* bytes of the allocation */
    uint64_t offset;     /* of the exported pointer in it */
    uint64_t check;      /* ipcp__cuda_export_check() */
} ipcp__cuda_pool_data_t;

#define IPCP_CUDA_POOL_MAGIC 0x6c6f6f7070637069ULL /* "ipcpool" */

_Static_assert(sizeof(ipcp__cuda_pool_data_t) <= IPCP_EXPORT_MAX,
               "pool export data");
_Static_assert(sizeof(ipcp__cuda_vmm_data_t) <= IPCP_EXPORT_MAX,
               "VMM export data");
_Static_assert(sizeof(ipcp__cuda_legacy_data_t) <= IPCP_EXPORT_MAX,
               "legacy export data");

/* Checksum over kind, size and the first data_len - 8 bytes of data (the
 * check word is last in every layout). */
uint64_t ipcp__cuda_export_check(const ipcp__export_t *exp, const void *data,
                                 size_t data_len);

/* ---- Pool memory (cuda_pool.c) ------------------------------------------ */

/* Describes [ptr, +len) in the pool allocation pi names (pi->pool set) for
 * a peer; IPCP_ERR_UNSUPPORTED (quietly) when the pool cannot be shared.
 * Entered in the buffer's device. */
ipcp_status_t ipcp__cuda_pool_export(const void *ptr, size_t len,
                                     const ipcp__cuda_ptr_t *pi,
                                     ipcp__export_t *exp);
/* A new descriptor of the pool of the allocation starting at base, for a
 * peer (mem_share); -1 when there is none (the reason is the last error). */
int ipcp__cuda_pool_fd(ipcp__backend_t *be, const void *base);
/* *rw: whether pool grants device dev read and write access. */
ipcp_status_t ipcp__cuda_pool_access(CUmemoryPool pool, CUdevice dev, int *rw);
/* Checks a peer's pool export, which came with nfds descriptors. */
ipcp_status_t ipcp__cuda_pool_check(const ipcp__export_t *exp, int nfds,
                                    ipcp__cuda_pool_data_t *d);
/* Maps d's allocation for device (the pool from fd, borrowed), or takes
 * another reference to its mapping: *map for ipcp__cuda_pool_unimport,
 * *ptr where the exporter's pointer is. */
ipcp_status_t ipcp__cuda_pool_import(ipcp__backend_t *be,
                                     const ipcp__cuda_pool_data_t *d, int fd,
                                     int device, void **map, void **ptr);
void ipcp__cuda_pool_unimport(ipcp__backend_t *be, void *map);

/* ---- Memory (cuda_mem.c) ------------------------------------------------- */

typedef struct ipcp__cuda_alloc {
    ipcp__list_t link;
    uint64_t magic;
    int device;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    size_t size; /* whole granules, mapped at va */
} ipcp__cuda_alloc_t;

#define IPCP_CUDA_ALLOC_MAGIC 0x636f6c6c61647563ULL

ipcp_status_t ipcp__cuda_mem_alloc(ipcp__backend_t *be, size_t len, int device,
                                   void **ptr, void **handle);
ipcp_status_t ipcp__cuda_mem_free(ipcp__backend_t *be, void *handle);
/* backend.h mem_access. */
ipcp_status_t ipcp__cuda_mem_access(ipcp__backend_t *be, const void *ptr,
                                    size_t len, int device);
ipcp_status_t ipcp__cuda_mem_export(ipcp__backend_t *be, void *handle,
                                    const void *ptr, size_t len,
                                    ipcp__export_t *exp, int *fd);
/* backend.h mem_share and mem_span. */
int ipcp__cuda_mem_share(ipcp__backend_t *be, const void *ptr,
                         const ipcp__export_t *exp, int *fds, int max);
int ipcp__cuda_mem_span(ipcp__backend_t *be, const void *ptr, size_t len,
                        uintptr_t *base, size_t *size, uint64_t *id);
void ipcp__cuda_mem_release_all(ipcp__backend_t *be);
/* Grants device read-write access to [va, va+size) (required), then each
 * device with others[d] set (best effort, refusals logged at debug). */
ipcp_status_t ipcp__cuda_grant(ipcp__backend_t *be, CUdeviceptr va, size_t size,
                               int device, const unsigned char *others);

/* ---- Imports (cuda_import.c) --------------------------------------------- */

ipcp_status_t ipcp__cuda_mem_import(ipcp__backend_t *be,
                                    const ipcp__export_t *exp, const int *fds,
                                    int nfds, int device, void **ptr,
                                    void **handle);
ipcp_status_t ipcp__cuda_mem_unimport(ipcp__backend_t *be, void *handle);
/* Closes legacy mappings nobody released (the last backend is closing). */
void ipcp__cuda_import_drop_all(ipcp__backend_t *be);

/* ---- Host registration (cuda_shm.c) -------------------------------------- */

ipcp_status_t ipcp__cuda_shm_register(ipcp__backend_t *be, void *ptr,
                                      size_t len, int device, void **handle);
void ipcp__cuda_shm_unregister(ipcp__backend_t *be, void *handle);
/* The device address of p for stream memory operations: p itself, unless
 * it lies in a registration whose device address differs. */
CUdeviceptr ipcp__cuda_dev_addr(const void *p);
void ipcp__cuda_shm_drop_all(ipcp__backend_t *be);

/* ---- Queues (cuda_queue.c) ----------------------------------------------- */

struct ipcp__queue {
    ipcp__backend_t *be;
    int device;
    CUcontext ctx;
    CUstream stream;
    atomic_int polled; /* events the poller has not finished */
    int wrapped;       /* the user's stream: never drained or destroyed */
    int user;          /* ours, used from the user's threads (queue_user) */
    int offload;       /* queue_user's copies and notifies are enqueued by
                          the poller thread (IPCPIPE_REMOTE_COPIES) */
    CUevent join_ev;   /* recorded here by joins, made on first use */
};

ipcp_status_t ipcp__cuda_queue_create(ipcp__backend_t *be, int device,
                                      ipcp__queue_t **q);
void ipcp__cuda_queue_destroy(ipcp__queue_t *q);
ipcp_status_t ipcp__cuda_queue_user(ipcp__backend_t *be, int device,
                                    ipcp__queue_t **q);
ipcp_status_t ipcp__cuda_copy(ipcp__queue_t *q, void *dst, const void *src,
                              size_t len, ipcp__track_t *t);
/* Enqueues a copy from the calling thread, binding q's context to it (the
 * poller's, for an offload queue). */
ipcp_status_t ipcp__cuda_copy_here(ipcp__queue_t *q, void *dst, const void *src,
                                   size_t len);
ipcp_status_t ipcp__cuda_flag_write(ipcp__queue_t *q, uint64_t *flag,
                                    uint64_t value, ipcp__track_t *t);
ipcp_status_t ipcp__cuda_flag_wait(ipcp__queue_t *q, uint64_t *flag,
                                   uint64_t value, const atomic_int *abort,
                                   ipcp__track_t *t);
ipcp_status_t ipcp__cuda_flag_wait_ring(ipcp__queue_t *q, uint64_t *flag,
                                        uint64_t value, const atomic_int *abort,
                                        ipcp__track_t *t);
ipcp_status_t ipcp__cuda_flag_write_wait(ipcp__queue_t *q, uint64_t *wflag,
                                         uint64_t wvalue, uint64_t *flag,
                                         uint64_t value,
                                         const atomic_int *abort);
ipcp_status_t ipcp__cuda_notify(ipcp__queue_t *q, ipcp__track_t *t);
ipcp_status_t ipcp__cuda_stream_check(ipcp__backend_t *be, int device,
                                      void *native);
ipcp_status_t ipcp__cuda_queue_wrap(ipcp__backend_t *be, int device,
                                    void *native, ipcp__queue_t **q);
ipcp_status_t ipcp__cuda_join(ipcp__queue_t *dst, ipcp__queue_t *src);

/* ---- Small-message lane (cuda_lane.c) ------------------------------------ */

ipcp_status_t ipcp__cuda_lane_prepare(ipcp__backend_t *be, int device,
                                      void *ptr, size_t len);
ipcp_status_t ipcp__cuda_lane_launch(ipcp__backend_t *be, int device,
                                     void *stream, int op,
                                     const ipcp__lane_kargs_t *a);
/* Unloads the kernels (close). */
void ipcp__cuda_lane_unload(ipcp__backend_t *be);

/* ---- Event poller (cuda_poll.c) ------------------------------------------ */

ipcp_status_t ipcp__cuda_poller_start(ipcp__backend_t *be);
void ipcp__cuda_poller_stop(ipcp__backend_t *be);
/* Records an event in stream and notifies t once it completes; *count
 * (the queue's) is raised now and lowered after the notification. */
ipcp_status_t ipcp__cuda_poll_notify(ipcp__backend_t *be, CUcontext ctx,
                                     int device, CUstream stream,
                                     atomic_int *count, ipcp__track_t *t);
/* Hands a copy (notify 0: len bytes from src to dst) or a notify (1) of an
 * offload queue to the poller thread, which enqueues them in the order
 * they came (short copies handed over together may run in any order
 * among themselves where they do not overlap; a notify still follows
 * every copy before it); q->polled counts each until the poller is done
 * with it.  A copy that fails there fails t; a notify notifies t as
 * ipcp__cuda_notify does. */
ipcp_status_t ipcp__cuda_poll_op(ipcp__queue_t *q, int notify, void *dst,
                                 const void *src, size_t len, ipcp__track_t *t);
/* Waits until the poller holds nothing of q's (ops enqueued, events
 * delivered). */
void ipcp__cuda_poll_settle(ipcp__queue_t *q);
/* Records a timing event and, once it completes, stores its host time. */
ipcp_status_t ipcp__cuda_poll_stamp(ipcp__backend_t *be, CUcontext ctx,
                                    int device, CUstream stream,
                                    atomic_int *count, uint64_t *ns);
ipcp_status_t ipcp__cuda_stamp(ipcp__queue_t *q, uint64_t *ns);
/* ---- Striping (cuda_stripe.c) -------------------------------------------- */
ipcp_status_t ipcp__cuda_stripe_calibrate(ipcp__backend_t *be, int src, int dst,
                                          int layout, ipcp__stripe_cal_t *out);
int ipcp__cuda_device_ident(ipcp__backend_t *be, int device, char *uuid,
                            size_t len, int *driver);

/* The backend table's flag_watch (IPCP_ERR_UNSUPPORTED without the
 * poller, i.e. with IPCPIPE_CUDA_NOTIFY=callback). */
ipcp_status_t ipcp__cuda_flag_watch(ipcp__backend_t *be, uint64_t *flag,
                                    uint64_t value, const atomic_int *abort,
                                    ipcp__track_t *t);

#endif
