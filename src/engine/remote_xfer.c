/* Transfers with ranks on other nodes: the header and the machine that
 * moves each transfer on (engine/remote_xfer.h says how; remote_rx.h
 * names the parts in remote_piece.c and remote_stage.c). */
#include <sched.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "engine/remote_rx.h"

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
void ipcp__rx_fail(ipcp__rx_t *x, ipcp_status_t st)
{
    if (x->st != IPCP_OK)
        return;
    x->st = st;
    snprintf(x->err, sizeof(x->err), "%s", ipcp_last_error());
}

/* ---- The header ------------------------------------------------------ */

/* What the receiver needs for the pieces of a message it takes. */
static ipcp_status_t rx_recv_ready(ipcp__rx_t *x)
{
    ipcp_status_t st = IPCP_OK;
    if (x->dev && x->staged && !x->drain &&
        (st = ipcp__rx_stage(x, 0)) == IPCP_OK)
        return IPCP_OK;
    /* Truncated, or no staging: the pieces are drained, so that the
     * sender is not left waiting for receives that never come. */
    if (st != IPCP_OK)
        ipcp__rx_fail(x, st);
    if ((x->drain || st != IPCP_OK) && !ipcp__rx_drain(x))
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory to drain a message of rank %d (on "
                          "another node), which now waits for it",
                          x->peer);
    return IPCP_OK;
}

static void rx_truncated(ipcp__rx_t *x)
{
    ipcp__rx_fail(x,
                  ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_TRUNCATED,
                             "a message of %llu bytes from rank %d (on another "
                             "node) for a receive of %zu",
                             (unsigned long long)x->len, x->peer, x->cap));
}

/* The message that came on channel 0 (n bytes at x->room), or the
 * receive's failure st: 1 with what it says in *h (a short message's
 * bytes alone read as a header of their length), else 0 with x failed
 * (none ipcpipe sends). */
static int rx_head_read(ipcp__rx_t *x, ipcp_status_t st, size_t n, rx_hdr_t *h)
{
    if (st == IPCP_ERR_TRUNCATED)
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                        "rank %d (on another node) sent a message longer "
                        "than any ipcpipe sends under a tag",
                        x->peer);
    if (st == IPCP_OK && n > IPCP_RX_HEAD) {
        *h = (rx_hdr_t){RX_MAGIC, 0, n, 0, 0};
        return 1;
    }
    if (st == IPCP_OK && n < sizeof(*h))
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                        "a message of %zu bytes from rank %d (on another "
                        "node) is no ipcpipe header",
                        n, x->peer);
    if (st != IPCP_OK) {
        ipcp__rx_fail(x, st);
        return 0;
    }
    memcpy(h, x->room, sizeof(*h));
    int inl = h->chunk == 0;
    if (h->magic == RX_MAGIC && h->flags == 0 &&
        (inl ? h->len <= IPCP_RX_COPY && n == sizeof(*h) + h->len
             : n == sizeof(*h) && h->chunk <= RX_CHUNK_MAX &&
                   h->chunk % 4096 == 0))
        return 1;
    ipcp__rx_fail(x,
                  ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                             "rank %d (on another node) sent a header "
                             "ipcpipe cannot read (magic 0x%08x, %zu "
                             "bytes, length %llu, piece %u): another "
                             "version?",
                             x->peer, (unsigned)h->magic, n,
                             (unsigned long long)h->len, (unsigned)h->chunk));
    return 0;
}

/* Whether x's receive was posted in place with the buffer's first
 * IPCP_RX_HEAD bytes kept in hb (rx_recv_post), so that a header landing
 * there is put back; one that asked first (rx_ask_one) took its message
 * in place only when it was bytes alone. */
static int rx_head_kept(const ipcp__rx_t *x)
{
    return x->room == x->buf && x->cap >= IPCP_RX_INLINE;
}

/* A header that came in place (n bytes, or up to IPCP_RX_HEAD where the
 * receive failed): the bytes it carried (len) to the buffer's start, and
 * what it covered past them as it was. */
static void rx_head_restore(ipcp__rx_t *x, size_t n, uint64_t len)
{
    if (n > IPCP_RX_HEAD)
        n = IPCP_RX_HEAD;
    if (len)
        memmove(x->buf, x->buf + sizeof(rx_hdr_t), (size_t)len);
    memcpy(x->buf + len, x->hb + len, n - (size_t)len);
}

/* A short message: its bytes came alone (at) or behind the header, into
 * the room the receive gave them; into device memory they go as one
 * piece, copied from the slot. */
