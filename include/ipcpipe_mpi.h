/* ipcpipe joined from an MPI communicator (libipcpipe_mpi, CMake target
 * ipcpipe::mpi, pkg-config ipcpipe-mpi).  The core library has no MPI
 * dependency; this one links both. */
#ifndef IPCPIPE_MPI_H
#define IPCPIPE_MPI_H

#include <mpi.h>

#include "ipcpipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Joins the ranks of comm as an ipcpipe job: rank and size are the
 * communicator's, and the job's name comes from its rank 0 through MPI
 * (any rank, size or job_id in params is ignored; the timeout and path
 * are used), so two communicators, or two calls on one, make two jobs.
 * Collective over comm: every rank must call it.  The ranks must share
 * one node: where comm spans several, every rank returns
 * IPCP_ERR_UNSUPPORTED at once, saying so (peers on other nodes are not
 * reached yet).  MPI must be initialized; ipcpipe never calls MPI after
 * this returns, so the communicator may be freed. */
IPCP_API ipcp_status_t ipcp_init_mpi(MPI_Comm comm,
                                     const ipcp_comm_params_t *params,
                                     ipcp_comm_t **out);

#ifdef __cplusplus
}
#endif

#endif
