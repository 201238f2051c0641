/* The transport to ranks on other nodes: MPI point-to-point on two
 * duplicates of the user's communicator, one a channel (so that no
 * message of ours meets one of the user's, and headers never meet
 * pieces), errors returned, not fatal; one-sided access through a
 * dynamic window over the first, in one passive epoch to all ranks
 * (MPI_Win_lock_all) from start to end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(OPEN_MPI) && OPEN_MPI && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* MPIX_Query_cuda_support */
#endif
#endif

#include "common/status.h"
#include "mpi/remote_mpi.h"

enum { OP_P2P, OP_PUT, OP_GET };

typedef struct mpi_op {
    MPI_Request r;
    MPI_Message m;       /* a message asked for (mpi_improbe), until taken */
    int send, peer;      /* peer -1: a barrier */
    int kind;            /* OP_*: a put ends once flushed to its target */
    struct mpi_op *next; /* in the context's spares while ended */
} mpi_op_t;

typedef struct mpi_ctx {
    ipcp__remote_ops_t ops; /* mpi_ops with this MPI's tags and memory */
    MPI_Comm comm[2];
    MPI_Win win; /* MPI_WIN_NULL: no one-sided access */
    int joined;  /* every rank's ipcp_init_mpi succeeded: the window is
                    freed by all of them at finalize */
    int tag_ub;
    mpi_op_t *spare; /* ended operations, for the next ones */
} mpi_ctx_t;

static mpi_op_t *mpi_op_new(mpi_ctx_t *c, int send, int peer)
{
    mpi_op_t *o = c->spare;
    if (o)
        c->spare = o->next;
    else if (!(o = malloc(sizeof(*o))))
        return NULL;
    o->send = send;
    o->peer = peer;
    o->kind = OP_P2P;
    return o;
}

/* o's operation ended: o kept for the next. */
static void mpi_op_end(mpi_ctx_t *c, mpi_op_t *o)
{
    o->next = c->spare;
    c->spare = o;
}

/* An MPI error as ipcpipe's status, the reason as last error. */
static ipcp_status_t mpi_fail(int err, const char *what, int peer)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int n = 0, cls = 0;
    MPI_Error_string(err, text, &n);
    MPI_Error_class(err, &cls);
    ipcp_status_t st =
        cls == MPI_ERR_TRUNCATE ? IPCP_ERR_TRUNCATED : IPCP_ERR_SYSTEM;
    if (peer < 0)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, st,
                          "%s of the job's ranks through MPI: %s", what, text);
    return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, st,
                      "%s with rank %d (on another node) through MPI: %s", what,
                      peer, text);
}

/* Messages are at most a short message or a piece (engine/remote_xfer.h):
 * far below INT_MAX. */
static ipcp_status_t mpi_post(mpi_ctx_t *c, int chan, int send, void *buf,
                              size_t n, int peer, int tag, void **op)
{
    int err;
    if (tag > c->tag_ub)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_UNSUPPORTED,
                          "tag %d with rank %d (on another node): MPI takes "
                          "tags up to %d",
                          tag, peer, c->tag_ub);
    mpi_op_t *o = mpi_op_new(c, send, peer);
    if (!o)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for an MPI request");
    err =
        send
            ? MPI_Isend(buf, (int)n, MPI_BYTE, peer, tag, c->comm[chan], &o->r)
            : MPI_Irecv(buf, (int)n, MPI_BYTE, peer, tag, c->comm[chan], &o->r);
    if (err != MPI_SUCCESS) {
        mpi_op_end(c, o);
        return mpi_fail(err, send ? "a send" : "a receive", peer);
    }
    *op = o;
    return IPCP_OK;
}

static ipcp_status_t mpi_isend(void *ctx, int chan, const void *buf, size_t n,
                               int peer, int tag, void **op)
{
    return mpi_post(ctx, chan, 1, (void *)buf, n, peer, tag, op);
}

static ipcp_status_t mpi_irecv(void *ctx, int chan, void *buf, size_t n,
                               int peer, int tag, void **op)
{
    return mpi_post(ctx, chan, 0, buf, n, peer, tag, op);
}

