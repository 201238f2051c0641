/* Device memory's staging for transfers with other nodes: each device's
 * copy queues, the job's pinned slots, the copies (remote_rx.h). */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "engine/remote_rx.h"

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
    free(rm->keys);
    rm->keys = NULL;
    rm->nkeys = 0;
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
ipcp_status_t ipcp__rx_copy(ipcp__rx_t *x, rx_win_t *w, int dir, void *dst,
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
ipcp_status_t ipcp__rx_copy_end(ipcp__rx_t *x, rx_win_t *w)
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

/* x's slots back to the job's, unless finalize left them to the
 * transport. */
void ipcp__rx_slots_give(ipcp__rx_t *x)
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

/* The piece of a staged message of len bytes: IPCPIPE_REMOTE_CHUNK (the
 * largest), cut to a power of two near len / RX_STAGE_PIECES down to
 * RX_STAGE_PIECE_MIN, so that a message of a few pieces still overlaps
 * its copies with MPI.  One H100 (bench-nodes, device rows, in turns,
 * two each): 1 MiB pieces moved 4 MiB messages at 83-84% of the
 * ceiling against 77-80% with 4 MiB, 16 MiB at 112-115% against 89-92%;
 * one H200 had 256 MiB slower with 1 MiB pieces (7.6 against 8.3-9.7
 * GB/s), so long messages keep the setting's. */
uint64_t ipcp__rx_stage_piece(const ipcp__remote_t *rm, uint64_t len)
{
    uint64_t piece = RX_STAGE_PIECE_MIN;
    if (rm->chunk <= piece)
        return rm->chunk;
    while (piece < rm->chunk && piece * RX_STAGE_PIECES < len)
        piece *= 2;
    /* A setting of no power of two bounds it too. */
    return piece < rm->chunk ? piece : rm->chunk;
}

/* The queues and slots a staged transfer moves its bytes through: for
 * its pieces (short 0), or one slot for a short message. */
ipcp_status_t ipcp__rx_stage(ipcp__rx_t *x, int short_msg)
{
    size_t size = short_msg ? RX_SHORT_SLOT : rx_slot_size(x);
    int cnt = short_msg ? 1 : (x->n < RX_SLOTS ? (int)x->n : RX_SLOTS);
    ipcp_status_t st = rx_queues(x->rm, &x->d, &x->qs);
    if (st != IPCP_OK ||
        (x->slots && x->slots->size == size && x->slots->cnt == cnt))
        return st;
    ipcp__rx_slots_give(x);
    return rx_slots_take(x->rm, &x->d, size, cnt, &x->slots);
}
