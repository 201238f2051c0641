/* Timeline traces (IPCPIPE_TRACE=file.json): Chrome/Perfetto trace events,
 * one process per rank, one track per peer, direction and queue, one slice
 * per chunk copy (bytes and path in its arguments) and per flag wait, and
 * one per transfer on the rank's request track.  A transfer the receiver
 * copies itself has all its copies in the receiver, on the queues they ran
 * on (the sender's GPU's for the direct part and for the staged part's
 * copies out of its buffer, marked "stage": "out"; the receive buffer's
 * for the copies in, "stage": "in").
 *
 * Times come from the queues themselves (backend stamp operations: the
 * host's clock, or CUDA events converted to it), all CLOCK_MONOTONIC, which
 * is one clock for every process of the machine: the ranks' files merge
 * without any alignment.  Each rank writes its part before it says goodbye
 * at finalize; rank 0, which finalizes last in effect (it waits for every
 * goodbye), merges the parts into the file and prints the overlap ratio:
 * the time spent copying, summed over tracks, over the wall time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/time.h"
#include "engine/engine.h"

#define IPCP_TRACE_MAX_EVENTS (1u << 20)

enum { IPCP_TEV_COPY = 1, IPCP_TEV_WAIT, IPCP_TEV_XFER };

struct ipcp__trace_ev {
    uint64_t ts, dur;
    uint64_t bytes;
    uint64_t tm[IPCP_TM_N]; /* a transfer's protocol marks */
    uint32_t tid;
    uint16_t kind;
    uint16_t path;
    int32_t peer;
    int32_t rx;    /* a transfer: 1 when this side receives */
    int32_t stage; /* a copy: half of a driven staged part (IPCP_STAGE_*) */
};

/* Track ids: the peer, the direction, the queue set and the queue; the
 * rank's request track is 0. */
static uint32_t ipcp__trace_tid(int peer, int rx, int qset, int q)
{
    return 1 + (((uint32_t)peer << 12) | ((uint32_t)rx << 11) |
                ((uint32_t)qset << 4) | (uint32_t)q);
}

