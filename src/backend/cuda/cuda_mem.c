/* Device memory peers can map.  Our allocations are VMM allocations
 * (cuMemCreate) made shareable as POSIX file descriptors: an fd travels to
 * the peer with SCM_RIGHTS and needs no ptrace rights.  Memory the user
 * allocated (cudaMalloc, cuMemAlloc) is exported as a legacy IPC handle of
 * its allocation's base, since cudaMalloc may sub-allocate and IPC maps
 * the whole underlying allocation (FACTS.md). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/cuda_backend.h"
#include "common/status.h"
#include "common/util.h"

uint64_t ipcp__cuda_export_check(const ipcp__export_t *exp, const void *data,
                                 size_t data_len)
{
    const uint64_t words[2] = {exp->kind, exp->size};
    uint64_t h = ipcp__fnv1a(words, sizeof(words), IPCP_FNV_SEED);
    return ipcp__fnv1a(data, data_len - sizeof(uint64_t), h);
}

static void cuda_vmm_prop(ipcp__backend_t *be, int device,
                          CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof(*prop));
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = (int)be->dev[device].dev;
}

static ipcp_status_t cuda_granularity(ipcp__backend_t *be, int device,
                                      size_t *g)
{
    CUmemAllocationProp prop;
    size_t v = __atomic_load_n(&be->dev[device].gran, __ATOMIC_RELAXED);
    if (v) {
        *g = v;
        return IPCP_OK;
    }
    cuda_vmm_prop(be, device, &prop);
    ipcp_status_t st = ipcp__cu_check(
        IPCP_CU(cuMemGetAllocationGranularity)(
            &v, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        IPCP_LOG_ERROR, "cuMemGetAllocationGranularity(device %d)", device);
    if (st != IPCP_OK)
        return st;
    if (v == 0)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_CUDA,
                          "device %d reports a VMM granularity of 0", device);
    __atomic_store_n(&be->dev[device].gran, v, __ATOMIC_RELAXED);
    *g = v;
    return IPCP_OK;
}

ipcp_status_t ipcp__cuda_grant(ipcp__backend_t *be, CUdeviceptr va, size_t size,
                               int device, const unsigned char *others)
{
    CUmemAccessDesc desc;
    char err[160];
    memset(&desc, 0, sizeof(desc));
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    desc.location.id = (int)be->dev[device].dev;
    ipcp_status_t st = ipcp__cu_check(
        IPCP_CU(cuMemSetAccess)(va, size, &desc, 1), IPCP_LOG_ERROR,
        "cuMemSetAccess(%#llx, %zu bytes, read-write for device %d)",
        (unsigned long long)va, size, device);
    if (st != IPCP_OK)
        return st;
    /* One call per other device, so that a device whose link is refused
     * (P2P off in a VM or container) does not cost the others access. */
    for (int d = 0; d < be->ndev; d++) {
        if (d == device || !others[d])
            continue;
        desc.location.id = (int)be->dev[d].dev;
        CUresult r = IPCP_CU(cuMemSetAccess)(va, size, &desc, 1);
        if (r != CUDA_SUCCESS)
            IPCP_DEBUG(IPCP_SUB_CUDA,
                       "device %d gets no access to %zu bytes "
                       "at %#llx: cuMemSetAccess: %s",
                       d, size, (unsigned long long)va,
                       ipcp__cu_strerror(r, err, sizeof(err)));
    }
    return IPCP_OK;
}

