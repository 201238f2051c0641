/* The benches' slots of fresh data (slots.h). */
#include "slots.h"

#include <stdio.h>
#include <string.h>

#include "pattern.h"
#include "tool_cuda.h"

#ifdef IPCP_HAVE_CUDA
static int slot_cu(CUresult r, const char *call, char *err, size_t elen)
{
    char b[160];
    if (r == CUDA_SUCCESS)
        return 0;
    snprintf(err, elen, "%s: %s", call, tool_cu_strerror(r, b, sizeof(b)));
    return -1;
}
#endif

int tool_slot_fill(unsigned char *p, int dev, size_t size, uint64_t seed,
                   uint64_t off, unsigned char *tmp, char *err, size_t elen)
{
    unsigned char *h = dev ? tmp : p;
    if (seed)
        ipcp_pattern_fill(h, size, seed, off);
    else
        memset(h, TOOL_SLOT_POISON, size);
    if (!dev)
        return 0;
#ifdef IPCP_HAVE_CUDA
    /* Synchronized: a pageable copy may return before its DMA lands, and
     * the library's streams do not wait for the legacy one. */
    if (size &&
        slot_cu(TOOL_CU(cuMemcpyHtoD)((CUdeviceptr)(uintptr_t)p, tmp, size),
                "cuMemcpyHtoD", err, elen))
        return -1;
    return slot_cu(TOOL_CU(cuCtxSynchronize)(), "cuCtxSynchronize", err, elen);
#else
    snprintf(err, elen, "device slots need a build with CUDA");
    return -1;
#endif
}

unsigned char *tool_slot_read(unsigned char *p, int dev, size_t size,
                              unsigned char *tmp, char *err, size_t elen)
{
    if (!dev)
        return p;
#ifdef IPCP_HAVE_CUDA
    if (size &&
        slot_cu(TOOL_CU(cuMemcpyDtoH)(tmp, (CUdeviceptr)(uintptr_t)p, size),
                "cuMemcpyDtoH", err, elen))
        return NULL;
    return tmp;
#else
    (void)size;
    (void)tmp;
    snprintf(err, elen, "device slots need a build with CUDA");
    return NULL;
#endif
}
