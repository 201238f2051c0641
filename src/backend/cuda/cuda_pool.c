/* Memory of cudaMallocAsync pools made with a shareable handle type.
 *
 * The exporter shares the pool once (its fd) and names the allocation by
 * cuMemPoolExportPointer's data, which the driver gives only for an
 * allocation's start and only once the pool has been exported.  The
 * importer imports the pool from the fd, grants its device access, and
 * imports the pointer, which maps the allocation.
 *
 * The driver asks importers to free an imported pointer before its owner
 * frees it.  A peer cannot see when the user frees a buffer, so the
 * import is kept as long as the owner's region lives, as legacy IPC
 * mappings are: the owner retires the region at its next transfer from
 * that address (the allocation's buffer id changes), and the peer then
 * frees its import.  Until then the freed allocation's memory stays
 * mapped there (an owner's free succeeds meanwhile, and an allocation
 * made in its place is new memory, named by new export data).
 *
 * Imports are kept process-wide, refcounted, keyed by the export data
 * (the same for one allocation, different for one made again at the same
 * address): an allocation imported twice would be mapped at one address,
 * and the first free would unmap it for both. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/cuda_backend.h"
#include "common/list.h"
#include "common/status.h"

typedef struct cuda_pool_map {
    ipcp__list_t link;
    unsigned char key[sizeof(CUmemPoolPtrExportData)];
    CUmemoryPool pool; /* imported */
    CUdeviceptr va;    /* the allocation, mapped here */
    size_t size;
    int device;       /* the device it was mapped for */
    uint64_t granted; /* devices (ordinals here) granted access */
    int refs;
} cuda_pool_map_t;

static pthread_mutex_t cuda_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static ipcp__list_t cuda_pool_maps = {&cuda_pool_maps, &cuda_pool_maps};

/* ---- Exporting ----------------------------------------------------------- */

/* A new descriptor of pool (-1 when it has no POSIX fd handle type: the
 * device's default pool, or a pool made without one; quietly at level). */
static int cuda_pool_fd_of(CUmemoryPool pool, int level)
{
    char err[160];
    int fd = -1;
    CUresult r = IPCP_CU(cuMemPoolExportToShareableHandle)(
        &fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS) {
        ipcp__fail(level, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                   "the cudaMallocAsync pool %p cannot be shared "
                   "(cuMemPoolExportToShareableHandle: %s): a pool must be "
                   "made with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR",
                   (void *)pool, ipcp__cu_strerror(r, err, sizeof(err)));
        return -1;
    }
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

ipcp_status_t ipcp__cuda_pool_export(const void *ptr, size_t len,
                                     const ipcp__cuda_ptr_t *pi,
                                     ipcp__export_t *exp)
{
    ipcp__cuda_pool_data_t d;
    CUmemPoolPtrExportData pd;
    char err[160];
    uint64_t off = (uint64_t)((uintptr_t)ptr - pi->base);
    if ((uintptr_t)ptr < pi->base || off > pi->size || len > pi->size - off)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "[%p, +%zu) leaves its pool allocation [%#llx, "
                          "+%zu): it cannot be shared as one",
                          ptr, len, (unsigned long long)pi->base, pi->size);
    /* The driver exports a pointer only from a pool exported before. */
    int fd = cuda_pool_fd_of(pi->pool, IPCP_LOG_DEBUG);
    if (fd < 0)
        return IPCP_ERR_UNSUPPORTED;
    close(fd);
    CUresult r = IPCP_CU(cuMemPoolExportPointer)(&pd, pi->base);
    if (r != CUDA_SUCCESS)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "cuMemPoolExportPointer(%#llx): %s",
                          (unsigned long long)pi->base,
                          ipcp__cu_strerror(r, err, sizeof(err)));
    memset(exp, 0, sizeof(*exp));
    memset(&d, 0, sizeof(d));
    exp->kind = IPCP_EXPORT_CUDA_POOL;
    exp->len = sizeof(d);
    exp->size = pi->size - off;
    d.magic = IPCP_CUDA_POOL_MAGIC;
    memcpy(d.ptr, &pd, sizeof(d.ptr));
    d.alloc_size = pi->size;
    d.offset = off;
    d.check = ipcp__cuda_export_check(exp, &d, sizeof(d));
    memcpy(exp->data, &d, sizeof(d));
    IPCP_DEBUG(IPCP_SUB_CUDA,
               "pool memory at %p (allocation [%#llx, +%zu) of pool %p) "
               "shared through its pool",
               ptr, (unsigned long long)pi->base, pi->size, (void *)pi->pool);
    return IPCP_OK;
}

