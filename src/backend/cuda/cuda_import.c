/* Mapping a peer's device memory for use by our streams on one device.
 *
 * Mappings are made in the context of the device whose streams issue the
 * copies: a copy on a stream of device B into memory mapped in device A's
 * context is a cross-context copy, which serialized the seed's H2D copies
 * (32 instead of 51 GB/s, FACTS.md).
 *
 * Legacy IPC: a handle can be opened only once per context per process, so
 * opened mappings live in a process-wide cache, refcounted, keyed by the
 * handle bytes, the exporter's buffer id and the context.
 * VMM: every import maps the fds anew (no such limit), one after another
 * when the export is of several allocations, grants the device access, and
 * drops the imported handles, which the mappings keep alive.
 * Pools: cuda_pool.c. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "common/status.h"
#include "common/util.h"

typedef struct cuda_legacy_map {
    ipcp__list_t link;
    unsigned char handle[CU_IPC_HANDLE_SIZE];
    uint64_t buffer_id;
    CUcontext ctx;    /* the context it is mapped in */
    int device;       /* that context's device, in the importing backend */
    CUdeviceptr base; /* where the exporter's allocation is mapped */
    size_t size;
    int refs;
} cuda_legacy_map_t;

static pthread_mutex_t cuda_legacy_lock = PTHREAD_MUTEX_INITIALIZER;
static ipcp__list_t cuda_legacy_maps = {&cuda_legacy_maps, &cuda_legacy_maps};

/* What mem_import hands back. */
typedef struct cuda_import {
    uint64_t magic;
    uint32_t kind;
    int device;
    cuda_legacy_map_t *legacy; /* IPCP_EXPORT_CUDA_LEGACY */
    void *pool;                /* IPCP_EXPORT_CUDA_POOL: cuda_pool.c's */
    CUdeviceptr va;            /* IPCP_EXPORT_CUDA_VMM: the reservation */
    size_t size;               /* its bytes: npieces mappings of piece */
    size_t piece;
    unsigned npieces;
} cuda_import_t;

#define CUDA_IMPORT_MAGIC 0x74726f706d697563ULL

/* ---- Validation: nothing in an export is trusted before these ------------ */

static ipcp_status_t cuda_bad_export(const char *what)
{
    return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_BAD_DESCRIPTOR,
                      "CUDA export rejected: %s", what);
}

static ipcp_status_t cuda_check_legacy(const ipcp__export_t *exp,
                                       ipcp__cuda_legacy_data_t *d)
{
    if (exp->len != sizeof(*d))
        return cuda_bad_export("legacy IPC data has the wrong length");
    memcpy(d, exp->data, sizeof(*d));
    if (d->check != ipcp__cuda_export_check(exp, d, sizeof(*d)))
        return cuda_bad_export("legacy IPC data fails its checksum");
    if (d->base_size == 0 || d->base_size > (uint64_t)SIZE_MAX / 2 ||
        d->offset > d->base_size || exp->size != d->base_size - d->offset)
        return cuda_bad_export("legacy IPC sizes do not add up");
    return IPCP_OK;
}

static ipcp_status_t cuda_check_vmm(const ipcp__export_t *exp, int nfds,
                                    ipcp__cuda_vmm_data_t *d)
{
    if (exp->len != sizeof(*d))
        return cuda_bad_export("VMM data has the wrong length");
    memcpy(d, exp->data, sizeof(*d));
    if (d->magic != IPCP_CUDA_VMM_MAGIC ||
        d->check != ipcp__cuda_export_check(exp, d, sizeof(*d)))
        return cuda_bad_export("VMM data fails its checksum");
    if (d->npieces == 0 || d->npieces > IPCP_EXPORT_MAX_FDS)
        return cuda_bad_export("VMM export of no or too many allocations");
    if (d->alloc_size == 0 ||
        d->alloc_size > (uint64_t)SIZE_MAX / 2 / IPCP_EXPORT_MAX_FDS ||
        d->offset > d->alloc_size * d->npieces ||
        exp->size != d->alloc_size * d->npieces - d->offset)
        return cuda_bad_export("VMM sizes do not add up");
    if (nfds != (int)d->npieces)
        return cuda_bad_export("a VMM export came without one file "
                               "descriptor for each allocation");
    return IPCP_OK;
}

/* ---- Legacy IPC ---------------------------------------------------------- */

