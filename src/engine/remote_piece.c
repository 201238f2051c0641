/* The pieces of transfers with other nodes: each entry of a transfer's
 * window from its start to its end (remote_rx.h). */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "engine/remote_rx.h"

/* ---- Pieces ---------------------------------------------------------- */

ipcp_status_t ipcp__rx_win_alloc(ipcp__rx_t *x, int n)
{
    if (!(x->win = calloc((size_t)n, sizeof(*x->win))))
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for a transfer's %d pieces in flight", n);
    x->nwin = n;
    return IPCP_OK;
}

/* A message of n bytes at buf to or from x's peer. */
ipcp_status_t ipcp__rx_post(ipcp__rx_t *x, int chan, void *buf, size_t n,
                            int tag, void **op)
{
    ipcp__remote_t *rm = x->rm;
    return x->send ? rm->ops->isend(rm->ctx, chan, buf, n, x->peer, tag, op)
                   : rm->ops->irecv(rm->ctx, chan, buf, n, x->peer, tag, op);
}

/* A region of scratch: a piece, or the whole message where it is
 * shorter (a short host message past IPCPIPE_REMOTE_INLINE is one piece
 * of its length, not of IPCPIPE_REMOTE_CHUNK's). */
static size_t rx_scratch_stride(const ipcp__rx_t *x)
{
    return x->len < x->chunk ? (size_t)x->len : (size_t)x->chunk;
}

/* The receiver takes the rest of the message and writes none of it: into
 * its slots, else into scratch (a region per piece in flight: MPI takes
 * no receives into overlapping memory).  0 when there is nowhere to put
 * it (no more pieces are asked for then). */
int ipcp__rx_drain(ipcp__rx_t *x)
{
    x->drain = 1;
    if (x->slots || x->scratch || !x->nwin)
        return 1;
    if ((x->scratch = malloc(rx_scratch_stride(x) * (size_t)x->nwin)))
        return 1;
    x->stopped = 1;
    return 0;
}

/* The sender stops: the receiver learns it from a piece of no bytes in
 * the place of the next one (and nothing after it). */
void ipcp__rx_send_stop(ipcp__rx_t *x)
{
    void *op = NULL;
    x->stopped = 1;
    if (x->given >= x->n)
        return;
    x->given = x->n;
    if (ipcp__rx_post(x, 1, x->hb, 0, (int)x->seq, &op) == IPCP_OK)
        x->sop = op; /* else the transport failed: the peer hears of it */
}

/* Puts piece w->k from p, or gets it into p. */
static ipcp_status_t rx_rma_move(ipcp__rx_t *x, rx_win_t *w, void *p)
{
    ipcp__remote_t *rm = x->rm;
    size_t len = rx_piece_len(x, w->k);
    uint64_t addr = x->raddr + w->k * x->chunk;
    ipcp_status_t st =
        x->send ? rm->ops->iput(rm->ctx, p, len, x->peer, addr, &w->op)
                : rm->ops->iget(rm->ctx, p, len, x->peer, addr, &w->op);
    if (st == IPCP_OK)
        w->state = W_MOVE;
    return st;
}

/* A staged one-sided piece moved on: a put's copied out (now put), a
 * get's copied in (done).  1: w changed. */
static int rx_rma_copied(ipcp__rx_t *x, rx_win_t *w)
{
    ipcp_status_t st = ipcp__rx_copy_end(x, w);
    if (st == IPCP_OK && x->send && !x->stopped)
        st = rx_rma_move(x, w, w->slot);
    if (st != IPCP_OK) {
        ipcp__rx_fail(x, st);
        x->stopped = 1;
    }
    if (w->state == W_IDLE)
        x->ndone++;
    return 1;
}

/* A one-sided piece's operation ended (st): done, or a staged get's
 * piece copied on into the device buffer.  1: w changed. */
static int rx_rma_moved(ipcp__rx_t *x, rx_win_t *w, ipcp_status_t st)
{
    if (st == IPCP_OK && !x->send && w->slot && !x->stopped) {
        st = ipcp__rx_copy(x, w, 1, x->buf + w->k * x->chunk, w->slot,
                           rx_piece_len(x, w->k));
        if (st == IPCP_OK)
            return 1;
    }
    if (st != IPCP_OK) {
        ipcp__rx_fail(x, st);
        x->stopped = 1;
    }
    x->ndone++;
    return 1;
}

