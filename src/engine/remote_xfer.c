/* Transfers with ranks on other nodes: the header, the pieces and the
 * staging of device memory (engine/remote_xfer.h says how). */
#include <sched.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "engine/remote_xfer.h"

#define RX_MAGIC 0x69707232u /* "ipr2": the header below, version 2 */
/* The largest piece a receiver accepts (the setting's bound). */
#define RX_CHUNK_MAX ((uint64_t)64 << 20)
/* Pieces in flight: host memory's in place; device memory's, one slot
 * each (a deeper ring gained nothing where the transport is slower than
 * the copies, and it costs pinned memory per transfer). */
enum { RX_WIN_HOST = 8, RX_SLOTS = 4 };
/* Transfers other than the one waited for that a look moves on: all of a
 * usual window (a receiver's pieces are asked for as soon as their
 * header is seen: 64 KiB x64 between two nodes on one H200 ran at 1.10x
 * MPI so, 0.80x with two others a look), at most this many. */
enum { RX_PROGRESS_OTHERS = 64 };
/* A short message of device memory goes through a slot of this size, its
 * bytes at RX_SHORT_AT and its header just before them: one contiguous
 * message, which MPI moves as any other (a message of two parts leaves
 * Open MPI's single-copy path for a copy by each side). */
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

/* Ended transfers kept for the next ones (four windows of 64): a new
 * one from malloc is written cold.  Each has room for the largest header
 * and bytes it carries. */
enum { RX_SPARE = 256 };
#define RX_HB_MAX (sizeof(rx_hdr_t) + IPCP_RX_COPY)

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

/* Room for a header and the most bytes it carries, for a host receive
 * smaller than that (kept per job: memory malloc gives back and takes
 * again faults anew, ~10 us a page on a VM). */
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
    unsigned char *room; /* receiver: where a short message's bytes land
                            (IPCP_RX_INLINE of room) */
    unsigned char *hp;   /* where the header is: hb, in rb or in a slot */
    ipcp__list_t olink;  /* sender: in rm->held[peer] while held */
    int held;            /* sender: its header waits for those before it */
    int copying;         /* sender: a short message's bytes go to a slot */
    int rma;             /* a put (send 1) or get: pieces to or from raddr */
    uint64_t raddr;      /* rma: the peer's address of the range */
    void *pbody;         /* sender: the header's message, body and lengths */
    size_t phn, pbn;
    rx_room_t *rb; /* the job's room the header and bytes took */
    rx_win_t *win; /* nwin entries, for pieces or a copy */
    rx_slots_t *slots;
    rx_queues_t *qs;
    unsigned char *scratch; /* where a host receiver drains */
    ipcp_status_t st;
    size_t nbytes;
    char err[IPCP_ERRMSG_MAX];
    size_t hbn;         /* bytes of hb */
    unsigned char hb[]; /* the header, and bytes it carries */
};

static ipcp__list_t rx_running = {&rx_running, &rx_running};
static atomic_int rx_nrunning; /* its length, read without the lock */

/* Its length changes under ipcp__remote_lock only: a plain store (perf
 * put a locked add here at 2% of a sender's time, 64 KiB x64 on an
 * H200). */
static void rx_count(int d)
{
    atomic_store_explicit(
        &rx_nrunning,
        atomic_load_explicit(&rx_nrunning, memory_order_relaxed) + d,
        memory_order_relaxed);
}

static void rx_run(ipcp__rx_t *x)
{
    ipcp__list_push_back(&rx_running, &x->link);
    rx_count(1);
}

static void rx_unrun(ipcp__rx_t *x)
{
    if (x->link.next == &x->link)
        return;
    ipcp__list_del(&x->link);
    rx_count(-1);
}

int ipcp__rx_busy(void)
{
    return atomic_load_explicit(&rx_nrunning, memory_order_relaxed) != 0;
}

/* The first failure is the transfer's (its message: the last error). */
static void rx_fail(ipcp__rx_t *x, ipcp_status_t st)
{
    if (x->st != IPCP_OK)
        return;
    x->st = st;
    snprintf(x->err, sizeof(x->err), "%s", ipcp_last_error());
}

static size_t rx_piece_len(const ipcp__rx_t *x, uint64_t k)
{
    uint64_t off = k * x->chunk;
    return (size_t)(x->len - off < x->chunk ? x->len - off : x->chunk);
}

/* ---- Staging --------------------------------------------------------- */

