/* The CUDA backend: device memory shared through CUDA IPC (VMM file
 * descriptors for our allocations, legacy IPC handles for the user's), and
 * queues that are CUDA streams ordered by stream memory operations.  This
 * file holds the instance, contexts, the pointer query and the table. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "common/status.h"
#include "common/time.h"
#include "common/util.h"

/* Instances (open ones and generations), so that the last close can clear
 * the process-wide caches and thread caches can tell instances apart. */
static pthread_mutex_t cuda_open_lock = PTHREAD_MUTEX_INITIALIZER;
static int cuda_open_count;
static unsigned cuda_next_gen;
/* Devices whose primary context the process keeps one reference to after
 * the instance that retained it closed (cuda_open_lock).  Releasing the
 * last reference destroys the context, which took about 0.1 s of
 * ipcp_finalize (issue 24) when nothing else in the process held it;
 * process exit destroys it anyway, a later instance finds it ready, and
 * where the user's CUDA runtime holds it (the usual case) it would have
 * stayed alive regardless.  Its memory stays in use until exit;
 * cuDevicePrimaryCtxReset (cudaDeviceReset) frees it. */
static unsigned char cuda_kept[IPCP_CU_MAX_DEVICES];

/* The context this thread made current through ipcp__cuda_bind, and for
 * which instance; NULL when unknown. */
static _Thread_local CUcontext cuda_tls_ctx;
static _Thread_local unsigned cuda_tls_gen;

/* ---- Contexts ------------------------------------------------------------ */

ipcp_status_t ipcp__cuda_ctx(ipcp__backend_t *be, int device, int level,
                             CUcontext *ctx)
{
    if (device < 0 || device >= be->ndev)
        return ipcp__fail(level, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                          "CUDA device %d does not exist in this process "
                          "(%d visible)",
                          device, be->ndev);
    ipcp__cuda_dev_t *d = &be->dev[device];
    CUcontext c = __atomic_load_n(&d->ctx, __ATOMIC_ACQUIRE);
    ipcp_status_t st = IPCP_OK;
    if (ipcp__likely(c != NULL)) {
        *ctx = c;
        return IPCP_OK;
    }
    /* The first use of a device creates its context (about 0.2 s and some
     * GPU memory, FACTS.md), so it happens only for devices in use. */
    pthread_mutex_lock(&be->lock);
    c = d->ctx;
    if (!c) {
        st =
            ipcp__cu_check(IPCP_CU(cuDevicePrimaryCtxRetain)(&c, d->dev), level,
                           "cuDevicePrimaryCtxRetain(device %d)", device);
        if (st == IPCP_OK) {
            __atomic_store_n(&d->ctx, c, __ATOMIC_RELEASE);
            IPCP_DEBUG(IPCP_SUB_CUDA,
                       "retained the primary context of "
                       "device %d",
                       device);
        }
    }
    pthread_mutex_unlock(&be->lock);
    if (st == IPCP_OK)
        *ctx = c;
    return st;
}

ipcp_status_t ipcp__cuda_enter(ipcp__backend_t *be, int device, int level,
                               ipcp__cuda_scope_t *s)
{
    CUcontext ctx = NULL, cur = NULL;
    ipcp_status_t st = ipcp__cuda_ctx(be, device, level, &ctx);
    s->pushed = 0;
    if (st != IPCP_OK)
        return st;
    if (IPCP_CU(cuCtxGetCurrent)(&cur) == CUDA_SUCCESS && cur == ctx)
        return IPCP_OK;
    st = ipcp__cu_check(IPCP_CU(cuCtxPushCurrent)(ctx), level,
                        "cuCtxPushCurrent(device %d)", device);
    if (st != IPCP_OK)
        return st;
    s->pushed = 1;
    cuda_tls_ctx = NULL; /* the bind cache no longer says what is current */
    return IPCP_OK;
}

void ipcp__cuda_leave(ipcp__cuda_scope_t *s)
{
    CUcontext popped;
    if (!s->pushed)
        return;
    ipcp__cu_check(IPCP_CU(cuCtxPopCurrent)(&popped), IPCP_LOG_WARN,
                   "cuCtxPopCurrent");
    s->pushed = 0;
    cuda_tls_ctx = NULL;
}