/* Called with cuda_legacy_lock held. */
static cuda_legacy_map_t *cuda_legacy_find(const ipcp__cuda_legacy_data_t *d,
                                           CUcontext ctx)
{
    ipcp__list_t *pos, *tmp;
    ipcp__list_for_each_safe(pos, tmp, &cuda_legacy_maps)
    {
        cuda_legacy_map_t *m = ipcp__list_entry(pos, cuda_legacy_map_t, link);
        if (m->ctx == ctx && m->buffer_id == d->buffer_id &&
            memcmp(m->handle, d->handle, sizeof(m->handle)) == 0)
            return m;
    }
    return NULL;
}

/* Opens the handle in the current context (device's), checking that the
 * mapping is as large as the export says.  Called with the lock held. */
static ipcp_status_t cuda_legacy_open(const ipcp__cuda_legacy_data_t *d,
                                      CUcontext ctx, int device,
                                      cuda_legacy_map_t **out)
{
    CUipcMemHandle h;
    CUdeviceptr base = 0, rbase = 0;
    size_t rsize = 0;
    memcpy(&h, d->handle, sizeof(h));
    /* LAZY_ENABLE_PEER_ACCESS: the memory usually sits on another GPU, which
     * this device reaches only once peer access is on (about 2 ms the first
     * time, FACTS.md). */
    ipcp_status_t st =
        ipcp__cu_check(IPCP_CU(cuIpcOpenMemHandle)(
                           &base, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                       IPCP_LOG_ERROR,
                       "cuIpcOpenMemHandle(allocation of %llu bytes, for "
                       "device %d)",
                       (unsigned long long)d->base_size, device);
    if (st != IPCP_OK)
        return st;
    st = ipcp__cu_check(IPCP_CU(cuMemGetAddressRange)(&rbase, &rsize, base),
                        IPCP_LOG_ERROR, "cuMemGetAddressRange(%#llx)",
                        (unsigned long long)base);
    if (st == IPCP_OK && (rbase != base || rsize < d->base_size))
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_BAD_DESCRIPTOR,
                        "CUDA export rejected: it claims %llu bytes, the "
                        "handle maps %zu",
                        (unsigned long long)d->base_size, rsize);
    cuda_legacy_map_t *m = st == IPCP_OK ? calloc(1, sizeof(*m)) : NULL;
    if (st == IPCP_OK && !m)
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                        "cannot allocate a mapping record");
    if (st != IPCP_OK) {
        IPCP_CU(cuIpcCloseMemHandle)(base);
        return st;
    }
    memcpy(m->handle, d->handle, sizeof(m->handle));
    m->buffer_id = d->buffer_id;
    m->ctx = ctx;
    m->device = device;
    m->base = base;
    m->size = (size_t)d->base_size;
    m->refs = 1;
    ipcp__list_push_back(&cuda_legacy_maps, &m->link);
    *out = m;
    return IPCP_OK;
}

static ipcp_status_t cuda_import_legacy(ipcp__backend_t *be,
                                        const ipcp__export_t *exp, int device,
                                        cuda_import_t *im, void **ptr)
{
    ipcp__cuda_legacy_data_t d;
    ipcp__cuda_scope_t sc;
    cuda_legacy_map_t *m;
    CUcontext ctx;
    ipcp_status_t st = cuda_check_legacy(exp, &d);
    if (st != IPCP_OK)
        return st;
    if ((st = ipcp__cuda_ctx(be, device, IPCP_LOG_ERROR, &ctx)) != IPCP_OK)
        return st;
    if ((st = ipcp__cuda_enter(be, device, IPCP_LOG_ERROR, &sc)) != IPCP_OK)
        return st;
    pthread_mutex_lock(&cuda_legacy_lock);
    m = cuda_legacy_find(&d, ctx);
    if (m && m->size < d.base_size)
        st = cuda_bad_export("legacy IPC size differs from the mapping of "
                             "the same handle");
    else if (m)
        m->refs++;
    else
        st = cuda_legacy_open(&d, ctx, device, &m);
    pthread_mutex_unlock(&cuda_legacy_lock);
    ipcp__cuda_leave(&sc);
    if (st != IPCP_OK)
        return st;
    im->legacy = m;
    *ptr = (void *)(uintptr_t)(m->base + d.offset);
    return IPCP_OK;
}

static void cuda_legacy_close(ipcp__backend_t *be, cuda_legacy_map_t *m)
{
    ipcp__cuda_scope_t sc;
    int entered =
        ipcp__cuda_enter(be, m->device, IPCP_LOG_WARN, &sc) == IPCP_OK;
    ipcp__cu_check(IPCP_CU(cuIpcCloseMemHandle)(m->base), IPCP_LOG_WARN,
                   "cuIpcCloseMemHandle(%#llx)", (unsigned long long)m->base);
    if (entered)
        ipcp__cuda_leave(&sc);
    free(m);
}

