/* libipcpipe_mpi's transport to ranks on other nodes (engine/remote.h). */
#ifndef IPCP_MPI_REMOTE_MPI_H
#define IPCP_MPI_REMOTE_MPI_H

#include <mpi.h>

#include "engine/remote.h"

/* 1 where MPI says it reads and writes CUDA memory itself
 * (MPIX_Query_cuda_support), else 0. */
int ipcp__mpi_device_mem(void);

/* The transport over a duplicate of comm (whose ranks are the job's);
 * *ops and *ctx for ipcp__comm_remote, which closes it.  Collective. */
ipcp_status_t ipcp__mpi_remote(MPI_Comm comm, const ipcp__remote_ops_t **ops,
                               void **ctx);
/* Every rank's ipcp_init_mpi succeeded with ctx: its window is freed by
 * all at finalize (else by none, so that none waits for another). */
void ipcp__mpi_joined(void *ctx);

#endif