void ipcp__cuda_bind_forget(void)
{
    cuda_tls_ctx = NULL;
}

ipcp_status_t ipcp__cuda_bind(ipcp__backend_t *be, CUcontext ctx)
{
    if (ipcp__likely(cuda_tls_ctx == ctx && cuda_tls_gen == be->gen))
        return IPCP_OK;
    ipcp_status_t st = ipcp__cu_check(IPCP_CU(cuCtxSetCurrent)(ctx),
                                      IPCP_LOG_ERROR, "cuCtxSetCurrent");
    if (st == IPCP_OK) {
        cuda_tls_ctx = ctx;
        cuda_tls_gen = be->gen;
    }
    return st;
}

/* ---- Pointers ------------------------------------------------------------ */

/* A context to ask the driver through when the thread has none: one we
 * hold, else a primary context something else in the process made active.
 * With none active no CUDA allocation can exist, and none is created just
 * to ask (that would cost a context on every process that moves host
 * memory only). */
static CUcontext cuda_any_ctx(ipcp__backend_t *be)
{
    CUcontext c;
    for (int d = 0; d < be->ndev; d++)
        if ((c = __atomic_load_n(&be->dev[d].ctx, __ATOMIC_ACQUIRE)))
            return c;
    for (int d = 0; d < be->ndev; d++) {
        unsigned flags = 0;
        int active = 0;
        if (IPCP_CU(cuDevicePrimaryCtxGetState)(be->dev[d].dev, &flags,
                                                &active) == CUDA_SUCCESS &&
            active && ipcp__cuda_ctx(be, d, IPCP_LOG_DEBUG, &c) == IPCP_OK)
            return c;
    }
    return NULL;
}

/* Whether the driver answers the mapping attributes (CUDA 11.x and
 * later); cleared when it refuses them and answers the rest, after which
 * the mapping of memory that is not legacy-IPC capable is asked apart. */
static int cuda_map_attrs = 1;

