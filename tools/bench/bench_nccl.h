/* NCCL as the reference of the benches (bench_nccl.c): ipcpipe-bench's
 * send/recv rows between two ranks, ipcpipe-bench-ranks' patterns among
 * N.  Nothing links against NCCL: it is opened with dlopen on first use,
 * and without it (or without CUDA or nccl.h at build time) every call
 * says why. */
#ifndef IPCP_TOOLS_BENCH_NCCL_H
#define IPCP_TOOLS_BENCH_NCCL_H

#include <stddef.h>

#define BENCH_NCCL_ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */

/* NCCL, opened with dlopen (libnccl.so.2, else libnccl.so) on first use.
 * Returns 0, or -1 with why (not found, too old, built without nccl.h). */
int bench_nccl_load(char *err, size_t elen);
/* "libnccl.so.2 2.28.9" once loaded, else why not. */
void bench_nccl_describe(char *buf, size_t len);
int bench_nccl_unique_id(unsigned char id[BENCH_NCCL_ID_BYTES], char *err,
                         size_t elen);
typedef struct bench_nccl bench_nccl_t;
/* A communicator of nranks ranks on the calling thread's current device,
 * and a stream of it; collective: every rank calls it with rank 0's id.
 * Gives up after timeout_s (another rank may have failed).  yield: its
 * waits leave the CPU between polls (a rank bound to one CPU shares it
 * with NCCL's proxy thread).  NULL with a message. */
bench_nccl_t *bench_nccl_init(const unsigned char id[BENCH_NCCL_ID_BYTES],
                              int rank, int nranks, int yield, double timeout_s,
                              char *err, size_t elen);
/* Enqueues n transfers of len bytes on the stream: sends of buf to peer,
 * or receives from peer into buf + (k % slots) * len; grouped: in one
 * ncclGroupStart/ncclGroupEnd, else each call on its own. */
int bench_nccl_post(bench_nccl_t *nc, int send, void *buf, size_t len, int n,
                    int slots, int grouped, int peer, char *err, size_t elen);
/* One send or receive of a group (bench_nccl_post_group). */
typedef struct bench_nccl_op {
    int send, peer;
    void *buf;
    size_t len;
} bench_nccl_op_t;
/* Enqueues n sends and receives, to and from any peers, in one
 * ncclGroupStart/ncclGroupEnd (NCCL's way for all-to-all). */
int bench_nccl_post_group(bench_nccl_t *nc, const bench_nccl_op_t *ops, int n,
                          char *err, size_t elen);
/* Waits for the stream; on an error or after timeout_s aborts the
 * communicator (it cannot be used again).  0 or -1 with a message. */
int bench_nccl_wait(bench_nccl_t *nc, double timeout_s, char *err, size_t elen);
int bench_nccl_usable(const bench_nccl_t *nc);
void bench_nccl_destroy(bench_nccl_t *nc);

#endif
