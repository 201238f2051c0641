/* What the MPI tests share: failing the whole job with the reason, the
 * status check, and fresh bytes that every process computes alike. */
#ifndef IPCP_TESTS_MPITEST_H
#define IPCP_TESTS_MPITEST_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ipcpipe_mpi.h"

static int t_rank = -1;

static inline void fail(const char *fmt, ...)
{
    va_list ap;
    int rank = t_rank, inited = 0;
    /* A file of the test that did not set t_rank: MPI's. */
    if (rank < 0 && MPI_Initialized(&inited) == MPI_SUCCESS && inited)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    va_start(ap, fmt);
    fprintf(stderr, "FAIL [rank %d] ", rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#define OK(call)                                                               \
    do {                                                                       \
        ipcp_status_t st_ = (call);                                            \
        if (st_ != IPCP_OK)                                                    \
            fail("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call,              \
                 ipcp_strerror(st_), ipcp_last_error());                       \
    } while (0)

/* Bytes of a stream of seed (xorshift), the same in every process. */
static inline void fill(unsigned char *b, size_t n, uint64_t seed)
{
    uint64_t x = seed | 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (unsigned char)(x >> 32);
    }
}

#endif