static CUresult cuda_ptr_attrs_map(const void *ptr, ipcp__cuda_ptr_t *out,
                                   int map)
{
    CUpointer_attribute attrs[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        CU_POINTER_ATTRIBUTE_BUFFER_ID,
        CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
        CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR,
        CU_POINTER_ATTRIBUTE_MAPPING_SIZE,
        CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
    /* The driver writes booleans of unstated width; zeroed 64-bit words
     * read right whatever it writes. */
    uint64_t managed = 0, legacy = 0;
    void *data[] = {&out->memtype,   &out->device, &out->base, &out->size,
                    &out->buffer_id, &managed,     &legacy,    &out->map_base,
                    &out->map_size,  &out->pool};
    unsigned n = (unsigned)ipcp__array_size(attrs);
    memset(out, 0, sizeof(*out));
    out->device = -1;
    CUresult r = IPCP_CU(cuPointerGetAttributes)(map ? n : n - 3, attrs, data,
                                                 (CUdeviceptr)(uintptr_t)ptr);
    out->managed = managed != 0;
    out->legacy_ipc = legacy != 0;
    /* VMM memory: the range above is the whole reservation (PyTorch's
     * spans the GPU's memory), and what can be exported is one mapping,
     * which the mapping attributes give (else cuMemGetAddressRange);
     * other memory is its range.  A pool's memory is mapped by the pool's
     * pieces (32 MiB and more), but what can be exported is one
     * allocation: its range. */
    int vmm = r == CUDA_SUCCESS && out->memtype == CU_MEMORYTYPE_DEVICE &&
              !out->legacy_ipc && !out->managed && !out->pool;
    if (vmm && map && out->map_size)
        return r;
    CUdeviceptr b;
    size_t sz;
    out->map_base = out->base;
    out->map_size = out->size;
    if (vmm && IPCP_CU(cuMemGetAddressRange)(
                   &b, &sz, (CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS) {
        out->map_base = b;
        out->map_size = sz;
    }
    return r;
}

static CUresult cuda_ptr_attrs(const void *ptr, ipcp__cuda_ptr_t *out)
{
    int map = __atomic_load_n(&cuda_map_attrs, __ATOMIC_RELAXED);
    CUresult r = cuda_ptr_attrs_map(ptr, out, map);
    if (r != CUDA_ERROR_INVALID_VALUE || !map)
        return r;
    r = cuda_ptr_attrs_map(ptr, out, 0);
    if (r == CUDA_SUCCESS)
        __atomic_store_n(&cuda_map_attrs, 0, __ATOMIC_RELAXED);
    return r;
}

int ipcp__cuda_query(ipcp__backend_t *be, const void *ptr,
                     ipcp__cuda_ptr_t *out)
{
    char err[160];
    CUresult r;

    if (!ptr)
        return 0;
    r = cuda_ptr_attrs(ptr, out);
    if (r == CUDA_ERROR_INVALID_CONTEXT) {
        CUcontext ctx = cuda_any_ctx(be), popped;
        if (!ctx || IPCP_CU(cuCtxPushCurrent)(ctx) != CUDA_SUCCESS)
            return 0;
        r = cuda_ptr_attrs(ptr, out);
        IPCP_CU(cuCtxPopCurrent)(&popped);
        cuda_tls_ctx = NULL;
    }
    if (r != CUDA_SUCCESS) {
        IPCP_DEBUG(IPCP_SUB_CUDA,
                   "cuPointerGetAttributes(%p): %s; taken as "
                   "host memory",
                   ptr, ipcp__cu_strerror(r, err, sizeof(err)));
        return 0;
    }
    if (out->memtype != CU_MEMORYTYPE_DEVICE || out->managed)
        return 0;
    if (out->device < 0 || out->device >= be->ndev) {
        IPCP_DEBUG(IPCP_SUB_CUDA,
                   "%p is memory of device %d, which this "
                   "backend does not use; taken as host memory",
                   ptr, out->device);
        return 0;
    }
    return 1;
}

/* Host, pinned, registered, managed and unknown pointers are the host
 * backend's: its queues (CPU threads) can read and write all of them. */
static int cuda_owns(ipcp__backend_t *be, const void *ptr,
                     ipcp__mem_attr_t *attr)
{
    ipcp__cuda_ptr_t pi;
    if (!ipcp__cuda_query(be, ptr, &pi))
        return 0;
    memset(attr, 0, sizeof(*attr));
    attr->type = IPCP_MEM_CUDA;
    attr->device = pi.device;
    attr->base = (uintptr_t)pi.base;
    attr->size = pi.size;
    attr->map_base = (uintptr_t)pi.map_base;
    attr->map_size = pi.map_size;
    attr->buffer_id = pi.buffer_id;
    return 1;
}

/* ---- Open and close ------------------------------------------------------ */

/* The time since *t0 in ms, and *t0 moved to now (debug logs of open
 * and close). */
static double cuda_lap(uint64_t *t0)
{
    uint64_t now = ipcp__now_ns(), d = now - *t0;
    *t0 = now;
    return (double)d / 1e6;
}

static int cuda_attr(CUdevice dev, CUdevice_attribute a)
{
    int v = 0;
    if (IPCP_CU(cuDeviceGetAttribute)(&v, a, dev) != CUDA_SUCCESS)
        return 0;
    return v;
}

/* Unified addressing is required: the engine passes plain pointers, and
 * only UVA lets one cuMemcpyAsync serve device, peer and host memory. */
static ipcp_status_t cuda_open_device(ipcp__backend_t *be, int i)
{
    ipcp__cuda_dev_t *d = &be->dev[i];
    ipcp_status_t st =
        ipcp__cu_result(IPCP_CU(cuDeviceGet)(&d->dev, i), IPCP_LOG_DEBUG,
                        IPCP_ERR_UNSUPPORTED, "cuDeviceGet(%d)", i);
    if (st != IPCP_OK)
        return st;
    char bus[32] = "";
    if (IPCP_CU(cuDeviceGetPCIBusId)(bus, (int)sizeof(bus), d->dev) !=
        CUDA_SUCCESS)
        snprintf(bus, sizeof(bus), "ordinal-%d", i);
    d->id = ipcp__fnv1a(bus, strlen(bus), IPCP_FNV_SEED);
    if (!cuda_attr(d->dev, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING))
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "CUDA device %d lacks unified addressing", i);
    d->vmm =
        cuda_attr(d->dev,
                  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) &&
        cuda_attr(
            d->dev,
            CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
    d->memops =
        cuda_attr(d->dev, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS);
    d->flush = cuda_attr(d->dev, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES);
    d->mps = ipcp__cu_device_mps(d->dev);
    IPCP_DEBUG(IPCP_SUB_CUDA, "CUDA device %d: MPS %s", i,
               d->mps > 0    ? "on"
               : d->mps == 0 ? "off"
                             : "unknown");
    if (!d->memops)
        IPCP_INFO(IPCP_SUB_CUDA,
                  "CUDA device %d cannot run 64-bit stream "
                  "memory operations; transfers of its memory will fail",
                  i);
    if (!d->vmm)
        IPCP_INFO(IPCP_SUB_CUDA,
                  "CUDA device %d cannot make VMM allocations "
                  "shareable by file descriptor; ipcp_mem_alloc of its "
                  "memory will fail",
                  i);
    return IPCP_OK;
}

static ipcp_status_t cuda_open_devices(ipcp__backend_t *be)
{
    int n = 0;
    ipcp_status_t st;
    CUresult r = IPCP_CU(cuInit)(0);
    if (r == CUDA_ERROR_NO_DEVICE)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "no CUDA device visible (cuInit: "
                          "CUDA_ERROR_NO_DEVICE)");
    st = ipcp__cu_result(r, IPCP_LOG_DEBUG, IPCP_ERR_UNSUPPORTED, "cuInit(0)");
    if (st != IPCP_OK)
        return st;
    IPCP_CU(cuDriverGetVersion)(&be->driver_version);
    st = ipcp__cu_result(IPCP_CU(cuDeviceGetCount)(&n), IPCP_LOG_DEBUG,
                         IPCP_ERR_UNSUPPORTED, "cuDeviceGetCount");
    if (st != IPCP_OK)
        return st;
    if (n <= 0)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "no CUDA device visible");
    if (n > IPCP_CU_MAX_DEVICES)
        IPCP_WARN(IPCP_SUB_CUDA, "%d CUDA devices visible; using the first %d",
                  n, IPCP_CU_MAX_DEVICES);
    be->ndev = ipcp__min(n, IPCP_CU_MAX_DEVICES);
    for (int i = 0; i < be->ndev; i++)
        if ((st = cuda_open_device(be, i)) != IPCP_OK)
            return st;
    for (int a = 0; a < be->ndev; a++) {
        for (int b = 0; b < be->ndev; b++) {
            int can = a == b;
            if (a != b &&
                IPCP_CU(cuDeviceCanAccessPeer)(&can, be->dev[a].dev,
                                               be->dev[b].dev) != CUDA_SUCCESS)
                can = 0;
            be->peer[a][b] = (unsigned char)(can != 0);
        }
    }
    return IPCP_OK;
}

static ipcp_status_t cuda_open(const ipcp__config_t *cfg, ipcp__backend_t **out)
{
    uint64_t t = ipcp__now_ns();
    double load_ms, init_ms;
    ipcp_status_t st = ipcp__cu_load();
    load_ms = cuda_lap(&t);
    if (st != IPCP_OK)
        return st;
    ipcp__backend_t *be = calloc(1, sizeof(*be));
    if (!be)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                          "cannot allocate the CUDA backend");
    if (cfg)
        be->cfg = *cfg;
    pthread_mutex_init(&be->lock, NULL);
    ipcp__list_init(&be->allocs);
    st = cuda_open_devices(be);
    init_ms = cuda_lap(&t);
    if (st != IPCP_OK) {
        pthread_mutex_destroy(&be->lock);
        free(be);
        return st;
    }
    if (be->cfg.cuda_notify == IPCP_NOTIFY_EVENT &&
        (st = ipcp__cuda_poller_start(be)) != IPCP_OK) {
        pthread_mutex_destroy(&be->lock);
        free(be);
        return st;
    }
    pthread_mutex_lock(&cuda_open_lock);
    cuda_open_count++;
    be->gen = ++cuda_next_gen;
    pthread_mutex_unlock(&cuda_open_lock);
    IPCP_INFO(IPCP_SUB_CUDA, "CUDA backend open: driver %d.%d, %d device%s",
              be->driver_version / 1000, be->driver_version % 1000 / 10,
              be->ndev, be->ndev == 1 ? "" : "s");
    IPCP_DEBUG(IPCP_SUB_CUDA,
               "open: loading libcuda %.2f ms, cuInit and "
               "devices %.2f ms, the rest %.2f ms",
               load_ms, init_ms, cuda_lap(&t));
    *out = be;
    return IPCP_OK;
}

