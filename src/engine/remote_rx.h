/* What the files of transfers with other nodes share (remote_xfer.c:
 * the header and the machine; remote_piece.c: the pieces; remote_stage.c:
 * device memory's staging).  engine/remote_xfer.h says how a transfer
 * goes.  Everything here runs under ipcp__remote_lock. */
#ifndef IPCP_ENGINE_REMOTE_RX_H
#define IPCP_ENGINE_REMOTE_RX_H

#include <stdatomic.h>
#include <stdint.h>

#include "engine/remote_xfer.h"

/* "ipr3" for version 3: the header below. */
#define RX_MAGIC (0x69707230u + IPCP_REMOTE_WIRE)
/* The largest piece a receiver accepts (the setting's bound). */
#define RX_CHUNK_MAX ((uint64_t)64 << 20)
/* Pieces in flight: host memory's in place; device memory's, one slot
 * each (a deeper ring gained nothing where the transport is slower than
 * the copies, and it costs pinned memory per transfer). */
enum { RX_WIN_HOST = 8, RX_SLOTS = 4 };
/* A staged message's pieces (ipcp__rx_stage_piece): about this many of
 * a power of two from RX_STAGE_PIECE_MIN up to IPCPIPE_REMOTE_CHUNK.  A
 * build may set RX_STAGE_PIECES (1: every piece the setting's, as
 * before) to measure another. */
#ifndef RX_STAGE_PIECES
#define RX_STAGE_PIECES 16
#endif
#define RX_STAGE_PIECE_MIN ((uint64_t)1 << 20)
/* Transfers other than the one waited for that a look moves on: all of a
 * usual window (a receiver's pieces are asked for as soon as their
 * header is seen: 64 KiB x64 between two nodes on one H200 ran at 1.10x
 * MPI so, 0.80x with two others a look), at most this many. */
enum { RX_PROGRESS_OTHERS = 64 };
/* A short message of device memory goes through a slot of this size, its
 * bytes at RX_SHORT_AT (a header, where one goes with them, just before
 * them): one contiguous message, which MPI moves as any other (a message
 * of two parts leaves Open MPI's single-copy path for a copy by each
 * side).  A receive's room starts there too. */
#define RX_SHORT_AT   4096
#define RX_SHORT_SLOT (IPCP_RX_INLINE + RX_SHORT_AT)

typedef struct rx_hdr {
    uint32_t magic;
    uint32_t seq;   /* the pieces' tag on channel 1 */
    uint64_t len;   /* bytes of the message */
    uint32_t chunk; /* bytes a piece (the last may be shorter); 0: the
                       bytes follow the header in its message */
    uint32_t flags; /* 0 */
} rx_hdr_t;
_Static_assert(sizeof(rx_hdr_t) == IPCP_RX_HEAD - IPCP_RX_COPY,
               "IPCP_RX_COPY is what a header leaves of IPCP_RX_HEAD");

/* Ended transfers kept for the next ones (four windows of 64): a new
 * one from malloc is written cold.  Each has room for the largest header
 * and bytes it carries. */
enum { RX_SPARE = 256 };
#define RX_HB_MAX (sizeof(rx_hdr_t) + IPCP_RX_COPY)
_Static_assert(RX_HB_MAX >= IPCP_RX_HEAD,
               "a receive in place keeps the buffer's first IPCP_RX_HEAD "
               "bytes in hb");

/* Pinned host memory of one transfer at a time: up to RX_SLOTS slots
 * (one for a short message or a message of one piece), kept per job as
 * the most transfers ever at once needed them. */
typedef struct rx_slots {
    ipcp__list_t link; /* in rm->slots while free */
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;
    int device;
    size_t size; /* of a slot */
    int cnt;     /* slots */
    unsigned char *mem;
    void *reg;
} rx_slots_t;

/* A device's copy queues: [0] device to host, [1] host to device, so
 * that the two directions run on both copy engines. */
typedef struct rx_queues {
    ipcp__list_t link; /* in rm->queues */
    const ipcp__backend_ops_t *ops;
    ipcp__backend_t *be;
    int device;
    ipcp__queue_t *q[2];
} rx_queues_t;

/* Room for the longest message on channel 0 (IPCP_RX_INLINE), for a host
 * receive smaller than that (kept per job: memory malloc gives back and
 * takes again faults anew, ~10 us a page on a VM). */
typedef struct rx_room {
    ipcp__list_t link; /* in rm->rooms while free */
    unsigned char mem[];
} rx_room_t;

enum { W_IDLE, W_COPY, W_MOVE };

typedef struct rx_win {
    int state;
    uint64_t k;          /* its piece */
    void *op;            /* the piece's transport operation (W_MOVE) */
    unsigned char *slot; /* its staging slot, NULL: in place */
    ipcp__track_t tr;    /* its copy (W_COPY) */
    atomic_int copied;   /* set by the copy's notify, its last act */
} rx_win_t;

