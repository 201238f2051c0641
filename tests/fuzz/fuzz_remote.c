/* Fuzzes what a receive reads from a rank on another node
 * (engine/remote_xfer.c): the messages a peer's transport delivers on
 * channel 0 (a short message's bytes alone, or a header) and channel 1
 * (the pieces a header announced), into a receive of host memory through
 * the public calls of a one-rank communicator joined to a job of two
 * (ipcp__comm_remote).  The transport here delivers the input's messages
 * as MPI would (by channel and tag, in order; one longer than its receive
 * fills it and fails it) and fails any receive nothing is left for, so
 * that every input ends.  Checked: the receive ends; one that succeeds
 * wrote nothing past its bytes, one cut short (IPCP_ERR_TRUNCATED) wrote
 * nothing at all.
 *
 * Input: a mode byte (bits 0-1: the receive's length, 200 B, 20000 B
 * (one that asks its message's length first, where bit 2 gives the
 * transport a probe), 70000 B (in place) or 300000 B; bit 2: the
 * transport can probe), then messages, each: a byte (bit 0: channel 1;
 * bits 1-7: its tag, the receive's tag for channel 0 being 1), three
 * bytes of length (little endian, up to 1 MiB), a byte (bit 0: the bytes
 * follow in the input; else every byte is the next one's value). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"
#include "engine/remote.h"
#include "engine/remote_xfer.h"
#include "fuzz_common.h"
#include "ipcpipe.h"

enum { FZ_MSGS = 64, FZ_TAG = 1, FZ_MAX = 1 << 20 };

typedef struct fz_msg {
    int chan, tag, taken;
    size_t len;
    unsigned char *bytes;
} fz_msg_t;

typedef struct fz_op {
    struct fz_op *next;
    ipcp_status_t st;
    size_t nbytes;
} fz_op_t;

static fz_msg_t fz_msgs[FZ_MSGS];
static int fz_n;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An operation, ended as it is posted (the input's messages are all
 * there before the receive starts). */
static ipcp_status_t fz_op(ipcp_status_t st, size_t nbytes, void **op)
{
    fz_op_t *o = malloc(sizeof(*o));
    if (!o)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_API, IPCP_ERR_NOMEM,
                          "fuzz: no memory");
    o->st = st;
    o->nbytes = nbytes;
    *op = o;
    return IPCP_OK;
}

/* The first message of chan and tag not yet taken, or NULL. */
static fz_msg_t *fz_find(int chan, int peer, int tag)
{
    for (int i = 0; peer == 0 && i < fz_n; i++)
        if (!fz_msgs[i].taken && fz_msgs[i].chan == chan &&
            fz_msgs[i].tag == tag)
            return &fz_msgs[i];
    return NULL;
}

static ipcp_status_t fz_take(fz_msg_t *m, void *buf, size_t n, void **op)
{
    m->taken = 1;
    memcpy(buf, m->bytes, m->len < n ? m->len : n);
    if (m->len > n)
        return fz_op(IPCP_ERR_TRUNCATED, n, op);
    return fz_op(IPCP_OK, m->len, op);
}

static ipcp_status_t fz_isend(void *ctx, int chan, const void *buf, size_t n,
                              int peer, int tag, void **op)
{
    (void)ctx, (void)chan, (void)buf, (void)peer, (void)tag;
    return fz_op(IPCP_OK, n, op);
}

static ipcp_status_t fz_irecv(void *ctx, int chan, void *buf, size_t n,
                              int peer, int tag, void **op)
{
    (void)ctx;
    fz_msg_t *m = fz_find(chan, peer, tag);
    return m ? fz_take(m, buf, n, op) : fz_op(IPCP_ERR_PEER_LOST, 0, op);
}

static int fz_improbe(void *ctx, int chan, int peer, int tag, size_t *n,
                      void **msg)
{
    (void)ctx;
    fz_msg_t *m = fz_find(chan, peer, tag);
    if (!m) {
        ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, IPCP_ERR_PEER_LOST,
                   "fuzz: the peer sent nothing more");
        return -1;
    }
    *n = m->len;
    *msg = m;
    return 1;
}

static ipcp_status_t fz_imrecv(void *ctx, void *msg, void *buf, size_t n,
                               void **op)
{
    (void)ctx;
    return fz_take(msg, buf, n, op);
}

static ipcp_status_t fz_ibarrier(void *ctx, void **op)
{
    (void)ctx;
    return fz_op(IPCP_OK, 0, op);
}

static int fz_test(void *ctx, void *op, ipcp_status_t *st, size_t *nbytes)
{
    fz_op_t *o = op;
    (void)ctx;
    *st = o->st;
    *nbytes = o->nbytes;
    if (o->st != IPCP_OK)
        ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_API, o->st,
                   "fuzz: the transport failed an operation");
    free(o);
    return 1;
}