/* Drops this instance's reference to each primary context it retained,
 * but keeps the process's first one (cuda_kept says why). */
static void cuda_release_contexts(ipcp__backend_t *be)
{
    for (int d = 0; d < be->ndev; d++) {
        if (!be->dev[d].ctx)
            continue;
        pthread_mutex_lock(&cuda_open_lock);
        int keep = !cuda_kept[d];
        cuda_kept[d] = 1;
        pthread_mutex_unlock(&cuda_open_lock);
        if (keep)
            IPCP_DEBUG(IPCP_SUB_CUDA,
                       "primary context of device %d kept until the "
                       "process exits",
                       d);
        else
            ipcp__cu_check(IPCP_CU(cuDevicePrimaryCtxRelease)(be->dev[d].dev),
                           IPCP_LOG_WARN,
                           "cuDevicePrimaryCtxRelease(device %d)", d);
    }
}

static void cuda_close(ipcp__backend_t *be)
{
    if (!be)
        return;
    uint64_t t = ipcp__now_ns();
    double ms[5];
    /* The engine destroyed every queue first, so no event is outstanding
     * for long. */
    ipcp__cuda_poller_stop(be);
    ms[0] = cuda_lap(&t);
    ipcp__cuda_lane_unload(be);
    ipcp__cuda_mem_release_all(be);
    ms[1] = cuda_lap(&t);
    pthread_mutex_lock(&cuda_open_lock);
    int last = --cuda_open_count == 0;
    if (last) {
        /* Mappings and registrations are process-wide; with no instance
         * left, whatever is still held would outlive its contexts. */
        ipcp__cuda_import_drop_all(be);
        ipcp__cuda_shm_drop_all(be);
    }
    pthread_mutex_unlock(&cuda_open_lock);
    ms[2] = cuda_lap(&t);
    for (int d = 0; d < be->ndev; d++) {
        ipcp__cuda_scope_t sc;
        if (be->dev[d].anchor &&
            ipcp__cuda_enter(be, d, IPCP_LOG_WARN, &sc) == IPCP_OK) {
            IPCP_CU(cuEventDestroy)(be->dev[d].anchor);
            ipcp__cuda_leave(&sc);
        }
    }
    ms[3] = cuda_lap(&t);
    cuda_release_contexts(be);
    ms[4] = cuda_lap(&t);
    IPCP_DEBUG(IPCP_SUB_CUDA,
               "closed: event poller %.2f ms, lane and allocations %.2f ms, "
               "mappings and registrations %.2f ms, events %.2f ms, "
               "contexts %.2f ms",
               ms[0], ms[1], ms[2], ms[3], ms[4]);
    if (cuda_tls_gen == be->gen)
        cuda_tls_ctx = NULL;
    pthread_mutex_destroy(&be->lock);
    free(be);
}