/* Creates, reserves, maps and opens up a->size bytes on a->device. */
static ipcp_status_t cuda_vmm_create(ipcp__backend_t *be, ipcp__cuda_alloc_t *a,
                                     size_t g)
{
    CUmemAllocationProp prop;
    unsigned char peers[IPCP_CU_MAX_DEVICES];
    CUresult r;
    ipcp_status_t st;

    cuda_vmm_prop(be, a->device, &prop);
    r = IPCP_CU(cuMemCreate)(&a->h, a->size, &prop, 0);
    st = ipcp__cu_result(
        r, IPCP_LOG_ERROR,
        r == CUDA_ERROR_OUT_OF_MEMORY ? IPCP_ERR_NOMEM : IPCP_ERR_CUDA,
        "cuMemCreate(%zu bytes on device %d)", a->size, a->device);
    if (st != IPCP_OK)
        return st;
    st = ipcp__cu_check(IPCP_CU(cuMemAddressReserve)(&a->va, a->size, g, 0, 0),
                        IPCP_LOG_ERROR, "cuMemAddressReserve(%zu bytes)",
                        a->size);
    if (st != IPCP_OK)
        goto release;
    st = ipcp__cu_check(IPCP_CU(cuMemMap)(a->va, a->size, 0, a->h, 0),
                        IPCP_LOG_ERROR, "cuMemMap(%#llx, %zu bytes)",
                        (unsigned long long)a->va, a->size);
    if (st != IPCP_OK)
        goto free_va;
    /* Every device that can reach this one may copy out of it (a stream of
     * another device of this process, or after import in a peer). */
    for (int d = 0; d < be->ndev; d++)
        peers[d] = be->peer[d][a->device];
    st = ipcp__cuda_grant(be, a->va, a->size, a->device, peers);
    if (st != IPCP_OK)
        goto unmap;
    return IPCP_OK;
unmap:
    IPCP_CU(cuMemUnmap)(a->va, a->size);
free_va:
    IPCP_CU(cuMemAddressFree)(a->va, a->size);
release:
    IPCP_CU(cuMemRelease)(a->h);
    return st;
}

ipcp_status_t ipcp__cuda_mem_alloc(ipcp__backend_t *be, size_t len, int device,
                                   void **ptr, void **handle)
{
    ipcp__cuda_scope_t sc;
    size_t g = 0;
    ipcp_status_t st;

    if (device < 0 || device >= be->ndev)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                          "CUDA device %d does not exist in this process "
                          "(%d visible)",
                          device, be->ndev);
    if (!be->dev[device].vmm)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "CUDA device %d cannot make VMM allocations "
                          "shareable by file descriptor",
                          device);
    ipcp__cuda_alloc_t *a = calloc(1, sizeof(*a));
    if (!a)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_NOMEM,
                          "cannot allocate an allocation record");
    if ((st = ipcp__cuda_enter(be, device, IPCP_LOG_ERROR, &sc)) != IPCP_OK)
        goto free_record;
    if ((st = cuda_granularity(be, device, &g)) != IPCP_OK)
        goto leave;
    if (len > SIZE_MAX / 2) {
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                        "CUDA allocation of %zu bytes is too large", len);
        goto leave;
    }
    /* A zero-length request still gets a granule: a distinct address that
     * can be exported and freed like any other. */
    a->magic = IPCP_CUDA_ALLOC_MAGIC;
    a->device = device;
    a->size = ipcp__align_up(len ? len : 1, g);
    if ((st = cuda_vmm_create(be, a, g)) != IPCP_OK)
        goto leave;
    ipcp__cuda_leave(&sc);
    pthread_mutex_lock(&be->lock);
    ipcp__list_push_back(&be->allocs, &a->link);
    pthread_mutex_unlock(&be->lock);
    IPCP_DEBUG(IPCP_SUB_CUDA,
               "allocated %zu bytes (%zu mapped) at %#llx on "
               "device %d",
               len, a->size, (unsigned long long)a->va, device);
    *ptr = (void *)(uintptr_t)a->va;
    *handle = a;
    return IPCP_OK;
leave:
    ipcp__cuda_leave(&sc);
free_record:
    free(a);
    return st;
}

/* Unmaps and releases; the physical memory lives on while a peer still
 * maps it (its import holds a reference). */
static void cuda_vmm_destroy(ipcp__backend_t *be, ipcp__cuda_alloc_t *a)
{
    ipcp__cuda_scope_t sc;
    int entered =
        ipcp__cuda_enter(be, a->device, IPCP_LOG_WARN, &sc) == IPCP_OK;
    ipcp__cu_check(IPCP_CU(cuMemUnmap)(a->va, a->size), IPCP_LOG_WARN,
                   "cuMemUnmap(%#llx, %zu bytes)", (unsigned long long)a->va,
                   a->size);
    ipcp__cu_check(IPCP_CU(cuMemAddressFree)(a->va, a->size), IPCP_LOG_WARN,
                   "cuMemAddressFree(%#llx, %zu bytes)",
                   (unsigned long long)a->va, a->size);
    ipcp__cu_check(IPCP_CU(cuMemRelease)(a->h), IPCP_LOG_WARN,
                   "cuMemRelease(allocation at %#llx)",
                   (unsigned long long)a->va);
    if (entered)
        ipcp__cuda_leave(&sc);
    a->magic = 0;
    free(a);
}

