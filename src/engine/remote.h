/* Peers on other nodes, reached through a transport that a library over
 * the core brings (libipcpipe_mpi: MPI).  The communicator's engine is
 * the job of this node's ranks, numbered among themselves; the public
 * calls speak in the ranks of the whole job and route each peer: one on
 * this node to the engine under its number here, one elsewhere to the
 * transport.  Transfers with a peer elsewhere progress in the calls that
 * post, wait for and test them (as MPI's do); on the progress thread only
 * where the transport allows calls from any thread and a stream-ordered
 * one waits or runs (engine/remote_order.h; each look there moves others
 * on too).  Every call into a transport, of any
 * communicator, is made under one lock of the process's
 * (ipcp__remote_lock). */
#ifndef IPCP_ENGINE_REMOTE_H
#define IPCP_ENGINE_REMOTE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/list.h"
#include "ipcpipe.h"

/* The version of the messages ranks on different nodes exchange
 * (engine/remote_xfer.h): every rank of a job must have the same. */
#define IPCP_REMOTE_WIRE 3

/* What a transport does.  It carries messages on two channels that never
 * meet (0: the user's tags; 1: the pieces of long messages, tagged by
 * their message's number), each in MPI's order: two messages of one
 * channel, peer and tag are received in the order they were sent.  A
 * posted operation is *op until test says it ended (and frees it) or
 * cancel frees it.  Statuses come back as ipcpipe's, with the reason as
 * last error. */
/* The most bytes one one-sided operation of a transport moves. */
#define IPCP_REMOTE_RMA_MAX ((size_t)1 << 30)

typedef struct ipcp__remote_ops {
    const char *name; /* for messages: "MPI" */
    /* Tags 0..tag_max reach the peer (channel 1 uses them all). */
    int tag_max;
    /* 1: operations read and write device memory themselves (a CUDA-aware
     * MPI); 0: host memory only, device memory is staged. */
    int device_mem;
    /* 1: calls may come from any thread at any time (MPI_THREAD_MULTIPLE):
     * a communicator's progress thread then moves its stream-ordered
     * transfers on (engine/remote_order.h); 0: only the calls that wait
     * for and test transfers do. */
    int threads;
    /* A message of n bytes at buf, contiguous (a receive takes up to n). */
    ipcp_status_t (*isend)(void *ctx, int chan, const void *buf, size_t n,
                           int peer, int tag, void **op);
    ipcp_status_t (*irecv)(void *ctx, int chan, void *buf, size_t n, int peer,
                           int tag, void **op);
    /* One-sided access to host memory of the job's ranks (NULL where the
     * transport has none).  attach makes [buf, buf+len) reachable by the
     * others and gives the address they name it by (addr); detach ends
     * that.  iput and iget start a copy of len bytes (at most
     * IPCP_REMOTE_RMA_MAX) to or from address addr of rank peer's attached
     * memory, ended by test as the others (a put once its bytes are in
     * place there); cancel waits for them. */
    ipcp_status_t (*attach)(void *ctx, void *buf, size_t len, uint64_t *addr);
    void (*detach)(void *ctx, void *buf);
    ipcp_status_t (*iput)(void *ctx, const void *src, size_t len, int peer,
                          uint64_t addr, void **op);
    ipcp_status_t (*iget)(void *ctx, void *dst, size_t len, int peer,
                          uint64_t addr, void **op);
    /* Where there is one (else NULL): a message of channel chan from
     * peer under tag, asked for before a receive is posted for it.  1
     * when one came (*n its bytes; *msg it, which the next imrecv of it
     * takes: every message asked for is taken, but one longer than any
     * ipcpipe sends, which stays the transport's), 0 while none has, -1
     * on a failure (the reason as last error).  Moves the transport on. */
    int (*improbe)(void *ctx, int chan, int peer, int tag, size_t *n,
                   void **msg);
    /* Takes the message msg (of n bytes) into buf: an operation as the
     * others, whose *op it becomes. */
    ipcp_status_t (*imrecv)(void *ctx, void *msg, void *buf, size_t n,
                            void **op);
    /* A barrier of every rank of the job, ended as the others are. */
    ipcp_status_t (*ibarrier)(void *ctx, void **op);
    /* 1 when op ended (*st, *nbytes: bytes received; the reason of a
     * failure as last error), 0 while it runs. */
    int (*test)(void *ctx, void *op, ipcp_status_t *st, size_t *nbytes);
    /* Ends op at finalize: 1 when its buffer is not touched after this
     * returns; 0 when it was left to the transport (a send the peer never
     * takes), whose buffer must then stay. */
    int (*cancel)(void *ctx, void *op);
    void (*close)(void *ctx);
} ipcp__remote_ops_t;

typedef struct ipcp__remote {
    const ipcp__remote_ops_t *ops;
    void *ctx;
    int rank, size; /* this rank and the job's size */
    int *local;     /* a rank of the job -> its number here, -1 elsewhere */
    int *global;    /* a number here -> its rank in the job */
    char job[64];   /* the job's name (the node's job has a suffix) */
    ipcp__list_t posted; /* requests whose operation runs (under the lock) */
    size_t chunk;        /* IPCPIPE_REMOTE_CHUNK, in whole 4 KiB */
    size_t inline_max;   /* IPCPIPE_REMOTE_INLINE: the longest host message
                            sent as its bytes alone, up to IPCP_RX_INLINE */
    uint32_t *seq;       /* a rank -> number of the next long message sent it */
    ipcp__list_t *held;  /* a rank -> sends whose headers wait, in call order */
    ipcp__list_t xfers;  /* every transfer of this job not yet freed */
    /* Device memory's staging (engine/remote_xfer.c): free slot sets and
     * copy queues, kept until the communicator ends. */
    ipcp__list_t slots, queues;
    ipcp__list_t rooms; /* free rooms for the bytes of short messages */
    /* Receives not yet posted to the transport, in call order: those
     * that ask first how long their message is (improbe), and any of the
     * same peer and tag behind one (MPI's order). */
    ipcp__list_t asking;
    uint64_t looked;    /* the look that last went through asking */
    int *keys, nkeys;   /* a look's peers and tags with no message yet */
    ipcp__list_t spare; /* ended transfers kept for the next ones */
    int nspare;
} ipcp__remote_t;

/* Rank `here` of this node's job as the whole job numbers it (messages
 * name ranks so; the engine's own numbers where the job is this node's).
 * Defined in engine/peer.c. */
struct ipcp_comm;
int ipcp__job_rank(const struct ipcp_comm *comm, int here);

/* Held around every call into a transport and every change of a posted
 * list. */
extern pthread_mutex_t ipcp__remote_lock;

/* Makes comm (a job of this node's ranks, just made by ipcp_init) the
 * part of a job named `job`, of `size` ranks, in which it is `rank`;
 * local[r] is rank r's number in comm, or -1 for a rank on another node,
 * reached through ops and ctx (ops->close(ctx) when comm is finalized,
 * also when this fails).  For libipcpipe_mpi. */
IPCP_API ipcp_status_t ipcp__comm_remote(ipcp_comm_t *comm, const char *job,
                                         int rank, int size, const int *local,
                                         const ipcp__remote_ops_t *ops,
                                         void *ctx);

#endif
