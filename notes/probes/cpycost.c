/* Driver-call costs of the staged path: per 64K copy between a pinned
 * slot and device memory, enqueue time on the CPU, alone, with an event
 * record, batched (cuMemcpyBatchAsync), with a stream write; and the GPU
 * time of 64 copies.  cc -O2 cpycost.c -I/usr/local/cuda/include -lcuda */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                                  \
    do {                                                                       \
        CUresult r_ = (x);                                                     \
        if (r_) {                                                              \
            fprintf(stderr, "%s: %d line %d\n", #x, (int)r_, __LINE__);        \
            exit(1);                                                           \
        }                                                                      \
    } while (0)
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
enum { N = 64 };
static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
int main(int argc, char **argv)
{
    size_t len = argc > 1 ? strtoul(argv[1], 0, 0) : 65536;
    CUdevice d;
    CUcontext c;
    CUstream s;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&c, d));
    CK(cuCtxSetCurrent(c));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    void *h;
    CUdeviceptr dv, hp;
    h = aligned_alloc(4096, len * N);
    CK(cuMemHostRegister(h, len * N, 0));
    CK(cuMemHostGetDevicePointer(&hp, h, 0));
    CK(cuMemAlloc(&dv, len * N));
    CUevent ev[N];
    for (int i = 0; i < N; i++)
        CK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
    CUdeviceptr flag;
    uint64_t *hf;
    CK(cuMemHostAlloc((void **)&hf, 64, CU_MEMHOSTALLOC_DEVICEMAP));
    CK(cuMemHostGetDevicePointer(&flag, hf, 0));
    const char *names[] = {"h2d",         "h2d+event",       "h2d batch",
                           "d2h",         "d2h+event",       "d2h batch",
                           "h2d+write64", "eventquery(done)"};
    for (int m = 0; m < 8; m++) {
        double en[20], tot[20];
        for (int rep = 0; rep < 20; rep++) {
            CK(cuStreamSynchronize(s));
            double t0 = now();
            int d2h = m >= 3 && m <= 5;
            if (m == 2 || m == 5) {
                CUdeviceptr ds[N], ss[N];
                size_t sz[N], idx = 0;
                for (int i = 0; i < N; i++) {
                    ds[i] = d2h ? hp + i * len : dv + i * len;
                    ss[i] = d2h ? dv + i * len : hp + i * len;
                    sz[i] = len;
                }
                CUmemcpyAttributes a = {0};
                a.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
                CK(cuMemcpyBatchAsync(ds, ss, sz, N, &a, &idx, 1, s));
                CK(cuEventRecord(ev[0], s));
            } else if (m == 7) {
                for (int i = 0; i < N; i++)
                    cuEventQuery(ev[i]);
            } else {
                for (int i = 0; i < N; i++) {
                    if (d2h)
                        CK(cuMemcpyDtoHAsync((char *)h + i * len, dv + i * len,
                                             len, s));
                    else
                        CK(cuMemcpyHtoDAsync(dv + i * len, (char *)h + i * len,
                                             len, s));
                    if (m == 1 || m == 4)
                        CK(cuEventRecord(ev[i], s));
                    if (m == 6)
                        CK(cuStreamWriteValue64(s, flag, i, 0));
                }
            }
            double t1 = now();
            CK(cuStreamSynchronize(s));
            double t2 = now();
            en[rep] = (t1 - t0) / N;
            tot[rep] = t2 - t0;
        }
        qsort(en, 20, sizeof(double), cmp);
        qsort(tot, 20, sizeof(double), cmp);
        printf("%-18s len %zu: enqueue %.2f us/copy [%.2f-%.2f], 64 done "
               "after %.1f us [%.1f-%.1f] (%.1f GB/s)\n",
               names[m], len, en[10], en[0], en[19], tot[10], tot[0], tot[19],
               len * N / tot[10] / 1e3);
    }
    return 0;
}