int ipcp__cuda_pool_fd(ipcp__backend_t *be, const void *base)
{
    ipcp__cuda_ptr_t pi;
    if (!ipcp__cuda_query(be, base, &pi) || !pi.pool ||
        pi.base != (CUdeviceptr)(uintptr_t)base) {
        ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                   "%p is no longer the start of a pool allocation: its "
                   "export cannot be shared",
                   base);
        return -1;
    }
    return cuda_pool_fd_of(pi.pool, IPCP_LOG_ERROR);
}

ipcp_status_t ipcp__cuda_pool_access(CUmemoryPool pool, CUdevice dev, int *rw)
{
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CUmemLocation loc;
    memset(&loc, 0, sizeof(loc));
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = (int)dev;
    CUresult r = IPCP_CU(cuMemPoolGetAccess)(&flags, pool, &loc);
    *rw = r == CUDA_SUCCESS && flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return IPCP_OK;
}

/* ---- Importing ----------------------------------------------------------- */

static ipcp_status_t cuda_pool_bad(const char *what)
{
    return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_BAD_DESCRIPTOR,
                      "CUDA export rejected: %s", what);
}

ipcp_status_t ipcp__cuda_pool_check(const ipcp__export_t *exp, int nfds,
                                    ipcp__cuda_pool_data_t *d)
{
    if (exp->len != sizeof(*d))
        return cuda_pool_bad("pool data has the wrong length");
    memcpy(d, exp->data, sizeof(*d));
    if (d->magic != IPCP_CUDA_POOL_MAGIC ||
        d->check != ipcp__cuda_export_check(exp, d, sizeof(*d)))
        return cuda_pool_bad("pool data fails its checksum");
    if (d->alloc_size == 0 || d->alloc_size > (uint64_t)SIZE_MAX / 2 ||
        d->offset > d->alloc_size || exp->size != d->alloc_size - d->offset)
        return cuda_pool_bad("pool sizes do not add up");
    if (nfds != 1)
        return cuda_pool_bad("a pool export came without its pool's file "
                             "descriptor");
    return IPCP_OK;
}

static cuda_pool_map_t *cuda_pool_find(const ipcp__cuda_pool_data_t *d)
{
    ipcp__list_t *pos, *tmp;
    ipcp__list_for_each_safe(pos, tmp, &cuda_pool_maps)
    {
        cuda_pool_map_t *m = ipcp__list_entry(pos, cuda_pool_map_t, link);
        if (!memcmp(m->key, d->ptr, sizeof(m->key)))
            return m;
    }
    return NULL;
}

/* Lets device dev read and write what is imported from pool. */
static ipcp_status_t cuda_pool_grant(CUmemoryPool pool, CUdevice dev)
{
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof(acc));
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = (int)dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return ipcp__cu_check(IPCP_CU(cuMemPoolSetAccess)(pool, &acc, 1),
                          IPCP_LOG_ERROR, "cuMemPoolSetAccess(device %d)",
                          (int)dev);
}