static int mpi_improbe(void *ctx, int chan, int peer, int tag, size_t *n,
                       void **msg)
{
    mpi_ctx_t *c = ctx;
    MPI_Status s;
    MPI_Message m = MPI_MESSAGE_NULL;
    int flag = 0, count = 0;
    /* A spare op is made ready before asking (a message taken from MPI
     * cannot be given back), and taken only when one came. */
    if (!c->spare) {
        mpi_op_t *o = malloc(sizeof(*o));
        if (!o) {
            ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                       "no memory for an MPI request");
            return -1;
        }
        mpi_op_end(c, o);
    }
    int err = MPI_Improbe(peer, tag, c->comm[chan], &flag, &m, &s);
    if (err == MPI_SUCCESS && !flag)
        return 0;
    if (err == MPI_SUCCESS)
        err = MPI_Get_count(&s, MPI_BYTE, &count);
    if (err == MPI_SUCCESS && count < 0) /* not expected of MPI_BYTE */
        err = MPI_ERR_COUNT;
    if (err != MPI_SUCCESS) {
        mpi_fail(err, "asking for a message", peer);
        return -1;
    }
    mpi_op_t *o = mpi_op_new(c, 0, peer);
    o->m = m;
    *n = (size_t)count;
    *msg = o;
    return 1;
}

static ipcp_status_t mpi_imrecv(void *ctx, void *msg, void *buf, size_t n,
                                void **op)
{
    mpi_op_t *o = msg;
    int err = MPI_Imrecv(buf, (int)n, MPI_BYTE, &o->m, &o->r);
    if (err != MPI_SUCCESS) {
        mpi_op_end(ctx, o);
        return mpi_fail(err, "a receive", o->peer);
    }
    *op = o;
    return IPCP_OK;
}

static int mpi_test(void *ctx, void *op, ipcp_status_t *st, size_t *nbytes)
{
    MPI_Request *r = &((mpi_op_t *)op)->r;
    MPI_Status s;
    int flag = 0, count = 0;
    s.MPI_ERROR = MPI_SUCCESS;
    int err = MPI_Test(r, &flag, &s);
    if (err == MPI_SUCCESS && !flag)
        return 0;
    mpi_op_t *o = op;
    if (err == MPI_SUCCESS && o->kind != OP_P2P) {
        /* An RMA request's status is undefined; a put's bytes are at its
         * target only once flushed. */
        if (o->kind == OP_PUT)
            err = MPI_Win_flush(o->peer, ((mpi_ctx_t *)ctx)->win);
        *st =
            err == MPI_SUCCESS
                ? IPCP_OK
                : mpi_fail(err, o->kind == OP_PUT ? "a put" : "a get", o->peer);
        mpi_op_end(ctx, o);
        return 1;
    }
    if (err == MPI_SUCCESS && s.MPI_ERROR != MPI_SUCCESS &&
        s.MPI_ERROR != MPI_ERR_PENDING)
        err = s.MPI_ERROR;
    if (err != MPI_SUCCESS) {
        *st = mpi_fail(err, o->peer < 0 ? "a barrier" : "a transfer", o->peer);
        if (*r != MPI_REQUEST_NULL)
            MPI_Request_free(r);
    } else {
        *st = IPCP_OK;
        if (MPI_Get_count(&s, MPI_BYTE, &count) == MPI_SUCCESS && count > 0)
            *nbytes = (size_t)count;
    }
    mpi_op_end(ctx, op);
    return 1;
}

/* A receive is cancelled and waited for (MPI then writes no more into
 * its buffer).  A send that no receive took within 10 ms is left to MPI
 * (it may still read its buffer, which the caller keeps: MPI cannot
 * always cancel a send). */