static ipcp_status_t rx_queues(ipcp__remote_t *rm, const ipcp__rx_dev_t *d,
                               rx_queues_t **out)
{
    ipcp__list_t *e;
    rx_queues_t *qs;
    ipcp_status_t st;
    for (e = rm->queues.next; e != &rm->queues; e = e->next) {
        qs = ipcp__list_entry(e, rx_queues_t, link);
        if (qs->be == d->be && qs->device == d->device) {
            *out = qs;
            return IPCP_OK;
        }
    }
    if (!d->ops->queue_user || !d->ops->notify)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "%s memory cannot reach a rank on another node: "
                          "its backend has no queue for the caller's threads",
                          d->ops->name);
    if (!(qs = calloc(1, sizeof(*qs))))
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for the copy queues of device %d",
                          d->device);
    qs->ops = d->ops;
    qs->be = d->be;
    qs->device = d->device;
    for (int i = 0; i < 2; i++)
        if ((st = d->ops->queue_user(d->be, d->device, &qs->q[i])) != IPCP_OK) {
            if (i)
                d->ops->queue_destroy(qs->q[0]);
            free(qs);
            return st;
        }
    ipcp__list_push_back(&rm->queues, &qs->link);
    *out = qs;
    return IPCP_OK;
}

/* A free set of cnt slots of `size` bytes for the device, else a new
 * one. */
static ipcp_status_t rx_slots_take(ipcp__remote_t *rm, const ipcp__rx_dev_t *d,
                                   size_t size, int cnt, rx_slots_t **out)
{
    ipcp__list_t *e;
    rx_slots_t *s;
    ipcp_status_t st;
    for (e = rm->slots.next; e != &rm->slots; e = e->next) {
        s = ipcp__list_entry(e, rx_slots_t, link);
        if (s->be == d->be && s->device == d->device && s->size == size &&
            s->cnt == cnt) {
            ipcp__list_del(&s->link);
            *out = s;
            return IPCP_OK;
        }
    }
    /* size is a multiple of 4096 (the setting's bound and the header's
     * check), as aligned_alloc wants. */
    if (!(s = calloc(1, sizeof(*s))) ||
        !(s->mem = aligned_alloc(4096, size * (size_t)cnt))) {
        free(s);
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for %d staging slots of %zu bytes", cnt,
                          size);
    }
    s->ops = d->ops;
    s->be = d->be;
    s->device = d->device;
    s->size = size;
    s->cnt = cnt;
    if (d->ops->shm_register &&
        (st = d->ops->shm_register(d->be, s->mem, size * (size_t)cnt, d->device,
                                   &s->reg)) != IPCP_OK) {
        free(s->mem);
        free(s);
        return st;
    }
    ipcp__list_init(&s->link);
    IPCP_DEBUG(IPCP_SUB_API,
               "%d staging slots of %zu bytes for device %d (ranks on other "
               "nodes)",
               cnt, size, d->device);
    *out = s;
    return IPCP_OK;
}

static void rx_slots_destroy(rx_slots_t *s)
{
    if (s->reg)
        s->ops->shm_unregister(s->be, s->reg);
    free(s->mem);
    free(s);
}

void ipcp__rx_stage_free(ipcp__remote_t *rm)
{
    ipcp__list_t *e;
    while ((e = ipcp__list_pop_front(&rm->rooms)))
        free(ipcp__list_entry(e, rx_room_t, link));
    while ((e = ipcp__list_pop_front(&rm->spare)))
        free(ipcp__list_entry(e, ipcp__rx_t, link));
    rm->nspare = 0;
    while ((e = ipcp__list_pop_front(&rm->slots)))
        rx_slots_destroy(ipcp__list_entry(e, rx_slots_t, link));
    while ((e = ipcp__list_pop_front(&rm->queues))) {
        rx_queues_t *qs = ipcp__list_entry(e, rx_queues_t, link);
        qs->ops->queue_destroy(qs->q[0]);
        qs->ops->queue_destroy(qs->q[1]);
        free(qs);
    }
}

static void rx_copied_cb(ipcp__track_t *t)
{
    atomic_store_explicit(&((rx_win_t *)t->arg)->copied, 1,
                          memory_order_release);
}

/* Enqueues a copy of a piece and its notify on queue dir. */
static ipcp_status_t rx_copy(ipcp__rx_t *x, rx_win_t *w, int dir, void *dst,
                             const void *src, size_t len)
{
    ipcp__queue_t *q = x->qs->q[dir];
    const ipcp__backend_ops_t *ops = x->qs->ops;
    atomic_store_explicit(&w->copied, 0, memory_order_relaxed);
    ipcp__track_init(&w->tr, 1, rx_copied_cb, w);
    ipcp_status_t st = ops->copy(q, dst, src, len, &w->tr);
    if (st == IPCP_OK)
        st = ops->notify(q, &w->tr);
    if (st != IPCP_OK) {
        /* What was enqueued may still run (waited for by the queue's next
         * notify or its destroy): the slots stay out of the job's. */
        ipcp__track_destroy(&w->tr);
        x->dirty = 1;
        return st;
    }
    w->state = W_COPY;
    return IPCP_OK;
}

