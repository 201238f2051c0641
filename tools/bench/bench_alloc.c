/* ipcpipe-bench: device buffers as other allocators make them (--alloc
 * vmm, vmm0, pool, spool), so that a row shows what the library does with
 * memory it did not allocate: VMM allocations with a POSIX fd handle (as
 * NCCL and PyTorch's expandable segments make them) or without one, and
 * cudaMallocAsync memory from the device's default pool (never shareable)
 * or from a pool made with fd handles.  Made in the bound device's
 * context (the bench binds one device a rank before it allocates). */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#ifdef IPCP_HAVE_CUDA

#include "tool_cuda.h"
#include "bench_cuda_int.h"

/* What a buffer of these allocators needs to be freed. */
typedef struct foreign {
    CUdeviceptr va; /* the reservation (vmm) or the allocation (pools) */
    size_t va_size; /* vmm: bytes reserved and mapped */
    CUmemGenericAllocationHandle h; /* vmm */
    CUmemoryPool pool;              /* spool: the pool made for it */
} foreign_t;

static int vmm_alloc(int device, size_t len, int fd, foreign_t *f, int *nomem,
                     char *err, size_t elen)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc acc;
    size_t gran = 0;
    char what[128];
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes =
        fd ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    if (bench_cu_ok(TOOL_CU(cuMemGetAllocationGranularity)(
                        &gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                    err, elen, "cuMemGetAllocationGranularity") < 0)
        return -1;
    f->va_size = (len + gran - 1) / gran * gran;
    bench_fmt(what, sizeof(what), "cuMemCreate(%zu bytes on device %d)",
              f->va_size, device);
    CUresult r = TOOL_CU(cuMemCreate)(&f->h, f->va_size, &prop, 0);
    *nomem = r == CUDA_ERROR_OUT_OF_MEMORY;
    if (bench_cu_ok(r, err, elen, what) < 0)
        return -1;
    memset(&acc, 0, sizeof(acc));
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (bench_cu_ok(TOOL_CU(cuMemAddressReserve)(&f->va, f->va_size, 0, 0, 0),
                    err, elen, "cuMemAddressReserve") < 0)
        goto err_release;
    if (bench_cu_ok(TOOL_CU(cuMemMap)(f->va, f->va_size, 0, f->h, 0), err, elen,
                    "cuMemMap") < 0)
        goto err_free;
    if (bench_cu_ok(TOOL_CU(cuMemSetAccess)(f->va, f->va_size, &acc, 1), err,
                    elen, "cuMemSetAccess") == 0)
        return 0;
    TOOL_CU(cuMemUnmap)(f->va, f->va_size);
err_free:
    TOOL_CU(cuMemAddressFree)(f->va, f->va_size);
err_release:
    TOOL_CU(cuMemRelease)(f->h);
    return -1;
}

static int pool_alloc(int device, size_t len, int shareable, foreign_t *f,
                      int *nomem, char *err, size_t elen)
{
    char what[128];
    CUresult r;
    if (shareable) {
        CUmemPoolProps pp;
        memset(&pp, 0, sizeof(pp));
        pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        pp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        pp.location.id = device;
        bench_fmt(what, sizeof(what), "cuMemPoolCreate(device %d, fd handles)",
                  device);
        if (bench_cu_ok(TOOL_CU(cuMemPoolCreate)(&f->pool, &pp), err, elen,
                        what) < 0)
            return -1;
        r = TOOL_CU(cuMemAllocFromPoolAsync)(&f->va, len, f->pool, NULL);
    } else {
        r = TOOL_CU(cuMemAllocAsync)(&f->va, len, NULL);
    }
    bench_fmt(what, sizeof(what), "%s(%zu bytes on device %d)",
              shareable ? "cuMemAllocFromPoolAsync" : "cuMemAllocAsync", len,
              device);
    *nomem = r == CUDA_ERROR_OUT_OF_MEMORY;
    if (bench_cu_ok(r, err, elen, what) == 0 &&
        bench_cu_ok(TOOL_CU(cuStreamSynchronize)(NULL), err, elen,
                    "cuStreamSynchronize after the allocation") == 0)
        return 0;
    if (f->va)
        TOOL_CU(cuMemFreeAsync)(f->va, NULL);
    if (f->pool)
        TOOL_CU(cuMemPoolDestroy)(f->pool);
    return -1;
}

int bench_foreign_alloc(bench_alloc_t a, int device, size_t len, bench_buf_t *b,
                        int *nomem, char *err, size_t elen)
{
    foreign_t *f = calloc(1, sizeof(*f));
    int rc;
    *nomem = 0;
    if (!f) {
        *nomem = 1;
        bench_fmt(err, elen, "no memory for an allocation record");
        return -1;
    }
    if (!len)
        len = 1;
    if (a == BENCH_ALLOC_VMM || a == BENCH_ALLOC_VMM0)
        rc = vmm_alloc(device, len, a == BENCH_ALLOC_VMM, f, nomem, err, elen);
    else
        rc = pool_alloc(device, len, a == BENCH_ALLOC_SPOOL, f, nomem, err,
                        elen);
    if (rc < 0) {
        free(f);
        return -1;
    }
    b->ptr = (void *)(uintptr_t)f->va;
    b->foreign = f;
    return 0;
}

void bench_foreign_free(bench_buf_t *b)
{
    foreign_t *f = b->foreign;
    char err[256];
    int rc = 0;
    if (!f)
        return;
    if (b->alloc == BENCH_ALLOC_VMM || b->alloc == BENCH_ALLOC_VMM0) {
        rc |= bench_cu_ok(TOOL_CU(cuMemUnmap)(f->va, f->va_size), err,
                          sizeof(err), "cuMemUnmap");
        rc |= bench_cu_ok(TOOL_CU(cuMemAddressFree)(f->va, f->va_size), err,
                          sizeof(err), "cuMemAddressFree");
        rc |= bench_cu_ok(TOOL_CU(cuMemRelease)(f->h), err, sizeof(err),
                          "cuMemRelease");
    } else {
        rc |= bench_cu_ok(TOOL_CU(cuMemFreeAsync)(f->va, NULL), err,
                          sizeof(err), "cuMemFreeAsync");
        rc |= bench_cu_ok(TOOL_CU(cuStreamSynchronize)(NULL), err, sizeof(err),
                          "cuStreamSynchronize after cuMemFreeAsync");
        if (f->pool)
            rc |= bench_cu_ok(TOOL_CU(cuMemPoolDestroy)(f->pool), err,
                              sizeof(err), "cuMemPoolDestroy");
    }
    if (rc)
        fprintf(stderr, "ipcpipe-bench: freeing a buffer: %s\n", err);
    free(f);
    b->foreign = NULL;
}

#endif