static int mpi_cancel(void *ctx, void *op)
{
    mpi_op_t *o = op;
    int finalized = 0, flag = 0, ended = 1;
    MPI_Finalized(&finalized);
    if (o->kind != OP_P2P) { /* no cancel for RMA: it ends by itself */
        if (!finalized) {
            MPI_Wait(&o->r, MPI_STATUS_IGNORE);
            if (o->kind == OP_PUT)
                MPI_Win_flush(o->peer, ((mpi_ctx_t *)ctx)->win);
        }
        mpi_op_end(ctx, o);
        return 1;
    }
    if (!finalized && o->r != MPI_REQUEST_NULL && !o->send) {
        MPI_Cancel(&o->r);
        MPI_Wait(&o->r, MPI_STATUS_IGNORE);
    }
    double until = finalized ? 0 : MPI_Wtime() + 0.01;
    while (!finalized && o->r != MPI_REQUEST_NULL && !flag &&
           MPI_Wtime() < until)
        if (MPI_Test(&o->r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
    if (!finalized && o->r != MPI_REQUEST_NULL) {
        MPI_Request_free(&o->r);
        ended = 0;
    }
    mpi_op_end(ctx, o);
    return ended;
}

static ipcp_status_t mpi_ibarrier(void *ctx, void **op)
{
    mpi_ctx_t *c = ctx;
    mpi_op_t *o = mpi_op_new(c, 0, -1);
    if (!o)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for an MPI request");
    int err = MPI_Ibarrier(c->comm[0], &o->r);
    if (err != MPI_SUCCESS) {
        mpi_op_end(c, o);
        return mpi_fail(err, "a barrier", -1);
    }
    *op = o;
    return IPCP_OK;
}

static ipcp_status_t mpi_attach(void *ctx, void *buf, size_t len,
                                uint64_t *addr)
{
    mpi_ctx_t *c = ctx;
    MPI_Aint a;
    int err = MPI_Win_attach(c->win, buf, (MPI_Aint)len);
    if (err == MPI_SUCCESS && (err = MPI_Get_address(buf, &a)) != MPI_SUCCESS)
        MPI_Win_detach(c->win, buf);
    if (err != MPI_SUCCESS)
        return mpi_fail(err, "attaching a region for one-sided access", -1);
    *addr = (uint64_t)a;
    return IPCP_OK;
}

static void mpi_detach(void *ctx, void *buf)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Win_detach(((mpi_ctx_t *)ctx)->win, buf);
}

/* A put (OP_PUT) or a get of len bytes (at most IPCP_REMOTE_RMA_MAX) at
 * peer's address addr. */
static ipcp_status_t mpi_rma(mpi_ctx_t *c, int kind, void *buf, size_t len,
                             int peer, uint64_t addr, void **op)
{
    mpi_op_t *o = mpi_op_new(c, kind == OP_PUT, peer);
    if (!o)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "no memory for an MPI request");
    o->kind = kind;
    int n = (int)len,
        err = kind == OP_PUT ? MPI_Rput(buf, n, MPI_BYTE, peer, (MPI_Aint)addr,
                                        n, MPI_BYTE, c->win, &o->r)
                             : MPI_Rget(buf, n, MPI_BYTE, peer, (MPI_Aint)addr,
                                        n, MPI_BYTE, c->win, &o->r);
    if (err != MPI_SUCCESS) {
        mpi_op_end(c, o);
        return mpi_fail(err, kind == OP_PUT ? "a put" : "a get", peer);
    }
    *op = o;
    return IPCP_OK;
}

static ipcp_status_t mpi_iput(void *ctx, const void *src, size_t len, int peer,
                              uint64_t addr, void **op)
{
    return mpi_rma(ctx, OP_PUT, (void *)src, len, peer, addr, op);
}

static ipcp_status_t mpi_iget(void *ctx, void *dst, size_t len, int peer,
                              uint64_t addr, void **op)
{
    return mpi_rma(ctx, OP_GET, dst, len, peer, addr, op);
}

static void mpi_close(void *ctx)
{
    mpi_ctx_t *c = ctx;
    int finalized = 0;
    MPI_Finalized(&finalized);
    /* Collective, as ipcp_finalize of such a job is; where a rank's
     * ipcp_init_mpi failed no rank frees it (one would wait for the
     * others in MPI_Win_free while they wait for it elsewhere). */
    if (!finalized && c->win != MPI_WIN_NULL && c->joined) {
        MPI_Win_unlock_all(c->win);
        MPI_Win_free(&c->win);
    }
    for (int i = 0; i < 2 && !finalized; i++)
        MPI_Comm_free(&c->comm[i]);
    while (c->spare) {
        mpi_op_t *o = c->spare;
        c->spare = o->next;
        free(o);
    }
    free(c);
}

static const ipcp__remote_ops_t mpi_ops = {
    .name = "MPI",
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .improbe = mpi_improbe,
    .imrecv = mpi_imrecv,
    .ibarrier = mpi_ibarrier,
    .attach = mpi_attach,
    .detach = mpi_detach,
    .iput = mpi_iput,
    .iget = mpi_iget,
    .test = mpi_test,
    .cancel = mpi_cancel,
    .close = mpi_close,
};

int ipcp__mpi_device_mem(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support() == 1;
#else
    return 0;
#endif
}

/* Whether every rank of comm wants one-sided access (IPCPIPE_REMOTE_RMA
 * not off): the window is made by all of them or by none.  Without it (or
 * where MPI refuses one), puts and gets with other nodes are refused and
 * the rest works. */