/* The end of w's copy (copied): its track destroyed, w idle; a failure
 * as the status, with its reason. */
static ipcp_status_t rx_copy_end(ipcp__rx_t *x, rx_win_t *w)
{
    ipcp_status_t st = IPCP_OK;
    if (!ipcp__track_ok(&w->tr)) {
        char msg[IPCP_ERRMSG_MAX];
        ipcp__track_errmsg(&w->tr, msg, sizeof(msg));
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API,
                        (ipcp_status_t)atomic_load(&w->tr.status),
                        "a copy of a transfer with rank %d (on another "
                        "node): %s",
                        x->peer, msg);
    }
    ipcp__track_destroy(&w->tr);
    w->state = W_IDLE;
    return st;
}

/* ---- Pieces ---------------------------------------------------------- */

static ipcp_status_t rx_win_alloc(ipcp__rx_t *x, int n)
{
    if (!(x->win = calloc((size_t)n, sizeof(*x->win))))
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for a transfer's %d pieces in flight", n);
    x->nwin = n;
    return IPCP_OK;
}

/* A message of head then body (either may be empty). */
static ipcp_status_t rx_post(ipcp__rx_t *x, int chan, void *head, size_t hn,
                             void *body, size_t bn, int tag, void **op)
{
    ipcp__remote_t *rm = x->rm;
    return x->send ? rm->ops->isend(rm->ctx, chan, head, hn, body, bn, x->peer,
                                    tag, op)
                   : rm->ops->irecv(rm->ctx, chan, head, hn, body, bn, x->peer,
                                    tag, op);
}

/* The receiver takes the rest of the message and writes none of it: into
 * its slots, else into scratch (a region per piece in flight: MPI takes
 * no receives into overlapping memory).  0 when there is nowhere to put
 * it (no more pieces are asked for then). */
static int rx_drain(ipcp__rx_t *x)
{
    x->drain = 1;
    if (x->slots || x->scratch || !x->nwin)
        return 1;
    if ((x->scratch = malloc(x->chunk * (size_t)x->nwin)))
        return 1;
    x->stopped = 1;
    return 0;
}

/* The sender stops: the receiver learns it from a piece of no bytes in
 * the place of the next one (and nothing after it). */
static void rx_send_stop(ipcp__rx_t *x)
{
    void *op = NULL;
    x->stopped = 1;
    if (x->given >= x->n)
        return;
    x->given = x->n;
    if (rx_post(x, 1, x->hb, 0, NULL, 0, (int)x->seq, &op) == IPCP_OK)
        x->sop = op; /* else the transport failed: the peer hears of it */
}

/* Starts piece k in entry w. */
static void rx_start_piece(ipcp__rx_t *x, rx_win_t *w, uint64_t k)
{
    size_t len = rx_piece_len(x, k);
    unsigned char *at = x->buf + k * x->chunk;
    ipcp_status_t st;
    w->k = k;
    w->slot =
        x->slots ? x->slots->mem + (size_t)(w - x->win) * x->slots->size : NULL;
    if (x->rma) {
        ipcp__remote_t *rm = x->rm;
        uint64_t off = k * x->chunk;
        st = x->send ? rm->ops->iput(rm->ctx, at, len, x->peer, x->raddr + off,
                                     &w->op)
                     : rm->ops->iget(rm->ctx, at, len, x->peer, x->raddr + off,
                                     &w->op);
        if (st == IPCP_OK) {
            w->state = W_MOVE;
            return;
        }
        rx_fail(x, st);
        x->stopped = 1;
        return;
    }
    if (x->send && w->slot) {
        st = rx_copy(x, w, 0, w->slot, at, len);
    } else {
        void *to = at;
        if (!x->send && x->drain)
            to = w->slot ? w->slot
                         : x->scratch + (size_t)(w - x->win) * x->chunk;
        else if (!x->send && w->slot)
            to = w->slot;
        st = rx_post(x, 1, to, len, NULL, 0, (int)x->seq, &w->op);
        if (st == IPCP_OK) {
            w->state = W_MOVE;
            if (x->send)
                x->given++;
        }
    }
    if (st != IPCP_OK) {
        rx_fail(x, st);
        if (x->send)
            rx_send_stop(x);
        else
            x->stopped = 1; /* the transport failed: nothing more comes */
    }
}

