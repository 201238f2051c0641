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
 * Collective over comm: every rank must call it.
 *
 * The ranks may span nodes: those of one node (MPI_COMM_TYPE_SHARED, and
 * among them, where any sets IPCPIPE_NODE, those with equal values, so
 * that one machine can stand for several) meet as under ipcp_init and move data
 * by every path of the node; a rank on another node is reached through
 * MPI, on two duplicates of comm: two-sided transfers of host or device
 * memory of any length (path IPCP_PATH_REMOTE; device memory staged
 * through pinned host slots unless MPI says it is CUDA-aware), the
 * stream-ordered sends, receives, puts and gets (moved on by ipcpipe's
 * progress thread only under MPI_THREAD_MULTIPLE; below it wait for or
 * test their requests before the stream), puts and gets into host
 * regions of ranks elsewhere through an MPI window made here (the
 * caller's buffer may be device memory; IPCPIPE_REMOTE_RMA=off makes
 * none, and such calls then return IPCP_ERR_UNSUPPORTED, saying so), and
 * ipcp_barrier over the whole job.
 * Such transfers progress in the calls that wait for or test them (any
 * transfer's of the job), as MPI's do; ipcpipe calls MPI from those
 * threads, one call at a time in the process, so threads that call MPI
 * themselves meanwhile need MPI_THREAD_MULTIPLE (below
 * MPI_THREAD_SERIALIZED, wait on the thread that calls MPI).  A send to
 * another node ends when MPI has taken its last piece; a receive too
 * small for it fails with IPCP_ERR_TRUNCATED and writes nothing (the send
 * still succeeds).  IPCPIPE_REMOTE_CHUNK sets the piece size (staged
 * device memory's largest piece).
 * MPI must be initialized, and where the job spans nodes stay so until
 * ipcp_finalize; on one node ipcpipe never calls MPI after this returns. */
IPCP_API ipcp_status_t ipcp_init_mpi(MPI_Comm comm,
                                     const ipcp_comm_params_t *params,
                                     ipcp_comm_t **out);

#ifdef __cplusplus
}
#endif

#endif