static int mpi_rma_wanted(MPI_Comm comm)
{
    const char *rma = getenv("IPCPIPE_REMOTE_RMA");
    int want = !rma || strcmp(rma, "off") != 0, all = 0;
    return MPI_Allreduce(&want, &all, 1, MPI_INT, MPI_MIN, comm) ==
               MPI_SUCCESS &&
           all;
}

/* The window of one-sided access where every rank wants one and every
 * rank made one (else none has it: see mpi_rma_wanted).  Only the unified
 * memory model: ipcpipe calls no MPI_Win_sync, so under the separate one
 * a rank might not see what others put into its memory. */
static void mpi_window(mpi_ctx_t *c)
{
    int err = MPI_SUCCESS, ok = 0, all = 0, flag = 0, *model = NULL;
    c->win = MPI_WIN_NULL;
    if (!mpi_rma_wanted(c->comm[0]))
        return;
    if ((err = MPI_Win_create_dynamic(MPI_INFO_NULL, c->comm[0], &c->win)) ==
            MPI_SUCCESS &&
        (err = MPI_Win_set_errhandler(c->win, MPI_ERRORS_RETURN)) ==
            MPI_SUCCESS &&
        (err = MPI_Win_get_attr(c->win, MPI_WIN_MODEL, &model, &flag)) ==
            MPI_SUCCESS &&
        flag && *model == MPI_WIN_UNIFIED &&
        (err = MPI_Win_lock_all(MPI_MODE_NOCHECK, c->win)) == MPI_SUCCESS)
        ok = 1;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->comm[0]) ==
            MPI_SUCCESS &&
        all)
        return;
    if (ok)
        MPI_Win_unlock_all(c->win);
    if (c->win != MPI_WIN_NULL)
        MPI_Win_free(&c->win);
    c->win = MPI_WIN_NULL;
    if (err != MPI_SUCCESS)
        mpi_fail(err, "a window for puts and gets (they are refused)", -1);
}

void ipcp__mpi_joined(void *ctx)
{
    ((mpi_ctx_t *)ctx)->joined = 1;
}

ipcp_status_t ipcp__mpi_remote(MPI_Comm comm, const ipcp__remote_ops_t **ops,
                               void **ctx)
{
    /* Every rank speaks one version of the messages, or none starts (a
     * rank of another version would read them wrong, not fail). */
    int v[2] = {IPCP_REMOTE_WIRE, -IPCP_REMOTE_WIRE}, all[2] = {0, 0};
    if (MPI_Allreduce(v, all, 2, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_SYSTEM,
                          "ipcp_init_mpi: the ranks' ipcpipe versions could "
                          "not be compared (MPI_Allreduce failed)");
    if (all[0] != -all[1])
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_UNSUPPORTED,
                          "ipcp_init_mpi: the job's ranks run ipcpipe builds "
                          "whose messages to other nodes differ (versions %d "
                          "to %d, this rank's %d): every rank needs the same "
                          "ipcpipe",
                          -all[1], all[0], IPCP_REMOTE_WIRE);
    mpi_ctx_t *c = calloc(1, sizeof(*c));
    int *ub = NULL, flag = 0;
    if (!c)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_NOMEM,
                          "no memory for the MPI transport");
    for (int i = 0; i < 2; i++) {
        if (MPI_Comm_dup(comm, &c->comm[i]) != MPI_SUCCESS) {
            if (i)
                MPI_Comm_free(&c->comm[0]);
            free(c);
            return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_INIT, IPCP_ERR_SYSTEM,
                              "ipcp_init_mpi: MPI_Comm_dup failed");
        }
        MPI_Comm_set_errhandler(c->comm[i], MPI_ERRORS_RETURN);
    }
    /* One-sided access, where all want it (mpi_rma_wanted). */
    mpi_window(c);
    c->tag_ub = 32767; /* the least MPI promises */
    if (MPI_Comm_get_attr(c->comm[0], MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS &&
        flag && ub)
        c->tag_ub = *ub;
    c->ops = mpi_ops;
    if (c->win == MPI_WIN_NULL) {
        c->ops.attach = NULL;
        c->ops.detach = NULL;
        c->ops.iput = NULL;
        c->ops.iget = NULL;
    }
    c->ops.tag_max = c->tag_ub;
    c->ops.device_mem = ipcp__mpi_device_mem();
    int level = MPI_THREAD_SINGLE;
    c->ops.threads =
        MPI_Query_thread(&level) == MPI_SUCCESS && level == MPI_THREAD_MULTIPLE;
    *ops = &c->ops;
    *ctx = c;
    return IPCP_OK;
}