/* Moves entry w on; 1 when it changed. */
static int rx_step_win(ipcp__rx_t *x, rx_win_t *w)
{
    ipcp__remote_t *rm = x->rm;
    ipcp_status_t st = IPCP_OK;
    size_t n = 0;
    if (w->state == W_COPY) {
        if (!atomic_load_explicit(&w->copied, memory_order_acquire))
            return 0;
        /* A piece copied out waits for those before it to reach the
         * transport (its track kept until then). */
        if (x->send && x->st == IPCP_OK && ipcp__track_ok(&w->tr) &&
            w->k != x->given)
            return 0;
        if ((st = rx_copy_end(x, w)) != IPCP_OK)
            rx_fail(x, st);
        if (!x->send) {
            x->ndone++;
            return 1;
        }
        if (x->st != IPCP_OK) {
            rx_send_stop(x);
            return 1;
        }
        st = rx_post(x, 1, w->slot, rx_piece_len(x, w->k), NULL, 0, (int)x->seq,
                     &w->op);
        if (st != IPCP_OK) {
            w->state = W_IDLE;
            rx_fail(x, st);
            rx_send_stop(x);
            return 1;
        }
        x->given++;
        w->state = W_MOVE;
        return 1;
    }
    if (w->state != W_MOVE || !rm->ops->test(rm->ctx, w->op, &st, &n))
        return 0;
    w->op = NULL;
    w->state = W_IDLE;
    if (x->rma) {
        if (st != IPCP_OK) {
            rx_fail(x, st);
            x->stopped = 1;
        }
        x->ndone++;
        return 1;
    }
    if (st == IPCP_ERR_TRUNCATED && !x->send) {
        /* More than the piece's bytes: no ipcpipe sends that. */
        rx_fail(x, ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                              "rank %d (on another node) sent a piece longer "
                              "than the %zu bytes due",
                              x->peer, rx_piece_len(x, w->k)));
        rx_drain(x);
        x->ndone++;
        return 1;
    }
    if (st != IPCP_OK) {
        rx_fail(x, st);
        x->stopped = 1;
        if (x->send)
            x->given = x->n;
        return 1;
    }
    if (x->send) {
        x->ndone++;
        return 1;
    }
    size_t want = rx_piece_len(x, w->k);
    if (n == 0 && want > 0) {
        /* The sender stopped: no more pieces come; cancel those asked. */
        rx_fail(x, ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                              "rank %d (on another node) stopped sending "
                              "after %llu of %llu bytes: its side failed",
                              x->peer, (unsigned long long)(w->k * x->chunk),
                              (unsigned long long)x->len));
        x->stopped = 1;
        for (int i = 0; i < x->nwin; i++)
            if (x->win[i].state == W_MOVE) {
                rm->ops->cancel(rm->ctx, x->win[i].op);
                x->win[i].op = NULL;
                x->win[i].state = W_IDLE;
            }
        return 1;
    }
    if (n != want) {
        rx_fail(x, ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                              "rank %d (on another node) sent a piece of %zu "
                              "bytes where %zu were due",
                              x->peer, n, want));
        rx_drain(x); /* the rest is taken and dropped */
    }
    if (w->slot && !x->drain) {
        st = rx_copy(x, w, 1, x->buf + w->k * x->chunk, w->slot, want);
        if (st == IPCP_OK)
            return 1;
        rx_fail(x, st);
        rx_drain(x);
    }
    x->ndone++;
    return 1;
}

/* ---- The header ------------------------------------------------------ */

/* x's slots back to the job's, unless finalize left them to the
 * transport. */
static void rx_slots_give(ipcp__rx_t *x)
{
    if (x->slots && !x->leak && !x->dirty)
        ipcp__list_push_back(&x->rm->slots, &x->slots->link);
    x->slots = NULL; /* else kept from reuse (a copy failed, or finalize
                        left them to the transport): never freed */
}

/* A slot of a message of pieces: a piece, or for a message of one piece
 * its length up to a power of two (at least 128 KiB), so that a window
 * of messages shorter than a piece pins what it needs (1 MiB x16 pinned
 * 256 MiB a side with slots of 4 MiB x4 each) and meets its sets
 * again. */
static size_t rx_slot_size(const ipcp__rx_t *x)
{
    size_t size = (size_t)128 << 10;
    if (x->n > 1)
        return x->chunk;
    while (size < x->len && size < x->chunk)
        size *= 2;
    return size < x->chunk ? size : x->chunk;
}

/* The queues and slots a staged transfer moves its bytes through: for
 * its pieces (short 0), or one slot for a short message. */
static ipcp_status_t rx_stage(ipcp__rx_t *x, int short_msg)
{
    size_t size = short_msg ? RX_SHORT_SLOT : rx_slot_size(x);
    int cnt = short_msg ? 1 : (x->n < RX_SLOTS ? (int)x->n : RX_SLOTS);
    ipcp_status_t st = rx_queues(x->rm, &x->d, &x->qs);
    if (st != IPCP_OK ||
        (x->slots && x->slots->size == size && x->slots->cnt == cnt))
        return st;
    rx_slots_give(x);
    return rx_slots_take(x->rm, &x->d, size, cnt, &x->slots);
}