static int cuda_device_reach(ipcp__backend_t *be, int device, uint64_t *ids,
                             int max)
{
    int n = 0;
    if (device < 0 || device >= be->ndev || max < 1)
        return 0;
    ids[n++] = be->dev[device].id;
    for (int b = 0; b < be->ndev && n < max; b++)
        if (b != device && be->peer[device][b])
            ids[n++] = be->dev[b].id;
    return n;
}

static int cuda_device_mps(ipcp__backend_t *be, int device)
{
    if (device < 0 || device >= be->ndev)
        return -1;
    return be->dev[device].mps;
}

/* Peer access of src's context to dst's memory, which cudaMalloc'd memory
 * needs for a direct copy (mem_alloc's memory grants it by itself); without
 * it the driver would still copy, through host memory. */
static ipcp_status_t cuda_device_link(ipcp__backend_t *be, int src, int dst)
{
    CUcontext dctx;
    ipcp__cuda_scope_t sc;
    ipcp_status_t st = IPCP_OK;
    if (src < 0 || dst < 0 || src >= be->ndev || dst >= be->ndev)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                          "no GPU %d or %d here", src, dst);
    if (src == dst)
        return IPCP_OK;
    if (!be->peer[src][dst])
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "GPU %d cannot access GPU %d's memory directly", src,
                          dst);
    pthread_mutex_lock(&be->lock);
    int done = be->linked[src][dst];
    pthread_mutex_unlock(&be->lock);
    if (done)
        return IPCP_OK;
    if ((st = ipcp__cuda_ctx(be, dst, IPCP_LOG_ERROR, &dctx)) != IPCP_OK ||
        (st = ipcp__cuda_enter(be, src, IPCP_LOG_ERROR, &sc)) != IPCP_OK)
        return st;
    CUresult r = IPCP_CU(cuCtxEnablePeerAccess)(dctx, 0);
    ipcp__cuda_leave(&sc);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        return ipcp__cu_check(r, IPCP_LOG_ERROR,
                              "cuCtxEnablePeerAccess(GPU %d to GPU %d)", src,
                              dst);
    pthread_mutex_lock(&be->lock);
    be->linked[src][dst] = 1;
    pthread_mutex_unlock(&be->lock);
    return IPCP_OK;
}

