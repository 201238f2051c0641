/* What the parts of test_remote_mpi share (test_remote_mpi.c: the
 * cases of every pair and the order they run in; remote_cases.c: device
 * memory and one-sided cases; remote_util.c: buffers of either kind). */
#ifndef IPCP_TESTS_MPI_REMOTE_TEST_H
#define IPCP_TESTS_MPI_REMOTE_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "ipcpipe_cuda.h"
#include "mpitest.h"

#ifdef T_CUDA
#include <cuda.h>
#endif

extern int nodes;       /* rank r counts as on node r % nodes */
extern int use_dev;     /* "cuda": buffers of device memory too */
extern int mpi_threads; /* MPI_THREAD_MULTIPLE ("mt") */

#ifdef T_CUDA
/* The driver calls the test makes, loaded as the library loads them. */
struct t_cu {
    CUresult (*init)(unsigned);
    CUresult (*count)(int *);
    CUresult (*get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*sync)(void);
    CUresult (*screate)(CUstream *, unsigned);
    CUresult (*ssync)(CUstream);
    CUresult (*sdestroy)(CUstream);
    CUresult (*dtod)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*memset)(CUdeviceptr, unsigned char, size_t);
};
extern struct t_cu cu;

#define CU(call)                                                               \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != CUDA_SUCCESS)                                                \
            fail("%s:%d: %s: CUresult %d", __FILE__, __LINE__, #call,          \
                 (int)r_);                                                     \
    } while (0)

/* 1 when a GPU is here, its first device's context current. */
int cu_open(void);
#endif

/* A buffer of n bytes, of device memory where dev is set; host bytes
 * into it and back. */
unsigned char *buf_new(size_t n, int dev);
void buf_free(unsigned char *b, int dev);
void buf_put(unsigned char *b, const unsigned char *h, size_t n, int dev);
void buf_get(unsigned char *h, const unsigned char *b, size_t n, int dev);
void *xmalloc(size_t n);

/* The seed of the data rank `from` sends rank `to` in round k. */
static inline uint64_t seed_of(uint64_t base, int from, int to, int k)
{
    return base ^ ((uint64_t)from << 40) ^ ((uint64_t)to << 20) ^
           (uint64_t)k * 0x9e3779b97f4a7c15ull;
}

/* remote_cases.c */
void truncate_dev(ipcp_comm_t *c, uint64_t base);
void order_dev(ipcp_comm_t *c, uint64_t base);
void order_asked(ipcp_comm_t *c, uint64_t base);
#ifdef T_CUDA
void ordered_dev(ipcp_comm_t *c, uint64_t base);
#endif
void onesided(ipcp_comm_t *c, uint64_t base);
void onesided_dereg(ipcp_comm_t *c, uint64_t base);
void no_onesided(ipcp_comm_t *c, MPI_Comm world_of);

#endif
