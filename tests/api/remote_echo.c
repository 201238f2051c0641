/* The echoing transport of test_remote.c (remote_echo.h). */
#include <stdlib.h>
#include <string.h>

#include "apitest.h"
#include "common/log.h"
#include "common/status.h"
#include "engine/remote_xfer.h"
#include "fakedev.h"
#include "remote_echo.h"

echo_t echo;

static int echo_is_dev(const void *p)
{
    ipcp__mem_attr_t a;
    return p && fakedev_owns(NULL, p, &a);
}

/* What a message names, counted (echo.device_ops, watched). */
static void echo_note(const void *buf, size_t len)
{
    echo.device_ops += len && echo_is_dev(buf);
    echo.watched += echo.watch && buf == echo.watch;
}

ipcp_status_t echo_post(int chan, int send, void *buf, size_t len, int peer,
                        int tag, void **out)
{
    echo_note(buf, len);
    for (int i = 0; i < MAX_OPS; i++)
        if (!echo.ops[i].used) {
            if (send) {
                unsigned char *copy = t_malloc(len + 1);
                memcpy(copy, buf, len);
                buf = copy;
            }
            echo.ops[i] = (op_t){.used = 1,
                                 .chan = chan,
                                 .send = send,
                                 .peer = peer,
                                 .tag = tag,
                                 .order = echo.sends++,
                                 .buf = buf,
                                 .len = len};
            *out = &echo.ops[i];
            return IPCP_OK;
        }
    return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                      "echo: more than %d operations", MAX_OPS);
}

static ipcp_status_t echo_isend(void *ctx, int chan, const void *buf,
                                size_t len, int peer, int tag, void **op)
{
    T_CHECK(ctx == &echo);
    T_CHECK(chan == 0 || chan == 1);
    T_CHECK(tag >= 0 && tag <= 1000);
    if (echo.refuse) {
        echo.refuse = 0;
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_SYSTEM,
                          "echo: a send refused");
    }
    echo.piece_sends += chan == 1;
    echo.alone_sends += chan == 0 && len > IPCP_RX_HEAD;
    return echo_post(chan, 1, (void *)buf, len, peer, tag, op);
}

static ipcp_status_t echo_irecv(void *ctx, int chan, void *buf, size_t len,
                                int peer, int tag, void **op)
{
    T_CHECK(ctx == &echo);
    T_CHECK(chan == 0 || chan == 1);
    return echo_post(chan, 0, buf, len, peer, tag, op);
}

/* The oldest send to o's peer, channel and tag not yet read, into o;
 * 0 when there is none. */
static int echo_match(op_t *o)
{
    op_t *s = NULL;
    for (int i = 0; i < MAX_OPS; i++) {
        op_t *c = &echo.ops[i];
        if (c->used && c->send && c->peer == o->peer && c->tag == o->tag &&
            c->chan == o->chan && (!s || c->order < s->order))
            s = c;
    }
    if (!s)
        return 0;
    memcpy(o->buf, s->buf, s->len < o->len ? s->len : o->len);
    o->mn = s->len;
    free(s->buf);
    s->used = 0;
    o->matched = 1;
    return 1;
}

/* A send ends at once (a copy of its bytes waits to be echoed); a
 * receive ends with the oldest send to its peer, channel and tag not yet
 * read, receives taking them in the order they were posted (as MPI's
 * do: the pieces of a message share a tag). */
static int echo_test(void *ctx, void *opp, ipcp_status_t *st, size_t *nbytes)
{
    op_t *o = opp;
    (void)ctx;
    if (o->barrier) { /* the others came at the second look */
        if (o->done++ == 0)
            return 0;
        o->used = 0;
        *st = IPCP_OK;
        return 1;
    }
    if (o->send) {
        o->done = 1;
        *st = IPCP_OK;
        return 1;
    }
    while (!o->matched) {
        op_t *r = NULL; /* the oldest receive of o's kind still waiting */
        for (int i = 0; i < MAX_OPS; i++) {
            op_t *c = &echo.ops[i];
            if (c->used && !c->send && !c->barrier && !c->matched &&
                c->peer == o->peer && c->tag == o->tag && c->chan == o->chan &&
                (!r || c->order < r->order))
                r = c;
        }
        if (!echo_match(r))
            return 0;
    }
    /* A message too long filled the receive and fails it, as MPI's do
     * (said when the receive ends: the last error is then its). */
    *st = IPCP_OK;
    if (o->mn > o->len)
        *st = ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_TRUNCATED,
                         "echo: %zu bytes for a receive of %zu", o->mn, o->len);
    else
        *nbytes = o->mn;
    o->used = 0;
    return 1;
}

static int echo_cancel(void *ctx, void *opp)
{
    op_t *o = opp;
    (void)ctx;
    if (o->send)
        free(o->buf);
    o->used = 0;
    echo.cancels++;
    return 1;
}

static ipcp_status_t echo_ibarrier(void *ctx, void **op)
{
    op_t *o;
    echo.barriers++;
    ipcp_status_t st = echo_post(0, 0, NULL, 0, -1, -1, op);
    (void)ctx;
    if (st == IPCP_OK) {
        o = *op;
        o->barrier = 1;
    }
    return st;
}

static void echo_close(void *ctx)
{
    (void)ctx;
    echo.closes++;
}

const ipcp__remote_ops_t echo_ops = {
    .name = "echo",
    .tag_max = 1000,
    .isend = echo_isend,
    .irecv = echo_irecv,
    .test = echo_test,
    .cancel = echo_cancel,
    .ibarrier = echo_ibarrier,
    .close = echo_close,
};