ipcp_status_t ipcp__cuda_mem_free(ipcp__backend_t *be, void *handle)
{
    ipcp__cuda_alloc_t *a = handle;
    if (!a || a->magic != IPCP_CUDA_ALLOC_MAGIC)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                          "CUDA mem_free of a handle that is not a live "
                          "allocation");
    pthread_mutex_lock(&be->lock);
    ipcp__list_del(&a->link);
    pthread_mutex_unlock(&be->lock);
    cuda_vmm_destroy(be, a);
    return IPCP_OK;
}

void ipcp__cuda_mem_release_all(ipcp__backend_t *be)
{
    ipcp__list_t *e;
    while ((e = ipcp__list_pop_front(&be->allocs)) != NULL) {
        ipcp__cuda_alloc_t *a = ipcp__list_entry(e, ipcp__cuda_alloc_t, link);
        IPCP_DEBUG(IPCP_SUB_CUDA,
                   "releasing %zu bytes at %#llx left "
                   "allocated",
                   a->size, (unsigned long long)a->va);
        cuda_vmm_destroy(be, a);
    }
}

/* ---- Export -------------------------------------------------------------- */

/* Our allocation holding p, or NULL. */
static ipcp__cuda_alloc_t *cuda_find_alloc(ipcp__backend_t *be, const void *p)
{
    ipcp__list_t *pos, *tmp;
    ipcp__cuda_alloc_t *found = NULL;
    pthread_mutex_lock(&be->lock);
    ipcp__list_for_each_safe(pos, tmp, &be->allocs)
    {
        ipcp__cuda_alloc_t *a = ipcp__list_entry(pos, ipcp__cuda_alloc_t, link);
        if ((uintptr_t)p >= a->va && (uintptr_t)p - a->va < a->size)
            found = a;
    }
    pthread_mutex_unlock(&be->lock);
    return found;
}

/* Fills exp with npieces allocations of piece bytes from off in the
 * first, of device (IPCP_EXPORT_CUDA_VMM). */
static void cuda_vmm_describe(ipcp__export_t *exp, size_t piece,
                              uint32_t npieces, uint64_t off, int device)
{
    ipcp__cuda_vmm_data_t d;
    memset(exp, 0, sizeof(*exp));
    memset(&d, 0, sizeof(d));
    exp->kind = IPCP_EXPORT_CUDA_VMM;
    exp->len = sizeof(d);
    exp->size = (uint64_t)piece * npieces - off;
    d.magic = IPCP_CUDA_VMM_MAGIC;
    d.alloc_size = piece;
    d.offset = off;
    d.device = device;
    d.npieces = npieces;
    d.check = ipcp__cuda_export_check(exp, &d, sizeof(d));
    memcpy(exp->data, &d, sizeof(d));
}

static ipcp_status_t cuda_export_vmm(ipcp__backend_t *be, ipcp__cuda_alloc_t *a,
                                     const void *ptr, size_t len,
                                     ipcp__export_t *exp, int *fd)
{
    ipcp__cuda_scope_t sc;
    uint64_t off = (uint64_t)((uintptr_t)ptr - a->va);
    int f = -1;
    char err[160];

    if ((uintptr_t)ptr < a->va || off > a->size || len > a->size - off)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_OUT_OF_RANGE,
                          "export of [%p, +%zu) leaves the allocation "
                          "[%#llx, +%zu)",
                          ptr, len, (unsigned long long)a->va, a->size);
    ipcp_status_t st = ipcp__cuda_enter(be, a->device, IPCP_LOG_ERROR, &sc);
    if (st != IPCP_OK)
        return st;
    CUresult r = IPCP_CU(cuMemExportToShareableHandle)(
        &f, a->h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    ipcp__cuda_leave(&sc);
    if (r != CUDA_SUCCESS)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "device memory at %p cannot be exported: "
                          "cuMemExportToShareableHandle: %s; it will move "
                          "through the staged path",
                          ptr, ipcp__cu_strerror(r, err, sizeof(err)));
    /* The driver's descriptor must not leak into programs this process
     * starts. */
    (void)fcntl(f, F_SETFD, FD_CLOEXEC);
    cuda_vmm_describe(exp, a->size, 1, off, a->device);
    *fd = f;
    return IPCP_OK;
}