/* What the receiver needs for the pieces of a message it takes. */
static ipcp_status_t rx_recv_ready(ipcp__rx_t *x)
{
    ipcp_status_t st = IPCP_OK;
    if (x->dev && x->staged && !x->drain && (st = rx_stage(x, 0)) == IPCP_OK)
        return IPCP_OK;
    /* Truncated, or no staging: the pieces are drained, so that the
     * sender is not left waiting for receives that never come. */
    if (st != IPCP_OK)
        rx_fail(x, st);
    if ((x->drain || st != IPCP_OK) && !rx_drain(x))
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory to drain a message of rank %d (on "
                          "another node), which now waits for it",
                          x->peer);
    return IPCP_OK;
}

static void rx_truncated(ipcp__rx_t *x)
{
    rx_fail(x, ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_TRUNCATED,
                          "a message of %llu bytes from rank %d (on another "
                          "node) for a receive of %zu",
                          (unsigned long long)x->len, x->peer, x->cap));
}

/* The receiver's header arrived (n bytes; st: the transport's word). */
static void rx_head(ipcp__rx_t *x, ipcp_status_t st, size_t n)
{
    rx_hdr_t h;
    x->phase = X_END;
    if (st == IPCP_ERR_TRUNCATED)
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                        "rank %d (on another node) sent a message longer "
                        "than any ipcpipe header",
                        x->peer);
    if (st != IPCP_OK) {
        rx_fail(x, st);
        return;
    }
    if (n < sizeof(h)) {
        rx_fail(x, ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                              "a message of %zu bytes from rank %d (on "
                              "another node) is no ipcpipe header",
                              n, x->peer));
        return;
    }
    memcpy(&h, x->hp, sizeof(h));
    int inl = h.chunk == 0;
    if (h.magic != RX_MAGIC || h.flags != 0 ||
        (inl ? h.len > IPCP_RX_INLINE || n != sizeof(h) + h.len
             : n != sizeof(h) || h.chunk > RX_CHUNK_MAX || h.chunk % 4096)) {
        rx_fail(x, ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                              "rank %d (on another node) sent a header "
                              "ipcpipe cannot read (magic 0x%08x, %zu bytes, "
                              "length %llu, piece %u): another version?",
                              x->peer, (unsigned)h.magic, n,
                              (unsigned long long)h.len, (unsigned)h.chunk));
        return;
    }
    x->len = h.len;
    x->nbytes = (size_t)h.len;
    if (h.len > x->cap) {
        rx_truncated(x);
        x->drain = 1;
    }
    if (inl) {
        /* The bytes came with the header, into the room the receive gave
         * them. */
        if (x->drain || h.len == 0)
            return;
        if (!x->dev) {
            if (x->room != x->buf)
                memcpy(x->buf, x->room, (size_t)h.len);
            return;
        }
        /* Into device memory: one piece, copied from the slot. */
        x->chunk = h.len;
        x->n = x->next = 1;
        if ((st = rx_win_alloc(x, 1)) == IPCP_OK)
            st = rx_copy(x, &x->win[0], 1, x->buf, x->room, (size_t)h.len);
        if (st != IPCP_OK)
            rx_fail(x, st);
        else
            x->phase = X_PIECES;
        return;
    }
    rx_slots_give(x); /* the short message's slot: pieces take their own */
    x->hp = x->hb;
    x->room = NULL;
    x->seq = h.seq;
    x->chunk = h.chunk;
    x->n = (h.len + h.chunk - 1) / h.chunk;
    int win = x->dev && x->staged ? RX_SLOTS : RX_WIN_HOST;
    st = rx_win_alloc(x, (uint64_t)win < x->n ? win : (int)x->n);
    if (st == IPCP_OK)
        st = rx_recv_ready(x);
    if (st != IPCP_OK) {
        /* Without slots or scratch the pieces cannot be taken: the sender
         * waits until finalize cancels its sends. */
        rx_fail(x, st);
        return;
    }
    x->phase = X_PIECES;
}

/* ---- The machine ----------------------------------------------------- */

/* Posts the headers held for the peer in the order of their calls, up to
 * the first whose bytes are still being copied into its slot: one tag's
 * messages leave in the order they were sent, while the copies of short
 * device messages overlap with what MPI carries. */
static void rx_flush(ipcp__remote_t *rm, int peer)
{
    ipcp__list_t *q = &rm->held[peer];
    while (q->next != q) {
        ipcp__rx_t *x = ipcp__list_entry(q->next, ipcp__rx_t, olink);
        ipcp_status_t st = IPCP_OK;
        if (x->copying) {
            if (!atomic_load_explicit(&x->win[0].copied, memory_order_acquire))
                return;
            x->copying = 0;
            st = rx_copy_end(x, &x->win[0]);
        }
        ipcp__list_del(&x->olink);
        x->held = 0;
        if (st == IPCP_OK)
            st =
                rx_post(x, 0, x->hp, x->phn, x->pbody, x->pbn, x->tag, &x->hop);
        if (st != IPCP_OK) { /* nothing of it left: no piece starts */
            rx_fail(x, st);
            x->stopped = 1;
        }
    }
}