/* Imports the pool of fd for device dev, granting it access. */
static ipcp_status_t cuda_pool_open(int fd, CUdevice dev, CUmemoryPool *pool)
{
    ipcp_status_t st = ipcp__cu_check(
        IPCP_CU(cuMemPoolImportFromShareableHandle)(
            pool, (void *)(uintptr_t)fd,
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        IPCP_LOG_ERROR, "cuMemPoolImportFromShareableHandle(fd %d)", fd);
    if (st != IPCP_OK)
        return st;
    if ((st = cuda_pool_grant(*pool, dev)) != IPCP_OK)
        IPCP_CU(cuMemPoolDestroy)(*pool);
    return st;
}

/* Maps d's allocation from the pool of fd (the current context's device
 * is dev); checked against the size the export claims.  Called with the
 * lock held. */
static ipcp_status_t cuda_pool_map(const ipcp__cuda_pool_data_t *d, int fd,
                                   CUdevice dev, int device,
                                   cuda_pool_map_t **out)
{
    CUmemPoolPtrExportData pd;
    CUdeviceptr va = 0, rbase = 0;
    size_t rsize = 0;
    CUmemoryPool pool;
    ipcp_status_t st = cuda_pool_open(fd, dev, &pool);
    if (st != IPCP_OK)
        return st;
    memcpy(&pd, d->ptr, sizeof(pd));
    st = ipcp__cu_check(IPCP_CU(cuMemPoolImportPointer)(&va, pool, &pd),
                        IPCP_LOG_ERROR,
                        "cuMemPoolImportPointer(allocation of %llu bytes)",
                        (unsigned long long)d->alloc_size);
    if (st == IPCP_OK)
        st = ipcp__cu_check(IPCP_CU(cuMemGetAddressRange)(&rbase, &rsize, va),
                            IPCP_LOG_ERROR, "cuMemGetAddressRange(%#llx)",
                            (unsigned long long)va);
    if (st == IPCP_OK && (rbase != va || rsize < d->alloc_size))
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_BAD_DESCRIPTOR,
                        "CUDA export rejected: it claims %llu bytes, the "
                        "pool's allocation has %zu",
                        (unsigned long long)d->alloc_size, rsize);
    cuda_pool_map_t *m = NULL;
    if (st == IPCP_OK && !(m = calloc(1, sizeof(*m))))
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                        "cannot allocate a pool mapping record");
    if (st != IPCP_OK || !m) {
        if (va)
            IPCP_CU(cuMemFree)(va);
        IPCP_CU(cuMemPoolDestroy)(pool);
        return st;
    }
    memcpy(m->key, d->ptr, sizeof(m->key));
    m->pool = pool;
    m->va = va;
    m->size = (size_t)d->alloc_size;
    m->device = device;
    m->granted = 1ull << device;
    ipcp__list_push_back(&cuda_pool_maps, &m->link);
    *out = m;
    return IPCP_OK;
}

ipcp_status_t ipcp__cuda_pool_import(ipcp__backend_t *be,
                                     const ipcp__cuda_pool_data_t *d, int fd,
                                     int device, void **map, void **ptr)
{
    ipcp__cuda_scope_t sc;
    cuda_pool_map_t *m;
    ipcp_status_t st = ipcp__cuda_enter(be, device, IPCP_LOG_ERROR, &sc);
    if (st != IPCP_OK)
        return st;
    pthread_mutex_lock(&cuda_pool_lock);
    m = cuda_pool_find(d);
    if (m && m->size < d->alloc_size)
        st = cuda_pool_bad("pool allocation size differs from the mapping "
                           "of the same export");
    else if (!m)
        st = cuda_pool_map(d, fd, be->dev[device].dev, device, &m);
    else if (!(m->granted & (1ull << device)) &&
             (st = cuda_pool_grant(m->pool, be->dev[device].dev)) == IPCP_OK)
        m->granted |= 1ull << device;
    if (st == IPCP_OK) /* a new mapping starts at 0 */
        m->refs++;
    pthread_mutex_unlock(&cuda_pool_lock);
    ipcp__cuda_leave(&sc);
    if (st != IPCP_OK)
        return st;
    *map = m;
    *ptr = (void *)(uintptr_t)(m->va + d->offset);
    return IPCP_OK;
}

void ipcp__cuda_pool_unimport(ipcp__backend_t *be, void *map)
{
    cuda_pool_map_t *m = map;
    ipcp__cuda_scope_t sc;
    pthread_mutex_lock(&cuda_pool_lock);
    if (--m->refs > 0) {
        pthread_mutex_unlock(&cuda_pool_lock);
        return;
    }
    ipcp__list_del(&m->link);
    /* Whether the driver gave another import of this pool the same
     * handle: then that one still needs it. */
    int shared = 0;
    ipcp__list_t *pos;
    for (pos = cuda_pool_maps.next; pos != &cuda_pool_maps; pos = pos->next)
        shared |= ipcp__list_entry(pos, cuda_pool_map_t, link)->pool == m->pool;
    pthread_mutex_unlock(&cuda_pool_lock);
    int entered =
        m->device < be->ndev &&
        ipcp__cuda_enter(be, m->device, IPCP_LOG_WARN, &sc) == IPCP_OK;
    ipcp__cu_check(IPCP_CU(cuMemFree)(m->va), IPCP_LOG_WARN,
                   "cuMemFree(imported pool allocation at %#llx)",
                   (unsigned long long)m->va);
    if (!shared)
        ipcp__cu_check(IPCP_CU(cuMemPoolDestroy)(m->pool), IPCP_LOG_WARN,
                       "cuMemPoolDestroy(imported pool %p)", (void *)m->pool);
    if (entered)
        ipcp__cuda_leave(&sc);
    free(m);
}