/* Starts piece k in entry w. */
void ipcp__rx_start_piece(ipcp__rx_t *x, rx_win_t *w, uint64_t k)
{
    size_t len = rx_piece_len(x, k);
    unsigned char *at = x->buf + k * x->chunk;
    ipcp_status_t st;
    w->k = k;
    w->slot =
        x->slots ? x->slots->mem + (size_t)(w - x->win) * x->slots->size : NULL;
    if (x->rma) {
        /* A staged put's piece is copied out first (rx_win_copied puts
         * it); a staged get's lands in its slot. */
        st = x->send && w->slot ? ipcp__rx_copy(x, w, 0, w->slot, at, len)
                                : rx_rma_move(x, w, w->slot ? w->slot : at);
        if (st != IPCP_OK) {
            ipcp__rx_fail(x, st);
            x->stopped = 1;
        }
        return;
    }
    if (x->send && w->slot) {
        st = ipcp__rx_copy(x, w, 0, w->slot, at, len);
    } else {
        void *to = at;
        if (!x->send && x->drain)
            to = w->slot
                     ? w->slot
                     : x->scratch + (size_t)(w - x->win) * rx_scratch_stride(x);
        else if (!x->send && w->slot)
            to = w->slot;
        st = ipcp__rx_post(x, 1, to, len, (int)x->seq, &w->op);
        if (st == IPCP_OK) {
            w->state = W_MOVE;
            if (x->send)
                x->given++;
        }
    }
    if (st != IPCP_OK) {
        ipcp__rx_fail(x, st);
        if (x->send)
            ipcp__rx_send_stop(x);
        else
            x->stopped = 1; /* the transport failed: nothing more comes */
    }
}

/* w's copy ended (W_COPY): a receiver's piece is in place; a sender's
 * goes to the transport once those before it did.  1 when w changed. */
static int rx_win_copied(ipcp__rx_t *x, rx_win_t *w)
{
    ipcp_status_t st;
    if (!atomic_load_explicit(&w->copied, memory_order_acquire))
        return 0;
    if (x->rma)
        return rx_rma_copied(x, w);
    /* A piece copied out waits for those before it to reach the
     * transport (its track kept until then). */
    if (x->send && x->st == IPCP_OK && ipcp__track_ok(&w->tr) &&
        w->k != x->given)
        return 0;
    if ((st = ipcp__rx_copy_end(x, w)) != IPCP_OK)
        ipcp__rx_fail(x, st);
    if (!x->send) {
        x->ndone++;
        return 1;
    }
    if (x->st != IPCP_OK) {
        ipcp__rx_send_stop(x);
        return 1;
    }
    st = ipcp__rx_post(x, 1, w->slot, rx_piece_len(x, w->k), (int)x->seq,
                       &w->op);
    if (st != IPCP_OK) {
        w->state = W_IDLE;
        ipcp__rx_fail(x, st);
        ipcp__rx_send_stop(x);
        return 1;
    }
    x->given++;
    w->state = W_MOVE;
    return 1;
}

/* Moves entry w on; 1 when it changed. */
int ipcp__rx_step_win(ipcp__rx_t *x, rx_win_t *w)
{
    ipcp__remote_t *rm = x->rm;
    ipcp_status_t st = IPCP_OK;
    size_t n = 0;
    if (w->state == W_COPY)
        return rx_win_copied(x, w);
    if (w->state != W_MOVE || !rm->ops->test(rm->ctx, w->op, &st, &n))
        return 0;
    w->op = NULL;
    w->state = W_IDLE;
    if (x->rma)
        return rx_rma_moved(x, w, st);
    if (st == IPCP_ERR_TRUNCATED && !x->send) {
        /* More than the piece's bytes: no ipcpipe sends that. */
        ipcp__rx_fail(
            x, ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                          "rank %d (on another node) sent a piece longer "
                          "than the %zu bytes due",
                          x->peer, rx_piece_len(x, w->k)));
        ipcp__rx_drain(x);
        x->ndone++;
        return 1;
    }
    if (st != IPCP_OK) {
        ipcp__rx_fail(x, st);
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
        ipcp__rx_fail(
            x, ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
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
        ipcp__rx_fail(
            x, ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                          "rank %d (on another node) sent a piece of %zu "
                          "bytes where %zu were due",
                          x->peer, n, want));
        ipcp__rx_drain(x); /* the rest is taken and dropped */
    }
    if (w->slot && !x->drain) {
        st = ipcp__rx_copy(x, w, 1, x->buf + w->k * x->chunk, w->slot, want);
        if (st == IPCP_OK)
            return 1;
        ipcp__rx_fail(x, st);
        ipcp__rx_drain(x);
    }
    x->ndone++;
    return 1;
}