/* ---- VMM memory ipcpipe did not allocate -------------------------------- */

/* Whether the allocation mapped at va is h (a retained handle is the
 * value the allocation was mapped with, whoever retains it). */
static int cuda_same_alloc(CUdeviceptr va, CUmemGenericAllocationHandle h)
{
    CUmemGenericAllocationHandle o;
    if (IPCP_CU(cuMemRetainAllocationHandle)(&o, (void *)(uintptr_t)va) !=
        CUDA_SUCCESS)
        return 0;
    IPCP_CU(cuMemRelease)(o);
    return o == h;
}

/* The allocation mapped at va, checked to be one of size bytes mapped
 * whole there (one cuMemMap at the allocation's offset 0, which cuMemMap
 * requires) and shareable by POSIX fd: its retained handle in *h (the
 * caller releases it).  A wrong extent would map the wrong bytes, so it
 * is checked at both ends and beside.  Entered in its device. */
static ipcp_status_t cuda_vmm_piece(CUdeviceptr va, size_t size,
                                    CUmemGenericAllocationHandle *h)
{
    CUmemAllocationProp prop;
    CUdeviceptr base = 0;
    size_t gran = 0, got = 0;
    if (IPCP_CU(cuMemRetainAllocationHandle)(h, (void *)(uintptr_t)va) !=
        CUDA_SUCCESS)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "no VMM allocation is mapped at %#llx",
                          (unsigned long long)va);
    memset(&prop, 0, sizeof(prop));
    CUresult r = IPCP_CU(cuMemGetAllocationPropertiesFromHandle)(&prop, *h);
    if (r == CUDA_SUCCESS &&
        !(prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS)
        r = IPCP_CU(cuMemGetAllocationGranularity)(
            &gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS || !gran || (gran & (gran - 1))) {
        IPCP_CU(cuMemRelease)(*h);
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "VMM memory at %#llx was made without a POSIX file "
                          "descriptor handle type (handle types %#x): it "
                          "cannot be exported and will move through the "
                          "staged path",
                          (unsigned long long)va,
                          (unsigned)prop.requestedHandleTypes);
    }
    r = IPCP_CU(cuMemGetAddressRange)(&base, &got, va);
    if (r != CUDA_SUCCESS || base != va || got != size || size % gran ||
        !cuda_same_alloc(va + size - gran, *h) ||
        (va >= gran && cuda_same_alloc(va - gran, *h)) ||
        cuda_same_alloc(va + size, *h)) {
        IPCP_CU(cuMemRelease)(*h);
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "VMM memory at %#llx: its mapping's extent is not "
                          "one allocation's of %zu bytes; it will move "
                          "through the staged path",
                          (unsigned long long)va, size);
    }
    return IPCP_OK;
}

/* Device memory another allocator made with cuMemCreate (PyTorch's
 * expandable segments, NCCL's buffers, the user's own): exported as the
 * allocations holding [ptr, +len), each shareable by fd, of one size and
 * mapped back to back (a buffer in one of them is one piece).  The fds are
 * made for each peer by mem_share, so that none stays open here.  *vmm:
 * whether it is VMM memory at all (0: nothing was said, another way may
 * serve).  Entered in the buffer's device. */