/* Starts the pieces whose windows are free (none while the header is
 * held, or after a stop); whether any started. */
static int rx_start_pieces(ipcp__rx_t *x)
{
    int started = 0;
    while (!x->held && !x->stopped && x->next < x->n &&
           x->win[x->next % (uint64_t)x->nwin].state == W_IDLE) {
        rx_start_piece(x, &x->win[x->next % (uint64_t)x->nwin], x->next);
        x->next++;
        started = 1;
    }
    return started;
}

static int rx_idle(const ipcp__rx_t *x)
{
    for (int i = 0; i < x->nwin; i++)
        if (x->win[i].state != W_IDLE)
            return 0;
    return 1;
}

static void rx_step(ipcp__rx_t *x)
{
    ipcp__remote_t *rm = x->rm;
    ipcp_status_t st = IPCP_OK;
    size_t n = 0;
    if (x->hop && rm->ops->test(rm->ctx, x->hop, &st, &n)) {
        x->hop = NULL;
        if (x->phase == X_HEAD) {
            rx_head(x, st, n);
        } else if (st != IPCP_OK) {
            rx_fail(x, st);
            if (x->send)
                rx_send_stop(x);
        }
    }
    if (x->sop && rm->ops->test(rm->ctx, x->sop, &st, &n))
        x->sop = NULL;
    if (x->held) {
        rx_flush(rm, x->peer);
        if (x->held)
            return;
    }
    if (x->phase != X_PIECES)
        return;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < x->nwin; i++)
            changed |= rx_step_win(x, &x->win[i]);
        changed |= rx_start_pieces(x);
    }
    if (!x->hop && !x->sop && rx_idle(x) && (x->ndone == x->n || x->stopped))
        x->phase = X_END;
}

/* x ended (or never ran): out of the running list, its slots back to
 * the job's unless finalize left them to the transport. */
static void rx_retire(ipcp__rx_t *x)
{
    rx_unrun(x);
    rx_slots_give(x);
    if (x->rb && !x->leak)
        ipcp__list_push_back(&x->rm->rooms, &x->rb->link);
    x->rb = NULL;
}

static void rx_step_ended(ipcp__rx_t *x)
{
    rx_step(x);
    if (x->phase == X_END)
        rx_retire(x);
}

void ipcp__rx_progress(ipcp__rx_t *x)
{
    if (x && x->phase != X_END)
        rx_step_ended(x);
    /* A few others in turn, each then moved to the back: every transfer
     * moves on while any is waited for (one waiting for its peer must not
     * hold up one that peer waits for), at a bounded cost a look. */
    int n = 0;
    for (ipcp__list_t *e = rx_running.next;
         e != &rx_running && n < RX_PROGRESS_OTHERS; e = e->next)
        n++;
    for (int i = 0; i < n; i++) {
        ipcp__list_t *e = rx_running.next;
        if (e == &rx_running)
            break;
        ipcp__rx_t *o = ipcp__list_entry(e, ipcp__rx_t, link);
        ipcp__list_del(e);
        ipcp__list_push_back(&rx_running, e);
        if (o != x)
            rx_step_ended(o);
    }
}

/* The sender's header: with the bytes themselves (up to IPCP_RX_INLINE;
 * device memory's once copied into a slot), else where the pieces come.
 * It leaves after the headers sent the peer before it (rx_flush). */
