/* What bench_cuda.c shares with the bench's other CUDA files
 * (bench_naive.c, bench_cuda_ceil.c); only with CUDA at build time. */
#ifndef IPCP_BENCH_CUDA_INT_H
#define IPCP_BENCH_CUDA_INT_H

#ifdef IPCP_HAVE_CUDA
#include <cuda.h>
#include <stddef.h>

#include "bench.h"

/* "<what>: CUDA_ERROR_X: description" into err when r failed: 0 or -1. */
int bench_cu_ok(CUresult r, char *err, size_t elen, const char *what);
/* The primary context of device, retained (bench_cu_release_ctx). */
int bench_cu_retain_ctx(int device, CUcontext *ctx, char *err, size_t elen);
void bench_cu_release_ctx(int device);
/* Whether the device takes 64-bit stream memory operations. */
int bench_cuda_memops64(int device);
/* The context of the device this rank is bound to; NULL: none. */
extern CUcontext bench_cu_bound_ctx;
/* bench_alloc.c: a buffer of --alloc vmm, vmm0, pool or spool on device
 * (whose context is current), and its free. */
int bench_foreign_alloc(bench_alloc_t a, int device, size_t len, bench_buf_t *b,
                        int *nomem, char *err, size_t elen);
void bench_foreign_free(bench_buf_t *b);
#endif

#endif