static ipcp_status_t cuda_export_foreign(const void *ptr, size_t len,
                                         const ipcp__cuda_ptr_t *pi,
                                         ipcp__export_t *exp, int *vmm)
{
    CUmemGenericAllocationHandle h;
    CUdeviceptr base = pi->map_base, p = (CUdeviceptr)(uintptr_t)ptr;
    size_t piece = pi->map_size;
    *vmm =
        IPCP_CU(cuMemRetainAllocationHandle)(&h, (void *)ptr) == CUDA_SUCCESS;
    if (!*vmm) /* cuMemAlloc'd or pool memory */
        return IPCP_ERR_UNSUPPORTED;
    IPCP_CU(cuMemRelease)(h);
    if (!piece || p < base || p - base > piece ||
        len > (uint64_t)piece * IPCP_EXPORT_MAX_FDS - (p - base))
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "[%p, +%zu) spans more than %d VMM allocations of "
                          "%zu bytes: it will move through the staged path",
                          ptr, len, IPCP_EXPORT_MAX_FDS, piece);
    uint64_t off = p - base;
    uint32_t n = (uint32_t)ipcp__max((off + len + piece - 1) / piece, 1);
    for (uint32_t i = 0; i < n; i++) {
        ipcp_status_t st =
            cuda_vmm_piece(base + (uint64_t)i * piece, piece, &h);
        if (st != IPCP_OK)
            return st;
        IPCP_CU(cuMemRelease)(h);
    }
    cuda_vmm_describe(exp, piece, n, off, pi->device);
    IPCP_DEBUG(IPCP_SUB_CUDA,
               "VMM memory at %p made by another allocator: %u allocation(s) "
               "of %zu bytes from %#llx, shared by fd",
               ptr, n, piece, (unsigned long long)base);
    return IPCP_OK;
}

/* Exports one allocation mapped at va (checked as cuda_vmm_piece does)
 * as a new fd. */
static int cuda_vmm_fd(CUdeviceptr va, size_t size)
{
    CUmemGenericAllocationHandle h;
    char err[160];
    int f = -1;
    if (cuda_vmm_piece(va, size, &h) != IPCP_OK)
        return -1;
    CUresult r = IPCP_CU(cuMemExportToShareableHandle)(
        &f, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    IPCP_CU(cuMemRelease)(h);
    if (r != CUDA_SUCCESS) {
        ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_CUDA, IPCP_ERR_CUDA,
                   "cuMemExportToShareableHandle(allocation at %#llx): %s",
                   (unsigned long long)va,
                   ipcp__cu_strerror(r, err, sizeof(err)));
        return -1;
    }
    /* The driver's descriptor must not leak into programs this process
     * starts. */
    (void)fcntl(f, F_SETFD, FD_CLOEXEC);
    return f;
}

/* A pool allocation's export needs its pool's descriptor. */
static int cuda_pool_share(ipcp__backend_t *be, const void *ptr,
                           const ipcp__export_t *exp, int *fds, int max)
{
    ipcp__cuda_pool_data_t d;
    ipcp__cuda_scope_t sc;
    ipcp__cuda_ptr_t pi;
    memcpy(&d, exp->data, sizeof(d));
    if (exp->len != sizeof(d) || max < 1 || (uintptr_t)ptr < d.offset) {
        ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                   "cannot share a pool export at %p with room for %d "
                   "descriptors",
                   ptr, max);
        return -1;
    }
    const void *base = (const char *)ptr - d.offset;
    if (!ipcp__cuda_query(be, base, &pi) ||
        ipcp__cuda_enter(be, pi.device, IPCP_LOG_ERROR, &sc) != IPCP_OK) {
        ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                   "%p is no longer device memory: its export cannot be "
                   "shared",
                   base);
        return -1;
    }
    fds[0] = ipcp__cuda_pool_fd(be, base);
    ipcp__cuda_leave(&sc);
    return fds[0] < 0 ? -1 : 1;
}