static void cuda_unimport_legacy(ipcp__backend_t *be, cuda_legacy_map_t *m)
{
    /* Closed under the lock: an import of the same handle in between would
     * fail, the handle being still open in this context. */
    pthread_mutex_lock(&cuda_legacy_lock);
    if (--m->refs == 0) {
        ipcp__list_del(&m->link);
        cuda_legacy_close(be, m);
    }
    pthread_mutex_unlock(&cuda_legacy_lock);
}

void ipcp__cuda_import_drop_all(ipcp__backend_t *be)
{
    ipcp__list_t *e;
    pthread_mutex_lock(&cuda_legacy_lock);
    while ((e = ipcp__list_pop_front(&cuda_legacy_maps)) != NULL) {
        cuda_legacy_map_t *m = ipcp__list_entry(e, cuda_legacy_map_t, link);
        IPCP_DEBUG(IPCP_SUB_CUDA,
                   "closing a legacy IPC mapping at %#llx "
                   "left open (%d references)",
                   (unsigned long long)m->base, m->refs);
        if (m->device < be->ndev)
            cuda_legacy_close(be, m);
        else
            free(m);
    }
    pthread_mutex_unlock(&cuda_legacy_lock);
}

/* ---- VMM ----------------------------------------------------------------- */

/* Unmaps the first n pieces of im's reservation and frees it. */
static void cuda_vmm_unmap(cuda_import_t *im, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        ipcp__cu_check(
            IPCP_CU(cuMemUnmap)(im->va + (CUdeviceptr)i * im->piece, im->piece),
            IPCP_LOG_WARN, "cuMemUnmap(%#llx, %zu bytes)",
            (unsigned long long)(im->va + (CUdeviceptr)i * im->piece),
            im->piece);
    ipcp__cu_check(IPCP_CU(cuMemAddressFree)(im->va, im->size), IPCP_LOG_WARN,
                   "cuMemAddressFree(%#llx, %zu bytes)",
                   (unsigned long long)im->va, im->size);
}

/* Maps the allocation of fd at va (its handle is dropped: the mapping
 * keeps the memory). */