static ipcp_status_t rx_send_head(ipcp__rx_t *x)
{
    ipcp__remote_t *rm = x->rm;
    rx_hdr_t h = {RX_MAGIC, 0, x->len, 0, 0};
    ipcp_status_t st;
    /* It ends once the header left too (the bytes are the caller's, or
     * in x). */
    x->phase = X_PIECES;
    memcpy(x->hb, &h, sizeof(h));
    x->phn = sizeof(h);
    if (!x->dev && x->len <= IPCP_RX_COPY) {
        memcpy(x->hb + sizeof(h), x->buf, (size_t)x->len);
        x->phn = x->hbn;
    } else if (x->len <= IPCP_RX_INLINE && (!x->dev || x->len == 0)) {
        x->pbody = x->buf;
        x->pbn = (size_t)x->len;
    } else if (x->len <= IPCP_RX_INLINE && x->staged) {
        /* Device memory: copied into a slot, the header just before the
         * bytes, one contiguous message once the copy ended. */
        if ((st = rx_win_alloc(x, 1)) != IPCP_OK ||
            (st = rx_stage(x, 1)) != IPCP_OK ||
            (st = rx_copy(x, &x->win[0], 0, x->slots->mem + RX_SHORT_AT, x->buf,
                          (size_t)x->len)) != IPCP_OK)
            return st;
        x->copying = 1;
        x->hp = x->slots->mem + RX_SHORT_AT - sizeof(h);
        memcpy(x->hp, &h, sizeof(h));
        x->phn = sizeof(h) + (size_t)x->len;
    } else {
        uint32_t *next = &rm->seq[x->peer];
        x->seq = *next;
        *next = *next >= (uint32_t)rm->ops->tag_max ? 0 : *next + 1;
        x->chunk = rm->chunk;
        x->n = (x->len + x->chunk - 1) / x->chunk;
        int win = x->staged ? RX_SLOTS : RX_WIN_HOST;
        h.seq = x->seq;
        h.chunk = (uint32_t)x->chunk;
        memcpy(x->hb, &h, sizeof(h));
        st = rx_win_alloc(x, (uint64_t)win < x->n ? win : (int)x->n);
        if (st == IPCP_OK && x->staged)
            st = rx_stage(x, 0);
        if (st != IPCP_OK)
            return st;
    }
    x->held = 1;
    ipcp__list_push_back(&rm->held[x->peer], &x->olink);
    rx_flush(rm, x->peer);
    /* Its own header failed to leave now: the call's failure, with its
     * reason (the flush may have failed others after it). */
    if (x->held || x->st == IPCP_OK)
        return IPCP_OK;
    ipcp__set_last_error(x->err);
    return x->st;
}

/* The receiver's header, and room for the bytes of the longest short
 * message: in place when a host buffer holds it (a message of two parts),
 * else the job's room for a host buffer, a slot for device memory.  A receive
 * never offers less (a message longer than its receive may be written past it:
 * Open MPI 4.1's single-copy path does so), so what is too long for the buffer
 * is cut there, the buffer untouched. */
static ipcp_status_t rx_recv_head(ipcp__rx_t *x)
{
    const size_t hn = sizeof(rx_hdr_t);
    ipcp_status_t st;
    x->phase = X_HEAD;
    if (!x->dev && x->cap >= IPCP_RX_INLINE) {
        x->room = x->buf;
        return rx_post(x, 0, x->hp, hn, x->room, IPCP_RX_INLINE, x->tag,
                       &x->hop);
    }
    if (x->dev) {
        if ((st = rx_stage(x, 1)) != IPCP_OK)
            return st;
        x->hp = x->slots->mem + RX_SHORT_AT - hn;
    } else {
        ipcp__list_t *e = ipcp__list_pop_front(&x->rm->rooms);
        x->rb = e ? ipcp__list_entry(e, rx_room_t, link)
                  : malloc(sizeof(rx_room_t) + hn + IPCP_RX_INLINE);
        if (!x->rb)
            return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                              "no memory for a receive from rank %d", x->peer);
        ipcp__list_init(&x->rb->link);
        x->hp = x->rb->mem;
    }
    /* The header, then the room for the bytes, contiguous. */
    x->room = x->hp + hn;
    return rx_post(x, 0, x->hp, hn + IPCP_RX_INLINE, NULL, 0, x->tag, &x->hop);
}

/* A transfer made ready to start (a spare one, else a new one), with
 * hbn bytes of header. */
static ipcp__rx_t *rx_new(ipcp__remote_t *rm, int send, void *buf, size_t len,
                          int peer, size_t hbn)
{
    ipcp__list_t *e = ipcp__list_pop_front(&rm->spare);
    ipcp__rx_t *x = e ? ipcp__list_entry(e, ipcp__rx_t, link)
                      : malloc(sizeof(*x) + RX_HB_MAX);
    if (!x) {
        ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                   "no memory for a transfer with rank %d", peer);
        return NULL;
    }
    rm->nspare -= e != NULL;
    memset(x, 0, offsetof(ipcp__rx_t, err));
    x->err[0] = '\0';
    x->hbn = hbn;
    memset(x->hb, 0, hbn);
    x->hp = x->hb;
    ipcp__list_init(&x->link);
    ipcp__list_init(&x->rlink);
    ipcp__list_init(&x->olink);
    x->rm = rm;
    x->send = send;
    x->peer = peer;
    x->buf = buf;
    x->cap = len;
    return x;
}

/* x started: among the running and the job's transfers, its first
 * pieces started. */
static void rx_launch(ipcp__rx_t *x)
{
    rx_run(x);
    ipcp__list_push_back(&x->rm->xfers, &x->rlink);
    /* The first pieces start now, without a look at the transport: a test
     * there moves the transport's own work on (an MPI library's copies of
     * other messages), which would hold up the caller's next posts, and
     * Open MPI answers a message that arrives before its receive only once
     * the receive is posted. */
    if (x->phase == X_PIECES)
        rx_start_pieces(x);
}