int ipcp__cuda_mem_share(ipcp__backend_t *be, const void *ptr,
                         const ipcp__export_t *exp, int *fds, int max)
{
    ipcp__cuda_vmm_data_t d;
    ipcp__cuda_scope_t sc;
    ipcp__cuda_ptr_t pi;
    int n = 0;
    if (exp->kind == IPCP_EXPORT_CUDA_POOL)
        return cuda_pool_share(be, ptr, exp, fds, max);
    if (exp->kind != IPCP_EXPORT_CUDA_VMM)
        return 0;
    memcpy(&d, exp->data, sizeof(d));
    if (exp->len != sizeof(d) || !d.npieces || d.npieces > (uint32_t)max ||
        (uintptr_t)ptr < d.offset) {
        ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                   "cannot share an export of %u allocation(s) at %p with "
                   "room for %d descriptors",
                   d.npieces, ptr, max);
        return -1;
    }
    if (!ipcp__cuda_query(be, ptr, &pi) ||
        ipcp__cuda_enter(be, pi.device, IPCP_LOG_ERROR, &sc) != IPCP_OK) {
        ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                   "%p is no longer device memory: its export cannot be "
                   "shared",
                   ptr);
        return -1;
    }
    CUdeviceptr base = (CUdeviceptr)(uintptr_t)ptr - d.offset;
    for (; n < (int)d.npieces; n++)
        if ((fds[n] = cuda_vmm_fd(base + (uint64_t)n * d.alloc_size,
                                  (size_t)d.alloc_size)) < 0)
            break;
    ipcp__cuda_leave(&sc);
    if (n == (int)d.npieces)
        return n;
    while (n > 0)
        close(fds[--n]);
    return -1;
}

int ipcp__cuda_mem_span(ipcp__backend_t *be, const void *ptr, size_t len,
                        uintptr_t *base, size_t *size, uint64_t *id)
{
    ipcp__cuda_ptr_t pi, q;
    if (!len || !ipcp__cuda_query(be, ptr, &pi) || pi.legacy_ipc || pi.pool ||
        !pi.map_size || (uintptr_t)ptr < pi.map_base)
        return 0;
    uintptr_t b = (uintptr_t)pi.map_base, end = (uintptr_t)ptr + len;
    size_t piece = pi.map_size;
    uint64_t h =
        ipcp__fnv1a(&pi.buffer_id, sizeof(pi.buffer_id), IPCP_FNV_SEED);
    int n = 1;
    if (end < (uintptr_t)ptr)
        return 0;
    for (uintptr_t p = b + piece; p < end && p > b; p += piece, n++) {
        if (n == IPCP_EXPORT_MAX_FDS || !ipcp__cuda_query(be, (void *)p, &q) ||
            q.legacy_ipc || q.device != pi.device || q.map_base != p ||
            q.map_size != piece) {
            ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                       "[%p, +%zu) is not made of at most %d VMM mappings of "
                       "%zu bytes back to back",
                       ptr, len, IPCP_EXPORT_MAX_FDS, piece);
            return 0;
        }
        h = ipcp__fnv1a(&q.buffer_id, sizeof(q.buffer_id), h);
    }
    *base = b;
    *size = piece * (size_t)n;
    *id = h;
    return 1;
}

ipcp_status_t ipcp__cuda_mem_access(ipcp__backend_t *be, const void *ptr,
                                    size_t len, int device)
{
    ipcp__cuda_ptr_t pi;
    CUmemLocation loc;
    unsigned long long flags = 0;
    if (!ipcp__cuda_query(be, ptr, &pi) || pi.legacy_ipc)
        return IPCP_OK; /* peer access (device_link) serves it */
    if (device < 0 || device >= be->ndev)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                          "no device %d here", device);
    if (pi.pool) {
        int rw = 0;
        ipcp__cuda_pool_access(pi.pool, be->dev[device].dev, &rw);
        if (rw)
            return IPCP_OK;
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "device %d may not write the pool memory at %p: "
                          "its pool grants that device no access",
                          device, ptr);
    }
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = (int)be->dev[device].dev;
    /* Every mapping the buffer crosses grants its own (a copy into one
     * that grants nothing faults, and spoils the context). */
    uintptr_t p = (uintptr_t)ptr, end = p + (len ? len : 1);
    for (int n = 0; p < end && n <= IPCP_EXPORT_MAX_FDS; n++) {
        CUresult r = IPCP_CU(cuMemGetAccess)(&flags, &loc, (CUdeviceptr)p);
        if (r != CUDA_SUCCESS || flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE ||
            !ipcp__cuda_query(be, (const void *)p, &pi) ||
            pi.map_base + pi.map_size <= p)
            break;
        p = (uintptr_t)(pi.map_base + pi.map_size);
    }
    if (p >= end)
        return IPCP_OK;
    return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                      "device %d may not write the VMM memory at %#llx: a "
                      "mapping of [%p, +%zu) grants that device no access",
                      device, (unsigned long long)p, ptr, len);
}

/* ---- The user's other device memory ------------------------------------- */