const ipcp__backend_ops_t ipcp__cuda_backend_ops = {
    .name = "cuda",
    .type = IPCP_MEM_CUDA,
    .open = cuda_open,
    .close = cuda_close,
    .present = ipcp__cu_present,
    .owns = cuda_owns,
    .heap_free = 1,
    .mem_alloc = ipcp__cuda_mem_alloc,
    .mem_free = ipcp__cuda_mem_free,
    .mem_export = ipcp__cuda_mem_export,
    .mem_share = ipcp__cuda_mem_share,
    .mem_span = ipcp__cuda_mem_span,
    .mem_import = ipcp__cuda_mem_import,
    .mem_unimport = ipcp__cuda_mem_unimport,
    .shm_register = ipcp__cuda_shm_register,
    .shm_unregister = ipcp__cuda_shm_unregister,
    .device_reach = cuda_device_reach,
    .device_mps = cuda_device_mps,
    .device_link = cuda_device_link,
    .mem_access = ipcp__cuda_mem_access,
    .queue_create = ipcp__cuda_queue_create,
    .queue_destroy = ipcp__cuda_queue_destroy,
    .queue_user = ipcp__cuda_queue_user,
    .copy = ipcp__cuda_copy,
    .rcopy = NULL,
    .flag_write = ipcp__cuda_flag_write,
    .flag_wait = ipcp__cuda_flag_wait,
    .flag_wait_ring = ipcp__cuda_flag_wait_ring,
    .flag_write_wait = ipcp__cuda_flag_write_wait,
    .notify = ipcp__cuda_notify,
    .queue_wrap = ipcp__cuda_queue_wrap,
    .stream_check = ipcp__cuda_stream_check,
    .stamp = ipcp__cuda_stamp,
    .join = ipcp__cuda_join,
    .flag_watch = ipcp__cuda_flag_watch,
    .device_ident = ipcp__cuda_device_ident,
    .stripe_calibrate = ipcp__cuda_stripe_calibrate,
#ifdef IPCP_HAVE_LANE
    .lane_prepare = ipcp__cuda_lane_prepare,
    .lane_launch = ipcp__cuda_lane_launch,
#endif
};