void ipcp__trace_open(ipcp_comm_t *comm)
{
    struct stat sb;
    if (!comm->cfg->trace[0])
        return;
    /* The parts go beside it and the merged file replaces it: a device,
     * a FIFO or a directory there would swallow, block or refuse them. */
    if (stat(comm->cfg->trace, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        IPCP_WARN(IPCP_SUB_ENGINE,
                  "IPCPIPE_TRACE=%s is not a regular file: "
                  "no trace is written",
                  comm->cfg->trace);
        return;
    }
    comm->trace_on = 1;
}

/* Closes a file the trace wrote; 0, or -1 after a warning naming it. */
static int ipcp__trace_fclose(FILE *f, const char *path)
{
    int err = ferror(f) ? EIO : 0;
    if (fclose(f) != 0 && !err)
        err = errno;
    if (!err)
        return 0;
    IPCP_WARN(IPCP_SUB_ENGINE, "trace: writing %s failed: %s", path,
              strerror(err));
    return -1;
}

static void ipcp__trace_add(ipcp_comm_t *comm, const ipcp__trace_ev_t *e)
{
    if (comm->trace_n == comm->trace_cap) {
        size_t cap = comm->trace_cap ? 2 * comm->trace_cap : 4096;
        ipcp__trace_ev_t *n;
        if (cap > IPCP_TRACE_MAX_EVENTS ||
            !(n = realloc(comm->trace_ev, cap * sizeof(*n)))) {
            comm->trace_dropped++;
            return;
        }
        comm->trace_ev = n;
        comm->trace_cap = cap;
    }
    comm->trace_ev[comm->trace_n++] = *e;
}

/* A transfer's slice on the rank's request track, from ts to now, with
 * its protocol marks. */
static void ipcp__trace_span(ipcp_comm_t *comm, int peer,
                             const ipcp_request_t *req, int rx, int path,
                             uint64_t ts)
{
    ipcp__trace_ev_t e;
    memset(&e, 0, sizeof(e));
    e.kind = IPCP_TEV_XFER;
    e.path = (uint16_t)path;
    e.peer = peer;
    e.rx = rx;
    e.ts = ts;
    e.dur = ipcp__now_ns() - ts;
    e.bytes = req->len;
    memcpy(e.tm, req->tm, sizeof(e.tm));
    ipcp__trace_add(comm, &e);
}

/* ---- Stamps of a transfer ------------------------------------------------ */

/* A protocol mark of a request (IPCP_TM_*); no-op when tracing is off. */
void ipcp__trace_mark(ipcp_request_t *req, int mark)
{
    if (req->comm->trace_on)
        req->tm[mark] = ipcp__now_ns();
}

/* Room for n pieces (chunks) of one transfer; no-op when tracing is off,
 * and when only the marks are wanted (IPCPIPE_TRACE_COPIES=off: each stamp
 * is a timing operation in a queue and a driver call to enqueue it). */
void ipcp__trace_prepare(ipcp_comm_t *comm, ipcp__xfer_t *x, size_t n)
{
    x->stamps = NULL;
    x->nstamps = 0;
    if (!comm->trace_on)
        return;
    x->t_post = ipcp__now_ns();
    if (n && comm->cfg->trace_copies &&
        (x->stamps = calloc(n, sizeof(*x->stamps))))
        x->nstamps = n;
}

/* Stamps before and after piece i's copy on queue qi of qs; after the
 * transfer's first copy, its IPCP_TM_COPY mark. */
void ipcp__trace_piece(ipcp__xfer_t *x, size_t i, ipcp__qset_t *qs, int qi,
                       uint64_t bytes, int before)
{
    if (!before && x->comm->trace_on && x->req && !x->req->tm[IPCP_TM_COPY])
        ipcp__trace_mark(x->req, IPCP_TM_COPY);
    if (i >= x->nstamps || !qs->ops->stamp)
        return;
    ipcp__stamp_t *s = &x->stamps[i];
    ipcp__mem_attr_t sa = {.type = qs->ops->type, .device = qs->device};
    s->q = (uint16_t)qi;
    s->qset = (uint8_t)ipcp__qset_index(&sa);
    s->bytes = bytes;
    qs->ops->stamp(qs->q[qi], before ? &s->a : &s->b);
}

void ipcp__trace_piece_stage(ipcp__xfer_t *x, size_t i, int half)
{
    if (i < x->nstamps)
        x->stamps[i].stage = (uint8_t)half;
}

/* The end of the last piece on track tid, in a table of the tracks of one
 * transfer (two queue sets at most: a driven transfer's); starts at the
 * transfer's post. */
typedef struct {
    uint32_t tid[2 * IPCP_MAX_QUEUES];
    uint64_t end[2 * IPCP_MAX_QUEUES];
    unsigned n;
} ipcp__trace_prev_t;

static uint64_t *ipcp__trace_prev(ipcp__trace_prev_t *p, uint32_t tid,
                                  uint64_t t_post)
{
    for (unsigned k = 0; k < p->n; k++)
        if (p->tid[k] == tid)
            return &p->end[k];
    if (p->n == 2 * IPCP_MAX_QUEUES)
        return NULL;
    p->tid[p->n] = tid;
    p->end[p->n] = t_post;
    return &p->end[p->n++];
}

/* A finished transfer: its stamps become slices.  Waits run from the end of
 * the queue's previous piece of this transfer (or from when it was
 * posted) to the start of the copy. */
void ipcp__trace_xfer(ipcp_comm_t *comm, ipcp__xfer_t *x, int rx, int path)
{
    ipcp__trace_prev_t prev;
    ipcp__trace_ev_t e;
    if (!comm->trace_on || !x->req)
        goto out;
    prev.n = 0;
    memset(&e, 0, sizeof(e));
    e.peer = x->peer->rank;
    for (size_t i = 0; i < x->nstamps; i++) {
        ipcp__stamp_t *s = &x->stamps[i];
        if (!s->a || !s->b || s->q >= IPCP_MAX_QUEUES)
            continue;
        e.tid = ipcp__trace_tid(x->peer->rank, rx, s->qset, s->q);
        uint64_t *p = ipcp__trace_prev(&prev, e.tid, x->t_post);
        if (p && s->a > *p) {
            e.kind = IPCP_TEV_WAIT;
            e.path = (uint16_t)path;
            e.stage = 0;
            e.ts = *p;
            e.dur = s->a - *p;
            e.bytes = 0;
            ipcp__trace_add(comm, &e);
        }
        e.kind = IPCP_TEV_COPY;
        /* A striped transfer's chunks through the ring are staged copies
         * (trace_stats.py sets the two parts apart by this). */
        e.path = (uint16_t)(path == IPCP_PATH_STRIPED && i >= x->tbase
                                ? IPCP_PATH_STAGED
                                : path);
        e.stage = s->stage;
        e.ts = s->a;
        e.dur = s->b > s->a ? s->b - s->a : 0;
        e.bytes = s->bytes;
        ipcp__trace_add(comm, &e);
        if (p)
            *p = s->b;
    }
    ipcp__trace_span(comm, x->peer->rank, x->req, rx, path, x->t_post);
out:
    free(x->stamps);
    x->stamps = NULL;
    x->nstamps = 0;
}

void ipcp__trace_send_driven(ipcp_comm_t *comm, ipcp__peer_t *peer,
                             ipcp_request_t *req, int path)
{
    if (comm->trace_on && req->tm[IPCP_TM_CALL])
        ipcp__trace_span(comm, peer->rank, req, 0, path, req->tm[IPCP_TM_CALL]);
}

/* ---- Files --------------------------------------------------------------- */

static int ipcp__tev_cmp(const void *a, const void *b)
{
    const ipcp__trace_ev_t *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static const char *ipcp__tev_name(int kind)
{
    return kind == IPCP_TEV_COPY   ? "copy"
           : kind == IPCP_TEV_WAIT ? "wait"
                                   : "transfer";
}

static void ipcp__trace_names(ipcp_comm_t *comm, FILE *f)
{
    fprintf(f,
            "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,"
            "\"tid\":0,\"args\":{\"name\":\"rank %d\"}},\n",
            comm->rank, comm->rank);
    uint32_t last = UINT32_MAX;
    for (size_t i = 0; i < comm->trace_n; i++) {
        uint32_t t = comm->trace_ev[i].tid;
        if (t == last)
            continue;
        last = t;
        if (t == 0) {
            fprintf(f,
                    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,"
                    "\"tid\":0,\"args\":{\"name\":\"requests\"}},\n",
                    comm->rank);
            continue;
        }
        uint32_t v = t - 1;
        int qset = (int)((v >> 4) & 0x7f);
        char what[32] = "host";
        if (qset)
            snprintf(what, sizeof(what), "cuda device %d", qset - 1);
        fprintf(f,
                "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,"
                "\"tid\":%u,\"args\":{\"name\":\"%s rank %u, %s "
                "queue %u\"}},\n",
                comm->rank, t, (v >> 11) & 1 ? "from" : "to", v >> 12, what,
                v & 0xf);
    }
}

/* This rank's events, one JSON object a line, sorted per track. */
static void ipcp__trace_write_part(ipcp_comm_t *comm, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        IPCP_WARN(IPCP_SUB_ENGINE, "trace: cannot write %s: %s", path,
                  strerror(errno));
        return;
    }
    qsort(comm->trace_ev, comm->trace_n, sizeof(*comm->trace_ev),
          ipcp__tev_cmp);
    ipcp__trace_names(comm, f);
    static const char *const marks[IPCP_TM_N] = {
        [IPCP_TM_CALL] = "call", [IPCP_TM_START] = "start",
        [IPCP_TM_MEET] = "meet", [IPCP_TM_CTS] = "cts",
        [IPCP_TM_COPY] = "copy", [IPCP_TM_ENQ] = "enq",
        [IPCP_TM_DONE] = "done"};
    for (size_t i = 0; i < comm->trace_n; i++) {
        const ipcp__trace_ev_t *e = &comm->trace_ev[i];
        fprintf(f,
                "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,"
                "\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"bytes\":"
                "%llu,\"path\":\"%s\",\"peer\":%d",
                ipcp__tev_name(e->kind), ipcp__tev_name(e->kind), comm->rank,
                e->tid, (double)e->ts / 1e3, (double)e->dur / 1e3,
                (unsigned long long)e->bytes,
                ipcp_path_name((ipcp_path_t)e->path), e->peer);
        /* Marks in the trace's time unit (us), on the same clock as ts. */
        if (e->kind == IPCP_TEV_XFER)
            fprintf(f, ",\"side\":\"%s\"", e->rx ? "recv" : "send");
        if (e->kind == IPCP_TEV_COPY && e->stage)
            fprintf(f, ",\"stage\":\"%s\"",
                    e->stage == IPCP_STAGE_OUT ? "out" : "in");
        for (int m = 0; m < IPCP_TM_N; m++)
            if (e->tm[m])
                fprintf(f, ",\"%s\":%.3f", marks[m], (double)e->tm[m] / 1e3);
        fputs("}},\n", f);
    }
    if (comm->trace_dropped)
        IPCP_WARN(IPCP_SUB_ENGINE, "trace: %zu events dropped (at most %u)",
                  comm->trace_dropped, IPCP_TRACE_MAX_EVENTS);
    ipcp__trace_fclose(f, path);
}

static void ipcp__part_name(const ipcp_comm_t *comm, int rank, char *buf,
                            size_t len)
{
    snprintf(buf, len, "%s.%d.part", comm->cfg->trace, rank);
}

/* Before goodbye: every rank writes its part. */
void ipcp__trace_flush(ipcp_comm_t *comm)
{
    char part[IPCP_DIR_MAX + 32];
    if (!comm->trace_on)
        return;
    ipcp__part_name(comm, comm->rank, part, sizeof(part));
    ipcp__trace_write_part(comm, part);
}

/* Copies one part into out, summing copy time and the span of copies. */
static void ipcp__trace_merge_part(FILE *in, FILE *out, double *copy_us,
                                   double *t0, double *t1, size_t *n)
{
    char line[1024];
    while (fgets(line, sizeof(line), in)) {
        double ts, dur;
        const char *p;
        if (strstr(line, "\"name\":\"copy\"") &&
            (p = strstr(line, "\"ts\":")) &&
            sscanf(p, "\"ts\":%lf,\"dur\":%lf", &ts, &dur) == 2) {
            *copy_us += dur;
            *t0 = ts < *t0 ? ts : *t0;
            *t1 = ts + dur > *t1 ? ts + dur : *t1;
        }
        fputs(line, out);
        (*n)++;
    }
}

/* Rank 0, after every peer said goodbye: one file from all parts. */
void ipcp__trace_merge(ipcp_comm_t *comm)
{
    char part[IPCP_DIR_MAX + 32];
    double copy_us = 0, t0 = 1e300, t1 = 0;
    size_t n = 0;
    if (!comm->trace_on || comm->rank != 0)
        return;
    FILE *out = fopen(comm->cfg->trace, "w");
    if (!out) {
        IPCP_WARN(IPCP_SUB_ENGINE, "trace: cannot write %s: %s",
                  comm->cfg->trace, strerror(errno));
        return;
    }
    fputs("[\n", out);
    for (int r = 0; r < comm->size; r++) {
        ipcp__part_name(comm, r, part, sizeof(part));
        FILE *in = fopen(part, "r");
        if (!in) {
            IPCP_WARN(IPCP_SUB_ENGINE, "trace: rank %d left no part (%s)", r,
                      part);
            continue;
        }
        ipcp__trace_merge_part(in, out, &copy_us, &t0, &t1, &n);
        fclose(in);
        unlink(part);
    }
    double wall = t1 > t0 ? t1 - t0 : 0;
    double ratio = wall > 0 ? copy_us / wall : 0;
    fprintf(out,
            "{\"ph\":\"M\",\"name\":\"ipcpipe_summary\",\"pid\":0,"
            "\"tid\":0,\"args\":{\"copy_us\":%.3f,\"wall_us\":%.3f,"
            "\"overlap\":%.3f,\"ranks\":%d}}\n]\n",
            copy_us, wall, ratio, comm->size);
    if (ipcp__trace_fclose(out, comm->cfg->trace) != 0)
        return;
    fprintf(stderr,
            "ipcpipe: trace of %d ranks in %s (%zu events): copies "
            "%.1f us over %.1f us of wall time, overlap %.2f\n",
            comm->size, comm->cfg->trace, n, copy_us, wall, ratio);
}

void ipcp__trace_close(ipcp_comm_t *comm)
{
    free(comm->trace_ev);
    comm->trace_ev = NULL;
    comm->trace_n = comm->trace_cap = 0;
}