/* Finds the allocation of user memory and its IPC handle. */
static ipcp_status_t cuda_legacy_handle(const void *ptr,
                                        const ipcp__cuda_ptr_t *pi,
                                        CUdeviceptr *base, size_t *size,
                                        CUipcMemHandle *h)
{
    char err[160];
    CUresult r =
        IPCP_CU(cuMemGetAddressRange)(base, size, (CUdeviceptr)(uintptr_t)ptr);
    if (r == CUDA_SUCCESS)
        r = IPCP_CU(cuIpcGetMemHandle)(h, *base);
    if (r == CUDA_SUCCESS)
        return IPCP_OK;
    /* cudaMallocAsync pool memory without IPC lands here. */
    return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                      "device memory at %p (device %d, allocation at %#llx) "
                      "cannot be exported: cuIpcGetMemHandle: %s; it will "
                      "move through the staged path",
                      ptr, pi->device, (unsigned long long)pi->base,
                      ipcp__cu_strerror(r, err, sizeof(err)));
}

/* The user's device memory: through its pool when a cudaMallocAsync pool
 * made it (the pool's fd comes with mem_share), by fd when another
 * allocator made it with cuMemCreate (the fds come with mem_share), else
 * by legacy IPC (cudaMalloc'd). */
static ipcp_status_t cuda_export_user(ipcp__backend_t *be, const void *ptr,
                                      size_t len, ipcp__export_t *exp, int *fd)
{
    ipcp__cuda_legacy_data_t d;
    ipcp__cuda_scope_t sc;
    ipcp__cuda_ptr_t pi;
    CUipcMemHandle h;
    CUdeviceptr base = 0;
    size_t size = 0;

    if (!ipcp__cuda_query(be, ptr, &pi))
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "%p is not CUDA device memory", ptr);
    ipcp_status_t st = ipcp__cuda_enter(be, pi.device, IPCP_LOG_ERROR, &sc);
    if (st != IPCP_OK)
        return st;
    int vmm = 0;
    *fd = -1;
    if (pi.pool) {
        st = ipcp__cuda_pool_export(ptr, len, &pi, exp);
        ipcp__cuda_leave(&sc);
        return st;
    }
    st = cuda_export_foreign(ptr, len, &pi, exp, &vmm);
    if (!vmm)
        st = cuda_legacy_handle(ptr, &pi, &base, &size, &h);
    ipcp__cuda_leave(&sc);
    if (st != IPCP_OK || vmm)
        return st;
    uint64_t off = (uint64_t)((uintptr_t)ptr - base);
    if ((uintptr_t)ptr < base || off > size || len > size - off)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_OUT_OF_RANGE,
                          "export of [%p, +%zu) leaves its allocation "
                          "[%#llx, +%zu)",
                          ptr, len, (unsigned long long)base, size);
    memset(exp, 0, sizeof(*exp));
    memset(&d, 0, sizeof(d));
    exp->kind = IPCP_EXPORT_CUDA_LEGACY;
    exp->len = sizeof(d);
    exp->size = size - off;
    memcpy(d.handle, &h, sizeof(d.handle));
    d.offset = off;
    d.base_size = size;
    d.buffer_id = pi.buffer_id;
    d.check = ipcp__cuda_export_check(exp, &d, sizeof(d));
    memcpy(exp->data, &d, sizeof(d));
    *fd = -1;
    return IPCP_OK;
}

/* A NULL handle is looked up among our allocations first, so that a
 * pointer into the middle of an ipcp_mem_alloc buffer goes by fd too. */
ipcp_status_t ipcp__cuda_mem_export(ipcp__backend_t *be, void *handle,
                                    const void *ptr, size_t len,
                                    ipcp__export_t *exp, int *fd)
{
    ipcp__cuda_alloc_t *a = handle ? handle : cuda_find_alloc(be, ptr);
    if (a && a->magic != IPCP_CUDA_ALLOC_MAGIC)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_CUDA, IPCP_ERR_INVALID,
                          "CUDA mem_export of a handle that is not a live "
                          "allocation");
    if (a)
        return cuda_export_vmm(be, a, ptr, len, exp, fd);
    return cuda_export_user(be, ptr, len, exp, fd);
}
