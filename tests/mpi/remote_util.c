/* Buffers of host or device memory for test_remote_mpi
 * (remote_test.h): the driver loaded at run time, as the library loads
 * it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef T_CUDA
#include <dlfcn.h>
#endif

#include "remote_test.h"

int nodes = 2;
int use_dev;     /* "cuda": buffers of device memory too */
int mpi_threads; /* MPI_THREAD_MULTIPLE ("mt") */

#ifdef T_CUDA
/* The driver calls the test makes, loaded as the library loads them. */
struct t_cu cu;

/* 1 when a GPU is here, its first device's context current. */
int cu_open(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int n = 0;
    CUdevice d;
    CUcontext c;
    if (!h)
        return 0;
    *(void **)&cu.init = dlsym(h, "cuInit");
    *(void **)&cu.count = dlsym(h, "cuDeviceGetCount");
    *(void **)&cu.get = dlsym(h, "cuDeviceGet");
    *(void **)&cu.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    *(void **)&cu.set = dlsym(h, "cuCtxSetCurrent");
    *(void **)&cu.alloc = dlsym(h, "cuMemAlloc_v2");
    *(void **)&cu.free = dlsym(h, "cuMemFree_v2");
    *(void **)&cu.htod = dlsym(h, "cuMemcpyHtoD_v2");
    *(void **)&cu.dtoh = dlsym(h, "cuMemcpyDtoH_v2");
    *(void **)&cu.sync = dlsym(h, "cuCtxSynchronize");
    *(void **)&cu.screate = dlsym(h, "cuStreamCreate");
    *(void **)&cu.ssync = dlsym(h, "cuStreamSynchronize");
    *(void **)&cu.sdestroy = dlsym(h, "cuStreamDestroy_v2");
    *(void **)&cu.dtod = dlsym(h, "cuMemcpyDtoDAsync_v2");
    *(void **)&cu.memset = dlsym(h, "cuMemsetD8_v2");
    if (!cu.init || !cu.dtoh || !cu.sync || !cu.sdestroy || !cu.dtod ||
        !cu.memset || cu.init(0) != CUDA_SUCCESS ||
        cu.count(&n) != CUDA_SUCCESS || n < 1)
        return 0;
    CU(cu.get(&d, 0));
    CU(cu.retain(&c, d));
    CU(cu.set(c));
    return 1;
}
#endif

/* A buffer of n bytes, of device memory where dev is set. */
unsigned char *buf_new(size_t n, int dev)
{
#ifdef T_CUDA
    if (dev) {
        CUdeviceptr p;
        CU(cu.alloc(&p, n ? n : 1));
        return (unsigned char *)(uintptr_t)p;
    }
#endif
    (void)dev;
    unsigned char *p = malloc(n ? n : 1);
    if (!p)
        fail("out of memory (%zu bytes)", n);
    return p;
}

void buf_free(unsigned char *b, int dev)
{
#ifdef T_CUDA
    if (dev) {
        CU(cu.free((CUdeviceptr)(uintptr_t)b));
        return;
    }
#endif
    (void)dev;
    free(b);
}

/* Host bytes h into the buffer, and back. */
void buf_put(unsigned char *b, const unsigned char *h, size_t n, int dev)
{
#ifdef T_CUDA
    if (dev) {
        /* A pageable copy may return before its DMA lands, and the
         * library's streams do not wait for the legacy one. */
        if (n)
            CU(cu.htod((CUdeviceptr)(uintptr_t)b, h, n));
        CU(cu.sync());
        return;
    }
#endif
    (void)dev;
    memcpy(b, h, n);
}

void buf_get(unsigned char *h, const unsigned char *b, size_t n, int dev)
{
#ifdef T_CUDA
    if (dev) {
        if (n)
            CU(cu.dtoh(h, (CUdeviceptr)(uintptr_t)b, n));
        return;
    }
#endif
    (void)dev;
    memcpy(h, b, n);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        fail("out of memory (%zu bytes)", n);
    return p;
}