static ipcp_status_t cuda_vmm_map_one(CUdeviceptr va, size_t size, int fd,
                                      const ipcp__cuda_vmm_data_t *d)
{
    CUmemGenericAllocationHandle h;
    ipcp_status_t st =
        ipcp__cu_check(IPCP_CU(cuMemImportFromShareableHandle)(
                           &h, (void *)(uintptr_t)fd,
                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                       IPCP_LOG_ERROR,
                       "cuMemImportFromShareableHandle(fd %d, %zu bytes of "
                       "the exporter's device %d)",
                       fd, size, (int)d->device);
    if (st != IPCP_OK)
        return st;
    st = ipcp__cu_check(IPCP_CU(cuMemMap)(va, size, 0, h, 0), IPCP_LOG_ERROR,
                        "cuMemMap(%#llx, %zu bytes of fd %d)",
                        (unsigned long long)va, size, fd);
    IPCP_CU(cuMemRelease)(h);
    return st;
}

static ipcp_status_t cuda_vmm_map(ipcp__backend_t *be,
                                  const ipcp__cuda_vmm_data_t *d,
                                  const int *fds, int device, cuda_import_t *im)
{
    unsigned char others[IPCP_CU_MAX_DEVICES];
    unsigned n = 0;
    im->piece = (size_t)d->alloc_size;
    im->npieces = d->npieces;
    im->size = im->piece * im->npieces;
    ipcp_status_t st = ipcp__cu_check(
        IPCP_CU(cuMemAddressReserve)(&im->va, im->size, 0, 0, 0),
        IPCP_LOG_ERROR, "cuMemAddressReserve(%zu bytes)", im->size);
    if (st != IPCP_OK)
        return st;
    for (; n < im->npieces && st == IPCP_OK; n += st == IPCP_OK)
        st = cuda_vmm_map_one(im->va + (CUdeviceptr)n * im->piece, im->piece,
                              fds[n], d);
    /* Where the memory sits (which of our devices, if any) is not known
     * here, so every other device is offered access, best effort: a stream
     * of any device of this process may then copy into it. */
    memset(others, 1, sizeof(others));
    if (st == IPCP_OK)
        st = ipcp__cuda_grant(be, im->va, im->size, device, others);
    if (st != IPCP_OK)
        cuda_vmm_unmap(im, n);
    return st;
}

static ipcp_status_t cuda_import_vmm(ipcp__backend_t *be,
                                     const ipcp__export_t *exp, const int *fds,
                                     int nfds, int device, cuda_import_t *im,
                                     void **ptr)
{
    ipcp__cuda_vmm_data_t d;
    ipcp__cuda_scope_t sc;
    ipcp_status_t st = cuda_check_vmm(exp, nfds, &d);
    if (st != IPCP_OK)
        return st;
    if ((st = ipcp__cuda_enter(be, device, IPCP_LOG_ERROR, &sc)) != IPCP_OK)
        return st;
    st = cuda_vmm_map(be, &d, fds, device, im);
    ipcp__cuda_leave(&sc);
    if (st != IPCP_OK)
        return st;
    *ptr = (void *)(uintptr_t)(im->va + d.offset);
    return IPCP_OK;
}

static void cuda_unimport_vmm(ipcp__backend_t *be, cuda_import_t *im)
{
    ipcp__cuda_scope_t sc;
    int entered =
        ipcp__cuda_enter(be, im->device, IPCP_LOG_WARN, &sc) == IPCP_OK;
    cuda_vmm_unmap(im, im->npieces);
    if (entered)
        ipcp__cuda_leave(&sc);
}

/* ---- Pools --------------------------------------------------------------- */

static ipcp_status_t cuda_import_pool(ipcp__backend_t *be,
                                      const ipcp__export_t *exp, const int *fds,
                                      int nfds, int device, cuda_import_t *im,
                                      void **ptr)
{
    ipcp__cuda_pool_data_t d;
    ipcp_status_t st = ipcp__cuda_pool_check(exp, nfds, &d);
    if (st != IPCP_OK)
        return st;
    return ipcp__cuda_pool_import(be, &d, fds[0], device, &im->pool, ptr);
}

/* ---- Entry points -------------------------------------------------------- */

/* device -1 (the engine's one-sided imports name none) maps for device 0. */
ipcp_status_t ipcp__cuda_mem_import(ipcp__backend_t *be,
                                    const ipcp__export_t *exp, const int *fds,
                                    int nfds, int device, void **ptr,
                                    void **handle)
{
    ipcp_status_t st;
    if (device < 0)
        device = 0;
    if (device >= be->ndev)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                          "cannot import for CUDA device %d (%d visible)",
                          device, be->ndev);
    if (exp->kind != IPCP_EXPORT_CUDA_LEGACY &&
        exp->kind != IPCP_EXPORT_CUDA_VMM && exp->kind != IPCP_EXPORT_CUDA_POOL)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA,
                          IPCP_ERR_BAD_DESCRIPTOR,
                          "export kind %u is not a CUDA export", exp->kind);
    cuda_import_t *im = calloc(1, sizeof(*im));
    if (!im)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                          "cannot allocate an import record");
    im->kind = exp->kind;
    im->device = device;
    if (exp->kind == IPCP_EXPORT_CUDA_LEGACY && nfds)
        st = cuda_bad_export("descriptors came with a legacy IPC export");
    else if (exp->kind == IPCP_EXPORT_CUDA_LEGACY)
        st = cuda_import_legacy(be, exp, device, im, ptr);
    else if (exp->kind == IPCP_EXPORT_CUDA_POOL)
        st = cuda_import_pool(be, exp, fds, nfds, device, im, ptr);
    else
        st = cuda_import_vmm(be, exp, fds, nfds, device, im, ptr);
    if (st != IPCP_OK) {
        free(im);
        return st;
    }
    im->magic = CUDA_IMPORT_MAGIC;
    IPCP_DEBUG(IPCP_SUB_CUDA,
               "imported %llu bytes (%s, %d fds) at %p for device %d",
               (unsigned long long)exp->size,
               exp->kind == IPCP_EXPORT_CUDA_VMM    ? "VMM"
               : exp->kind == IPCP_EXPORT_CUDA_POOL ? "pool"
                                                    : "legacy IPC",
               nfds, *ptr, device);
    *handle = im;
    return IPCP_OK;
}

ipcp_status_t ipcp__cuda_mem_unimport(ipcp__backend_t *be, void *handle)
{
    cuda_import_t *im = handle;
    if (!im || im->magic != CUDA_IMPORT_MAGIC)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                          "CUDA mem_unimport of a handle that is not a live "
                          "import");
    im->magic = 0;
    if (im->kind == IPCP_EXPORT_CUDA_LEGACY)
        cuda_unimport_legacy(be, im->legacy);
    else if (im->kind == IPCP_EXPORT_CUDA_POOL)
        ipcp__cuda_pool_unimport(be, im->pool);
    else
        cuda_unimport_vmm(be, im);
    free(im);
    return IPCP_OK;
}