ipcp_status_t ipcp__rx_start(ipcp__remote_t *rm, int send, void *buf,
                             size_t len, int peer, int tag,
                             const ipcp__rx_dev_t *dev, ipcp__rx_t **out)
{
    /* A host message of up to IPCP_RX_COPY bytes goes copied after its
     * header in x. */
    size_t hbn =
        sizeof(rx_hdr_t) + (send && !dev && len <= IPCP_RX_COPY ? len : 0);
    ipcp__rx_t *x = rx_new(rm, send, buf, len, peer, hbn);
    if (!x)
        return IPCP_ERR_NOMEM;
    x->tag = tag;
    x->len = send ? len : 0;
    x->nbytes = send ? len : 0;
    if (dev) {
        x->dev = 1;
        x->d = *dev;
        x->staged = !rm->ops->device_mem;
    }
    ipcp_status_t st = send ? rx_send_head(x) : rx_recv_head(x);
    if (st != IPCP_OK) {
        rx_retire(x);
        free(x->win);
        free(x);
        return st;
    }
    rx_launch(x);
    *out = x;
    return IPCP_OK;
}

ipcp_status_t ipcp__rx_start_rma(ipcp__remote_t *rm, int put, void *buf,
                                 size_t len, int peer, uint64_t addr,
                                 ipcp__rx_t **out)
{
    ipcp__rx_t *x = rx_new(rm, put, buf, len, peer, 0);
    if (!x)
        return IPCP_ERR_NOMEM;
    x->rma = 1;
    x->raddr = addr;
    x->len = x->nbytes = len;
    x->chunk = IPCP_REMOTE_RMA_MAX;
    x->n = (len + x->chunk - 1) / x->chunk;
    x->phase = X_PIECES;
    ipcp_status_t st = IPCP_OK;
    if (x->n &&
        (st = rx_win_alloc(x, x->n < RX_WIN_HOST ? (int)x->n : RX_WIN_HOST)) !=
            IPCP_OK) {
        free(x);
        return st;
    }
    rx_launch(x);
    *out = x;
    return IPCP_OK;
}

int ipcp__rx_ended(const ipcp__rx_t *x)
{
    return x->phase == X_END;
}

ipcp_status_t ipcp__rx_result(const ipcp__rx_t *x, size_t *nbytes)
{
    *nbytes = x->st == IPCP_OK ? x->nbytes : 0;
    if (x->st != IPCP_OK)
        ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, x->st, "%s", x->err);
    return x->st;
}

void ipcp__rx_cancel(ipcp__rx_t *x)
{
    ipcp__remote_t *rm = x->rm;
    if (x->phase == X_END)
        return;
    int left = 0;
    ipcp__list_del(&x->olink);
    x->held = 0;
    if (x->hop)
        left |= !rm->ops->cancel(rm->ctx, x->hop);
    if (x->sop)
        left |= !rm->ops->cancel(rm->ctx, x->sop);
    x->hop = x->sop = NULL;
    for (int i = 0; i < x->nwin; i++) {
        rx_win_t *w = &x->win[i];
        if (w->state == W_MOVE)
            left |= !rm->ops->cancel(rm->ctx, w->op);
        while (w->state == W_COPY &&
               !atomic_load_explicit(&w->copied, memory_order_acquire))
            ;
        if (w->state == W_COPY)
            ipcp__track_destroy(&w->tr);
        w->state = W_IDLE;
        w->op = NULL;
    }
    rx_fail(x, ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_STATE,
                          "finalized before its transfer with rank %d (on "
                          "another node) ended",
                          x->peer));
    x->phase = X_END;
    /* Memory an operation left to the transport may still read or write
     * stays: the header in x, the slots, the scratch (a few MiB at worst,
     * once per finalize that left a send no rank took). */
    x->leak = left;
    rx_retire(x);
}

void ipcp__rx_end_all(ipcp__remote_t *rm)
{
    ipcp__list_t *e;
    while ((e = ipcp__list_pop_front(&rm->xfers)))
        ipcp__rx_cancel(ipcp__list_entry(e, ipcp__rx_t, rlink));
}

void ipcp__rx_free(ipcp__rx_t *x)
{
    if (!x)
        return;
    /* Still among the job's transfers: finalize has not ended them, so
     * the job (and its spares) is still there. */
    int kept = x->rlink.next != &x->rlink;
    ipcp__list_del(&x->olink);
    rx_unrun(x);
    ipcp__list_del(&x->rlink);
    if (x->leak)
        return;
    free(x->scratch);
    free(x->win);
    if (kept && x->rm->nspare < RX_SPARE) {
        ipcp__list_push_back(&x->rm->spare, &x->link);
        x->rm->nspare++;
        return;
    }
    free(x);
}