static int fz_cancel(void *ctx, void *op)
{
    (void)ctx;
    free(op);
    return 1;
}

static void fz_close(void *ctx)
{
    (void)ctx;
}

/* [0]: no probe; [1]: the same with improbe and imrecv (made in
 * LLVMFuzzerInitialize). */
static ipcp__remote_ops_t fz_ops[2] = {
    {.name = "fuzz",
     .tag_max = 1000,
     .isend = fz_isend,
     .irecv = fz_irecv,
     .ibarrier = fz_ibarrier,
     .test = fz_test,
     .cancel = fz_cancel,
     .close = fz_close},
};

/* Rank 1 of a job of two, rank 0 on another node (through fz_ops[probe]). */
static ipcp_comm_t *fz_comm(int probe)
{
    static ipcp_comm_t *comm[2];
    if (comm[probe])
        return comm[probe];
    char job[64];
    ipcp_comm_params_t p;
    int local[2] = {-1, 0};
    snprintf(job, sizeof(job), "fuzzremote-%ld-%d", (long)getpid(), probe);
    ipcp_comm_params_init(&p);
    p.rank = 0;
    p.size = 1;
    p.job_id = job;
    if (ipcp_init(&p, &comm[probe]) != IPCP_OK ||
        ipcp__comm_remote(comm[probe], "fuzzjob", 1, 2, local, &fz_ops[probe],
                          NULL) != IPCP_OK) {
        fprintf(stderr, "fuzz_remote: no communicator: %s\n",
                ipcp_last_error());
        abort();
    }
    return comm[probe];
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet();
    fz_ops[1] = fz_ops[0];
    fz_ops[1].improbe = fz_improbe;
    fz_ops[1].imrecv = fz_imrecv;
    return 0;
}

/* The input's messages into fz_msgs. */
static void fz_parse(fuzz_in_t *in)
{
    for (fz_n = 0; fz_n < FZ_MSGS && in->n; fz_n++) {
        fz_msg_t *m = &fz_msgs[fz_n];
        uint8_t b = fuzz_u8(in);
        size_t len = fuzz_u16(in), got = 0;
        len |= (size_t)fuzz_u8(in) << 16;
        len = len < FZ_MAX ? len : FZ_MAX;
        int literal = fuzz_u8(in) & 1;
        m->chan = b & 1;
        m->tag = b >> 1;
        m->taken = 0;
        m->bytes = malloc(len ? len : 1);
        if (!m->bytes)
            abort();
        if (literal) {
            const uint8_t *p = fuzz_bytes(in, len, &got);
            memcpy(m->bytes, p, got);
            len = got;
        } else {
            memset(m->bytes, fuzz_u8(in), len);
        }
        m->len = len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t caps[4] = {200, 20000, 70000, 300000};
    fuzz_in_t in = {data, size};
    uint8_t mode = fuzz_u8(&in);
    size_t cap = caps[mode & 3];
    ipcp_comm_t *c = fz_comm(mode >> 2 & 1);
    fz_parse(&in);
    unsigned char *buf = malloc(cap);
    if (!buf)
        abort();
    memset(buf, 0x5a, cap);
    ipcp_request_t *r = NULL;
    ipcp_xfer_info_t info;
    int done = 0;
    ipcp_status_t st = ipcp_irecv(c, buf, cap, 0, FZ_TAG, &r);
    if (st == IPCP_OK)
        st = ipcp_wait_for(r, 10.0, &done, &info);
    if (st == IPCP_IN_PROGRESS || (r && !done && st == IPCP_OK)) {
        fprintf(stderr, "fuzz_remote: the receive did not end\n");
        abort();
    }
    size_t from = 0;
    if (st == IPCP_OK) {
        if (info.nbytes > cap)
            abort();
        from = info.nbytes;
    }
    if (st == IPCP_OK || st == IPCP_ERR_TRUNCATED)
        for (size_t i = from; i < cap; i++)
            if (buf[i] != 0x5a) {
                fprintf(stderr,
                        "fuzz_remote: byte %zu of %zu written (status "
                        "%d, %zu bytes)\n",
                        i, cap, (int)st, from);
                abort();
            }
    free(buf);
    /* What the receive left running (a message drained) ends now, not
     * on the next input's messages. */
    for (int i = 0; i < 4; i++) {
        pthread_mutex_lock(&ipcp__remote_lock);
        ipcp__rx_progress(NULL);
        pthread_mutex_unlock(&ipcp__remote_lock);
    }
    for (int i = 0; i < fz_n; i++)
        free(fz_msgs[i].bytes);
    fz_n = 0;
    return 0;
}