static void rx_head_short(ipcp__rx_t *x, const unsigned char *at, uint64_t len)
{
    ipcp_status_t st;
    if (x->drain || len == 0)
        return;
    if (!x->dev) {
        if (at != x->buf)
            memcpy(x->buf, at, (size_t)len);
        return;
    }
    x->chunk = len;
    x->n = x->next = 1;
    if ((st = ipcp__rx_win_alloc(x, 1)) == IPCP_OK)
        st = ipcp__rx_copy(x, &x->win[0], 1, x->buf, at, (size_t)len);
    if (st != IPCP_OK)
        ipcp__rx_fail(x, st);
    else
        x->phase = X_PIECES;
}

static void rx_head(ipcp__rx_t *x, ipcp_status_t st, size_t n)
{
    rx_hdr_t h;
    int ok = rx_head_read(x, st, n, &h), alone = ok && n > IPCP_RX_HEAD;
    int behind = ok && !alone && h.chunk == 0;
    x->phase = X_END;
    if (rx_head_kept(x) && !alone)
        rx_head_restore(x, st == IPCP_OK ? n : IPCP_RX_HEAD,
                        behind ? h.len : 0);
    if (!ok)
        return;
    x->len = h.len;
    x->nbytes = (size_t)h.len;
    if (h.len > x->cap) {
        rx_truncated(x);
        x->drain = 1;
    }
    if (h.chunk == 0) {
        rx_head_short(
            x, x->room == x->buf ? x->buf : x->room + (alone ? 0 : sizeof(h)),
            h.len);
        return;
    }
    /* The short message's slot goes back: pieces take their own. */
    ipcp__rx_slots_give(x);
    x->room = NULL;
    x->seq = h.seq;
    x->chunk = h.chunk;
    x->n = (h.len + h.chunk - 1) / h.chunk;
    int win = x->dev && x->staged ? RX_SLOTS : RX_WIN_HOST;
    st = ipcp__rx_win_alloc(x, (uint64_t)win < x->n ? win : (int)x->n);
    if (st == IPCP_OK)
        st = rx_recv_ready(x);
    if (st != IPCP_OK) {
        /* Without slots or scratch the pieces cannot be taken: the sender
         * waits until finalize cancels its sends. */
        ipcp__rx_fail(x, st);
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
            st = ipcp__rx_copy_end(x, &x->win[0]);
        }
        ipcp__list_del(&x->olink);
        x->held = 0;
        if (st == IPCP_OK)
            st = ipcp__rx_post(x, 0, x->hp, x->phn, x->tag, &x->hop);
        if (st != IPCP_OK) { /* nothing of it left: no piece starts */
            ipcp__rx_fail(x, st);
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
        ipcp__rx_start_piece(x, &x->win[x->next % (uint64_t)x->nwin], x->next);
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
            ipcp__rx_fail(x, st);
            if (x->send)
                ipcp__rx_send_stop(x);
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
            changed |= ipcp__rx_step_win(x, &x->win[i]);
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
    ipcp__rx_slots_give(x);
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

/* Looks so far: receives wait in asking for the next one (rx_ask). */
static uint64_t rx_looks;
static void rx_ask(ipcp__remote_t *rm, uint64_t look);

void ipcp__rx_progress(ipcp__rx_t *x)
{
    uint64_t look = ++rx_looks;
    if (x && x->phase != X_END) {
        rx_ask(x->rm, look);
        rx_step_ended(x);
    }
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
        if (o != x) {
            rx_ask(o->rm, look);
            rx_step_ended(o);
        }
    }
}

/* The sender's message on channel 0 (engine/remote_xfer.h): a short
 * message's bytes alone (host memory's up to IPCPIPE_REMOTE_INLINE, from
 * the buffer; device memory's up to IPCP_RX_INLINE, once copied into a
 * slot), else a header, with the bytes copied behind it up to
 * IPCP_RX_COPY, or saying where the pieces come.  It leaves after the
 * messages sent the peer before it (rx_flush). */
static ipcp_status_t rx_send_head(ipcp__rx_t *x)
{
    ipcp__remote_t *rm = x->rm;
    rx_hdr_t h = {RX_MAGIC, 0, x->len, 0, 0};
    const size_t hn = sizeof(h);
    /* Bytes alone, or copied behind a header: any other length goes in
     * pieces. */
    int alone = x->len > IPCP_RX_HEAD, behind = x->len <= IPCP_RX_COPY;
    ipcp_status_t st;
    /* It ends once the message left too (the bytes are the caller's, or
     * in x). */
    x->phase = X_PIECES;
    memcpy(x->hb, &h, hn);
    x->phn = hn;
    if (behind && (!x->dev || x->len == 0)) {
        memcpy(x->hb + hn, x->buf, (size_t)x->len);
        x->phn = x->hbn;
    } else if (alone && !x->dev && x->len <= rm->inline_max) {
        x->hp = x->buf;
        x->phn = (size_t)x->len;
    } else if (x->staged && x->len <= IPCP_RX_INLINE && (alone || behind)) {
        /* Device memory: copied into a slot (the header just before the
         * bytes where it goes with them), one contiguous message once the
         * copy ended. */
        unsigned char *at;
        if ((st = ipcp__rx_win_alloc(x, 1)) != IPCP_OK ||
            (st = ipcp__rx_stage(x, 1)) != IPCP_OK)
            return st;
        at = x->slots->mem + RX_SHORT_AT;
        if ((st = ipcp__rx_copy(x, &x->win[0], 0, at, x->buf,
                                (size_t)x->len)) != IPCP_OK)
            return st;
        x->copying = 1;
        x->hp = alone ? at : at - hn;
        x->phn = (size_t)x->len + (alone ? 0 : hn);
        if (!alone)
            memcpy(x->hp, &h, hn);
    } else {
        uint32_t *next = &rm->seq[x->peer];
        x->seq = *next;
        *next = *next >= (uint32_t)rm->ops->tag_max ? 0 : *next + 1;
        x->chunk = x->staged ? ipcp__rx_stage_piece(rm, x->len) : rm->chunk;
        x->n = (x->len + x->chunk - 1) / x->chunk;
        int win = x->staged ? RX_SLOTS : RX_WIN_HOST;
        h.seq = x->seq;
        h.chunk = (uint32_t)x->chunk;
        memcpy(x->hb, &h, hn);
        st = ipcp__rx_win_alloc(x, (uint64_t)win < x->n ? win : (int)x->n);
        if (st == IPCP_OK && x->staged)
            st = ipcp__rx_stage(x, 0);
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

/* The job's room for a short message that a host receive cannot hold. */
static ipcp_status_t rx_room_take(ipcp__rx_t *x)
{
    ipcp__list_t *e = ipcp__list_pop_front(&x->rm->rooms);
    x->rb = e ? ipcp__list_entry(e, rx_room_t, link)
              : malloc(sizeof(rx_room_t) + IPCP_RX_INLINE);
    if (!x->rb)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for a receive from rank %d", x->peer);
    ipcp__list_init(&x->rb->link);
    x->room = x->rb->mem;
    return IPCP_OK;
}

/* The receiver's message on channel 0, posted with room for the longest
 * short message: in place when a host buffer holds it (a header that
 * lands there is read, and the bytes it covered put back from the copy
 * taken here), else a slot for device memory, or the job's room for a
 * host buffer where the transport cannot say a message's length first
 * (rx_ask).  A receive never offers less (a message longer than its
 * receive may be written past it: Open MPI 4.1's single-copy path does
 * so), so what is too long for the buffer is cut there, the buffer
 * untouched. */
static ipcp_status_t rx_recv_post(ipcp__rx_t *x)
{
    ipcp_status_t st;
    if (!x->dev && x->cap >= IPCP_RX_INLINE) {
        memcpy(x->hb, x->buf, IPCP_RX_HEAD);
        x->room = x->buf;
    } else if (x->dev) {
        if ((st = ipcp__rx_stage(x, 1)) != IPCP_OK)
            return st;
        x->room = x->slots->mem + RX_SHORT_AT;
    } else if ((st = rx_room_take(x)) != IPCP_OK) {
        return st;
    }
    return ipcp__rx_post(x, 0, x->room, IPCP_RX_INLINE, x->tag, &x->hop);
}

/* A host receive of RX_ASK_MIN up to the longest short message asks its
 * message's length before it takes it, where the transport can: the
 * bytes then land in place, not in room to be copied from there.  From
 * 64 KiB a receive posted first does better (MPI's single copy starts as
 * the message arrives), and below 8 KiB the copy out of room costs less
 * than asking (a VM: 8 B half round trips +0.41 us over MPI posted
 * first, +0.73-0.83 asking; 4 KiB windows alike, 8-12 KiB 1.04-1.14x
 * asking). */
#ifndef RX_ASK_MIN
#define RX_ASK_MIN 8192
#endif
static int rx_asks(const ipcp__rx_t *x)
{
    return !x->dev && x->cap >= RX_ASK_MIN && x->cap < IPCP_RX_INLINE &&
           x->rm->ops->improbe;
}

/* Whether keys[0..2n) holds x's peer and tag. */
static int rx_key_in(const int *keys, int n, const ipcp__rx_t *x)
{
    for (int i = 0; i < n; i++)
        if (keys[2 * i] == x->peer && keys[2 * i + 1] == x->tag)
            return 1;
    return 0;
}

/* x asks for its message: 0 while none came; else 1, its receive posted
 * where the message fits (a header in x, bytes in place, a message too
 * long for the buffer in room, cut there) or x failed. */
static int rx_ask_one(ipcp__rx_t *x)
{
    ipcp__remote_t *rm = x->rm;
    size_t n = 0;
    void *msg = NULL;
    ipcp_status_t st = IPCP_ERR_SYSTEM;
    int got = rm->ops->improbe(rm->ctx, 0, x->peer, x->tag, &n, &msg);
    if (got == 0)
        return 0;
    if (got > 0 && n > IPCP_RX_INLINE) {
        /* Left to the transport, untaken: read, it would be written past
         * any room. */
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                        "rank %d (on another node) sent a message of %zu "
                        "bytes under a tag, longer than any ipcpipe sends",
                        x->peer, n);
    } else if (got > 0) {
        st = IPCP_OK;
        if (n <= IPCP_RX_HEAD)
            x->room = x->hb;
        else if (n <= x->cap)
            x->room = x->buf;
        else
            st = rx_room_take(x);
        if (st == IPCP_OK)
            st = rm->ops->imrecv(rm->ctx, msg, x->room, n, &x->hop);
    }
    if (st != IPCP_OK) {
        ipcp__rx_fail(x, st);
        x->phase = X_END;
    }
    return 1;
}

/* Once a look: the receives waiting in rm->asking, in call order, each
 * once no earlier one of its peer and tag waits: one that asks posted
 * when its message came, any other posted at once. */
static void rx_ask(ipcp__remote_t *rm, uint64_t look)
{
    ipcp__list_t *e, *next;
    int nk = 0;
    if (rm->looked == look)
        return;
    rm->looked = look;
    for (e = rm->asking.next; e != &rm->asking; e = next) {
        next = e->next;
        ipcp__rx_t *x = ipcp__list_entry(e, ipcp__rx_t, olink);
        if (rx_key_in(rm->keys, nk, x))
            continue;
        int asks = rx_asks(x);
        if (asks && !rx_ask_one(x)) {
            if (nk == rm->nkeys) {
                int cap = nk ? 2 * nk : 16,
                    *k = realloc(rm->keys, 2 * (size_t)cap * sizeof(*k));
                if (!k)
                    return; /* the rest wait for the next look */
                rm->keys = k;
                rm->nkeys = cap;
            }
            rm->keys[2 * nk] = x->peer;
            rm->keys[2 * nk + 1] = x->tag;
            nk++;
            continue;
        }
        ipcp__list_del(&x->olink);
        ipcp_status_t st = asks ? IPCP_OK : rx_recv_post(x);
        if (st != IPCP_OK) {
            ipcp__rx_fail(x, st);
            x->phase = X_END;
        }
    }
}

/* The receiver's message on channel 0: posted now, unless it asks for
 * its length first or one of its peer and tag waits to (MPI gives a
 * peer's messages of one tag to its receives in the order they were
 * posted). */
static ipcp_status_t rx_recv_head(ipcp__rx_t *x)
{
    x->phase = X_HEAD;
    ipcp__list_t *e;
    int waits = rx_asks(x);
    for (e = x->rm->asking.next; !waits && e != &x->rm->asking; e = e->next) {
        const ipcp__rx_t *o = ipcp__list_entry(e, ipcp__rx_t, olink);
        waits = o->peer == x->peer && o->tag == x->tag;
    }
    if (!waits)
        return rx_recv_post(x);
    ipcp__list_push_back(&x->rm->asking, &x->olink);
    return IPCP_OK;
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
                                 const ipcp__rx_dev_t *dev, ipcp__rx_t **out)
{
    ipcp__rx_t *x = rx_new(rm, put, buf, len, peer, 0);
    if (!x)
        return IPCP_ERR_NOMEM;
    x->rma = 1;
    x->raddr = addr;
    x->len = x->nbytes = len;
    x->chunk = IPCP_REMOTE_RMA_MAX;
    if (dev) {
        x->dev = 1;
        x->d = *dev;
        x->staged = !rm->ops->device_mem;
    }
    int win = x->staged ? RX_SLOTS : RX_WIN_HOST;
    if (x->staged)
        x->chunk = ipcp__rx_stage_piece(rm, len);
    x->n = (len + x->chunk - 1) / x->chunk;
    x->phase = X_PIECES;
    ipcp_status_t st = IPCP_OK;
    if (x->n &&
        (st = ipcp__rx_win_alloc(x, (uint64_t)win < x->n ? win : (int)x->n)) ==
            IPCP_OK &&
        x->staged)
        st = ipcp__rx_stage(x, 0);
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
    if (x->hop) {
        int ended = rm->ops->cancel(rm->ctx, x->hop);
        left |= !ended;
        /* A receive in place that its message reached after all (a
         * cancel that came too late waits for it): what a header there
         * covered is put back. */
        if (ended && !x->send && x->phase == X_HEAD && rx_head_kept(x))
            memcpy(x->buf, x->hb, IPCP_RX_HEAD);
    }
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
    ipcp__rx_fail(x,
                  ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_STATE,
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
