/* Cost of pointer queries: cuPointerGetAttributes with ipcpipe's 10 and 7
 * attributes, and cuPointerGetAttribute(MEMORY_TYPE) alone, on malloc'd
 * host memory, pinned host memory and device memory; ns a call, median
 * of 5 runs of 20000.
 *   gcc -O2 ptrcost.c -I/usr/local/cuda/include -lcuda -o /tmp/ptrcost */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) ||
        cuCtxSetCurrent(c))
        return 1;
    void *host = malloc(1 << 20), *pinned = NULL;
    CUdeviceptr dev;
    cuMemAlloc(&dev, 1 << 20);
    cuMemHostAlloc(&pinned, 1 << 20, 0);
    void *ptrs[] = {host, pinned, (void *)(uintptr_t)dev};
    const char *names[] = {"malloc", "pinned", "device"};
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
    uint64_t v[10];
    void *data[10];
    for (int i = 0; i < 10; i++)
        data[i] = &v[i];
    for (int p = 0; p < 3; p++)
        for (int m = 0; m < 3; m++) {
            double r[5];
            unsigned na = m == 0 ? 10 : 7;
            for (int k = 0; k < 5; k++) {
                double t0 = now();
                for (int i = 0; i < 20000; i++) {
                    char *q = (char *)ptrs[p] + (i & 255) * 64;
                    if (m < 2)
                        cuPointerGetAttributes(na, attrs, data,
                                               (CUdeviceptr)(uintptr_t)q);
                    else
                        cuPointerGetAttribute(&v[0],
                                              CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                              (CUdeviceptr)(uintptr_t)q);
                }
                r[k] = (now() - t0) / 20000;
            }
            qsort(r, 5, sizeof(double), cmp);
            printf("ptr %-7s %-12s %7.0f ns [%.0f-%.0f]\n", names[p],
                   m == 0   ? "10 attrs"
                   : m == 1 ? "7 attrs"
                            : "memtype only",
                   r[2], r[0], r[4]);
        }
    return 0;
}
