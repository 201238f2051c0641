/*
 * ipcpipe: stream-ordered transfers of CUDA device memory.
 *
 * Each call is ordered like a CUDA operation enqueued in `stream`: the
 * transfer's work on this side starts once the work enqueued in `stream`
 * before the call has finished, and work enqueued in `stream` after the call
 * starts once this side of the transfer has finished.  The call returns
 * without waiting: internal streams are joined to `stream` with stream
 * memory operations, so `stream` waits on the GPU, never on the CPU.
 *
 * The library starts the operation once it sees `stream` reach it, so a
 * stream-ordered send is matched (per peer and tag) in the order its
 * stream gets there, not in the order of the calls.
 *
 * `stream` is a cudaStream_t or CUstream of the context of the buffer's
 * device: a stream the user created, the legacy default stream (NULL or
 * cudaStreamLegacy) or the per-thread default stream (cudaStreamPerThread).
 *
 * `req` may be NULL.  Otherwise it completes, as for ipcp_isend and the
 * others, with the transfer's status once this side is done; use it to see
 * errors.  When a transfer fails (a lost peer, a truncated message, a
 * refused path), `stream` is released all the same, so that later work in
 * it is not blocked forever; what the buffer holds is then undefined.
 *
 * The buffer must be device memory (IPCP_ERR_UNSUPPORTED otherwise): host
 * memory has no stream to be ordered in.  A stream that is capturing a CUDA
 * graph is refused the same way, with nothing enqueued: a transfer happens
 * once, and a graph would replay it.  The peer may use the ordered or
 * the plain calls; the receiver still chooses the path.
 *
 * A peer on another node (ipcp_init_mpi), or the owner of a region there
 * (puts and gets: host regions, through MPI's window), is reached through
 * MPI once the stream gets there.  Unless MPI runs at MPI_THREAD_MULTIPLE, such
 * a transfer moves on only inside ipcpipe's calls: wait for or test its request
 * before synchronizing `stream` (`req` NULL is refused then,
 * IPCP_ERR_UNSUPPORTED).  docs/launchers.md says more.
 */
#ifndef IPCPIPE_CUDA_H
#define IPCPIPE_CUDA_H

#include "ipcpipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The same type as cudaStream_t and CUstream, without their headers. */
struct CUstream_st;
typedef struct CUstream_st *ipcp_stream_t;

IPCP_API ipcp_status_t ipcp_isend_on_stream(ipcp_comm_t *comm, const void *buf,
                                            size_t len, int peer, int tag,
                                            ipcp_stream_t stream,
                                            ipcp_request_t **req);
IPCP_API ipcp_status_t ipcp_irecv_on_stream(ipcp_comm_t *comm, void *buf,
                                            size_t len, int peer, int tag,
                                            ipcp_stream_t stream,
                                            ipcp_request_t **req);
IPCP_API ipcp_status_t ipcp_iput_on_stream(ipcp_comm_t *comm, const void *src,
                                           size_t len, ipcp_rmem_t *dst,
                                           size_t offset, ipcp_stream_t stream,
                                           ipcp_request_t **req);
IPCP_API ipcp_status_t ipcp_iget_on_stream(ipcp_comm_t *comm, void *dst,
                                           size_t len, ipcp_rmem_t *src,
                                           size_t offset, ipcp_stream_t stream,
                                           ipcp_request_t **req);

#ifdef __cplusplus
}
#endif

#endif /* IPCPIPE_CUDA_H */