enum { X_HEAD, X_PIECES, X_END };

struct ipcp__rx {
    ipcp__list_t link;  /* in rx_running until it ends */
    ipcp__list_t rlink; /* in rm->xfers until freed */
    ipcp__remote_t *rm;
    int send, peer, tag;
    unsigned char *buf;
    size_t cap; /* send: its length; receive: the buffer's */
    int dev;    /* buf is device memory */
    ipcp__rx_dev_t d;
    int staged; /* device memory's pieces go through slots */
    int phase;
    void *hop;              /* the header's operation while it runs */
    void *sop;              /* the sender's stop while it runs */
    uint64_t len, chunk, n; /* the message: bytes, a piece, pieces */
    uint32_t seq;
    uint64_t next;  /* the next piece to start */
    uint64_t given; /* sender: pieces handed to the transport, in order */
    uint64_t ndone;
    int nwin;
    int drain;           /* receiver: take the pieces, write nothing */
    int stopped;         /* no more pieces start (a failure, or the sender's) */
    int leak;            /* finalize left an operation to the transport: what it
                            may still read or write is never freed */
    int dirty;           /* a copy may still use the slots: never given back */
    unsigned char *room; /* receiver: where its message on channel 0 lands
                            (IPCP_RX_INLINE of room; the buffer in place) */
    unsigned char *hp;   /* sender: where its message on channel 0 starts:
                            hb, the buffer or a slot */
    ipcp__list_t olink;  /* sender: in rm->held[peer] while held */
    int held;            /* sender: its header waits for those before it */
    int copying;         /* sender: a short message's bytes go to a slot */
    int rma;             /* a put (send 1) or get: pieces to or from raddr */
    uint64_t raddr;      /* rma: the peer's address of the range */
    size_t phn;          /* sender: bytes of its message on channel 0 (at hp) */
    rx_room_t *rb;       /* the job's room the message took */
    rx_win_t *win;       /* nwin entries, for pieces or a copy */
    rx_slots_t *slots;
    rx_queues_t *qs;
    unsigned char *scratch; /* where a host receiver drains */
    ipcp_status_t st;
    size_t nbytes;
    char err[IPCP_ERRMSG_MAX];
    size_t hbn;         /* bytes of hb */
    unsigned char hb[]; /* sender: the header, and bytes it carries;
                           receiver in place: the buffer's first
                           IPCP_RX_HEAD bytes as they were */
};

static inline size_t rx_piece_len(const ipcp__rx_t *x, uint64_t k)
{
    uint64_t off = k * x->chunk;
    return (size_t)(x->len - off < x->chunk ? x->len - off : x->chunk);
}

/* The first failure is the transfer's (its message: the last error). */
void ipcp__rx_fail(ipcp__rx_t *x, ipcp_status_t st);

/* ---- Pieces (remote_piece.c) ------------------------------------------ */

ipcp_status_t ipcp__rx_win_alloc(ipcp__rx_t *x, int n);
/* A message of n bytes at buf to or from the peer. */
ipcp_status_t ipcp__rx_post(ipcp__rx_t *x, int chan, void *buf, size_t n,
                            int tag, void **op);
/* The receiver takes the rest of the message and writes none of it; 0
 * when there is nowhere to put it. */
int ipcp__rx_drain(ipcp__rx_t *x);
/* The sender stops: the receiver learns it from a piece of no bytes. */
void ipcp__rx_send_stop(ipcp__rx_t *x);
/* Starts piece k in entry w. */
void ipcp__rx_start_piece(ipcp__rx_t *x, rx_win_t *w, uint64_t k);
/* Moves entry w on; 1 when it changed. */
int ipcp__rx_step_win(ipcp__rx_t *x, rx_win_t *w);

/* ---- Staging (remote_stage.c) ----------------------------------------- */

/* Enqueues a copy of a piece (dir 0: device to host, 1: host to device)
 * and its notify; w->copied is set once it ended. */
ipcp_status_t ipcp__rx_copy(ipcp__rx_t *x, rx_win_t *w, int dir, void *dst,
                            const void *src, size_t len);
/* The end of w's copy: w idle, a failure as the status. */
ipcp_status_t ipcp__rx_copy_end(ipcp__rx_t *x, rx_win_t *w);
/* x's slots back to the job's, unless finalize left them to the
 * transport. */
void ipcp__rx_slots_give(ipcp__rx_t *x);
/* The queues and slots a staged transfer moves its bytes through: for
 * its pieces (short_msg 0), or one slot for a short message. */
ipcp_status_t ipcp__rx_stage(ipcp__rx_t *x, int short_msg);
/* The piece of a staged message of len bytes (RX_STAGE_PIECES). */
uint64_t ipcp__rx_stage_piece(const ipcp__remote_t *rm, uint64_t len);

#endif
