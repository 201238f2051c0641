/* The table of IPCPIPE_* settings: name, default, parser, doc.  Every other
 * file reads settings through ipcp__config_get(). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "status.h"
#include "util.h"

typedef enum {
    IPCP_SET_INT,    /* long in [min, max]; "auto" = 0 when allowed */
    IPCP_SET_SIZE,   /* bytes with optional K/M/G suffix; "auto" = 0 */
    IPCP_SET_DOUBLE, /* in [min, max] */
    IPCP_SET_STR,    /* copied, at most strcap-1 bytes */
    IPCP_SET_ENUM,   /* one of choices; value = index */
    IPCP_SET_SUBSYS, /* "all" or comma list of subsystem names */
    IPCP_SET_SHARE,  /* "off" (-1), "auto" (0) or a number in [min, max] */
    IPCP_SET_FAULT,  /* "stage:action[:n]" (common/fault.h) */
} ipcp__set_type_t;

typedef struct ipcp__setting {
    const char *name;
    ipcp__set_type_t type;
    const char *deflt;
    const char *doc;
    size_t offset;
    double min, max;
    int allow_auto;
    const char *const *choices;
} ipcp__setting_t;

static const char *const ipcp__path_choices[] = {"auto", "direct", "staged",
                                                 "bounce", NULL};
static const char *const ipcp__autooff_choices[] = {"auto", "off", NULL};
static const char *const ipcp__notify_choices[] = {"event", "callback", NULL};
static const char *const ipcp__offon_choices[] = {"off", "on", NULL};
static const char *const ipcp__copies_choices[] = {"auto", "thread", "caller",
                                                   NULL};
static const char *const ipcp__drive_choices[] = {"auto", "off", "on", NULL};
static const char *const ipcp__level_choices[] = {
    "none", "error", "warn", "info", "debug", "trace", NULL};

#define IPCP_OFF(field) offsetof(ipcp__config_t, field)

static const ipcp__setting_t ipcp__settings[] = {
    {"IPCPIPE_RANK", IPCP_SET_INT, "",
     "rank of this process (else taken from "
     "mpirun, srun or torchrun variables)",
     IPCP_OFF(rank), 0, 1 << 20, 0, NULL},
    {"IPCPIPE_SIZE", IPCP_SET_INT, "", "number of ranks in the job",
     IPCP_OFF(size), 1, 1 << 20, 0, NULL},
    {"IPCPIPE_JOB", IPCP_SET_STR, "",
     "job identifier shared by all ranks "
     "(else from the launcher, else the parent pid)",
     IPCP_OFF(job), 0, 0, 0, NULL},
    {"IPCPIPE_NODE", IPCP_SET_STR, "",
     "the node this rank counts as on: under ipcp_init_mpi ranks with "
     "different values are on different nodes and reach each other "
     "through MPI (so one machine can run a job of several nodes; unset: "
     "MPI's split of the ranks that share memory); ipcp_init, which joins "
     "the ranks of one node, fails on every rank once they met when their "
     "values differ (unset counts as empty)",
     IPCP_OFF(node), 0, 0, 0, NULL},
    {"IPCPIPE_REMOTE_CHUNK", IPCP_SET_SIZE, "4M",
     "piece size of transfers with ranks on other nodes (ipcp_init_mpi): "
     "a message longer than a short one (IPCPIPE_REMOTE_INLINE; 64 KiB "
     "for staged device memory) goes as pieces of this size, and "
     "device memory "
     "is staged through pinned host slots of at most this size, up to 4 per "
     "transfer",
     IPCP_OFF(remote_chunk), 4096, 64.0 * 1024 * 1024, 0, NULL},
    {"IPCPIPE_REMOTE_INLINE", IPCP_SET_SIZE, "64K",
     "the most bytes of host memory a message to a rank on another node "
     "(ipcp_init_mpi) sends as its bytes alone, one contiguous message "
     "from the caller's buffer (as MPI sends its own, which an MPI may "
     "move with a single copy); a longer one goes as a header, then its "
     "bytes as messages of their own.  Up to 232 bytes the bytes are "
     "copied behind a header whatever this says; staged device memory's "
     "short messages go through a pinned slot, bytes alone, up to 64 KiB.  "
     "Receivers take every form, whatever their own setting",
     IPCP_OFF(remote_inline), 4096, 64.0 * 1024, 0, NULL},
    {"IPCPIPE_REMOTE_RMA", IPCP_SET_ENUM, "on",
     "puts and gets with ranks on other nodes (ipcp_init_mpi) through an "
     "MPI window made at ipcp_init_mpi (on, where every rank of the "
     "communicator says on), or none (off: they are refused); Open MPI 4.1 "
     "warns when windows of disjoint communicators are made at once on one "
     "host (communicators split from one)",
     IPCP_OFF(remote_rma), 0, 0, 0, ipcp__offon_choices},
    {"IPCPIPE_REMOTE_COPIES", IPCP_SET_ENUM, "auto",
     "who makes the driver calls of device memory's copies to and from "
     "pinned slots in transfers with ranks on other nodes: thread (the CUDA "
     "backend's event thread, so that the caller's thread stays with MPI; "
     "it exists with IPCPIPE_CUDA_NOTIFY=event only, else caller), caller "
     "(the thread that moves the transfer on), or auto (thread where the "
     "process may run on more than one CPU)",
     IPCP_OFF(remote_copies), 0, 0, 0, ipcp__copies_choices},
    {"IPCPIPE_TIMEOUT", IPCP_SET_DOUBLE, "60",
     "seconds any wait on another "
     "rank may last (rendezvous, barrier, finalize, a peer's death; a peer "
     "that stops answering while a request waits on it is declared lost "
     "after 3/4 of it)",
     IPCP_OFF(timeout_s), 0.001, 1e7, 0, NULL},
    {"IPCPIPE_DIR", IPCP_SET_STR, "",
     "base directory of the rendezvous "
     "sockets (default $XDG_RUNTIME_DIR, else $TMPDIR, else /tmp)",
     IPCP_OFF(dir), 0, 0, 0, NULL},
    {"IPCPIPE_PATH", IPCP_SET_ENUM, "auto",
     "path for transfers this rank "
     "receives: auto, direct (into the mapped buffer), staged (shared ring) "
     "or bounce (a ring in device memory on the receiver's GPU)",
     IPCP_OFF(path), 0, 0, 0, ipcp__path_choices},
    {"IPCPIPE_CHUNK", IPCP_SET_SIZE, "auto",
     "slot size of the staged ring "
     "(auto: 1M for host memory, 16M when device memory is involved)",
     IPCP_OFF(chunk), 4096, 1024.0 * 1024 * 1024, 1, NULL},
    {"IPCPIPE_SLOTS", IPCP_SET_INT, "auto",
     "slots in the staged ring of each "
     "pair of ranks and direction (auto: 8 for host memory, 4 with device "
     "memory); a staged transfer uses one queue per IPCPIPE_SLOTS_PER_QUEUE "
     "slots",
     IPCP_OFF(slots), 2, 64, 1, NULL},
    {"IPCPIPE_SLOTS_PER_QUEUE", IPCP_SET_INT, "auto",
     "slots of the staged "
     "ring per copy queue of a staged transfer (the receiver's setting "
     "decides; auto: 4): a transfer spreads its chunks over IPCPIPE_SLOTS / "
     "this many queues, at most IPCPIPE_QUEUES",
     IPCP_OFF(slots_per_queue), 1, 64, 1, NULL},
    {"IPCPIPE_QUEUES", IPCP_SET_INT, "auto",
     "copy queues (host threads or CUDA "
     "streams) per peer and direction (auto: 2 on host, 4 with CUDA)",
     IPCP_OFF(queues), 1, 8, 1, NULL},
    {"IPCPIPE_PIECE", IPCP_SET_SIZE, "auto",
     "smallest piece a direct "
     "transfer is split into over the copy queues (the receiver's setting "
     "decides; auto: 256K for host memory, no split when device memory is "
     "involved)",
     IPCP_OFF(piece), 4096, 1024.0 * 1024 * 1024 * 1024, 1, NULL},
    {"IPCPIPE_STRIPE", IPCP_SET_SHARE, "auto",
     "split transfers between two "
     "GPUs over NVLink and the staged path at once: off, auto (shares by "
     "size, one way and both ways, and the smallest size that gains, "
     "measured once per pair of GPUs and kept in IPCPIPE_STRIPE_CACHE) or "
     "the staged share of every direct transfer between two GPUs (0.1 = "
     "10%; the receiver's setting decides)",
     IPCP_OFF(stripe), 0.0001, 0.9, 1, NULL},
    {"IPCPIPE_STRIPE_CACHE", IPCP_SET_STR, "",
     "file of the striping "
     "calibration (default $XDG_CACHE_HOME/ipcpipe/stripe-<machine>.txt, "
     "else ~/.cache/ipcpipe/stripe-<machine>.txt; off: calibrate in every "
     "process)",
     IPCP_OFF(stripe_cache), 0, 0, 0, NULL},
    {"IPCPIPE_STRIPE_ADAPT", IPCP_SET_ENUM, "on",
     "the receiver of a "
     "striped transfer notes when each part ended (on); under "
     "IPCPIPE_STRIPE=auto, a staged part that ended late (more than 10% at "
     "the calibrated share, 2% off it) lowers the pair's staged share for "
     "later transfers of that size, down to not striping them (with a "
     "striped probe now and then), and two in a row that ended early raise "
     "it, up to 1.25 times the calibrated share; a receive the receiver "
     "copies itself, striped one way, ends once those ends are seen (off: "
     "after the notifies behind them, 0.6-1.8 points slower at 256 MiB on "
     "2 x H200)",
     IPCP_OFF(stripe_adapt), 0, 0, 0, ipcp__offon_choices},
    {"IPCPIPE_DRIVE", IPCP_SET_ENUM, "auto",
     "the receiver copies a transfer "
     "itself, out of the sender's buffer mapped in its own process, with "
     "queues on the sender's GPU (direct part and the staged part's "
     "device-to-host copies) and on its own (the rest): no round trip "
     "before the copy starts and no flag between the processes at its end. "
     "auto (or on): between GPUs, where this process can use the sender's "
     "GPU and that GPU can write the receive buffer's, and between host "
     "buffers (the sender's ipcp_mem_alloc memory mapped here, its other "
     "memory read with process_vm_readv where permitted and the receive "
     "buffer is not from ipcp_mem_alloc); off: the sender copies.  The "
     "receiver's setting decides, from what the sender offers: a sender "
     "offers its buffers unless off.  Not for stream-ordered transfers",
     IPCP_OFF(drive), 0, 0, 0, ipcp__drive_choices},
    {"IPCPIPE_SPLIT", IPCP_SET_SIZE, "512K",
     "host transfers of at least this "
     "many bytes into a receiver bound to one CPU are copied by both "
     "processes at once: the receiver copies the first half out of the "
     "sender's buffer while the sender writes the second half (0: off)",
     IPCP_OFF(split), 0, 1024.0 * 1024 * 1024 * 1024, 0, NULL},
    {"IPCPIPE_EAGER", IPCP_SET_SIZE, "128K",
     "largest host message sent inline "
     "with its control message (those over 64K in one pipelined record of "
     "the peer's mailbox, which the receiver copies out while the sender "
     "writes it; 0 turns eager sends off)",
     IPCP_OFF(eager), 0, 262144, 0, NULL},
    {"IPCPIPE_SMALL", IPCP_SET_SIZE, "0",
     "stream-ordered messages of up to "
     "this many bytes between GPUs go through the small-message lane "
     "(kernels that store into the peer's GPU memory, a few microseconds a "
     "message); set it the same on both ranks, and post those receives "
     "stream-ordered, with at most this capacity, in the order the peer "
     "sends (0: off; at most 64K)",
     IPCP_OFF(small), 0, 65536, 0, NULL},
    {"IPCPIPE_SMALL_WORDS", IPCP_SET_SIZE, "512",
     "lane messages of up to "
     "this many bytes travel as flagged words, which need no fence between "
     "data and flag (larger ones: data, one fence, a flag); set it the same "
     "on both ranks (0: never; at most 512)",
     IPCP_OFF(small_words), 0, 512, 0, NULL},
    {"IPCPIPE_PVM", IPCP_SET_ENUM, "auto",
     "use process_vm_writev/readv for "
     "direct transfers into host memory a peer cannot map (auto or off)",
     IPCP_OFF(pvm), 0, 0, 0, ipcp__autooff_choices},
    {"IPCPIPE_CUDA", IPCP_SET_ENUM, "auto",
     "CUDA backend: auto (when a driver "
     "is found) or off",
     IPCP_OFF(cuda), 0, 0, 0, ipcp__autooff_choices},
    {"IPCPIPE_CUDA_NOTIFY", IPCP_SET_ENUM, "event",
     "how the CPU learns that "
     "device work finished: event (a thread polls CUDA events while "
     "transfers run) or callback (stream callbacks, which stall the stream)",
     IPCP_OFF(cuda_notify), 0, 0, 0, ipcp__notify_choices},
    {"IPCPIPE_SPIN_US", IPCP_SET_INT, "50",
     "microseconds the progress thread, "
     "waiting callers, host copy workers and the CUDA event thread (those of "
     "a process with more than one CPU) poll before they sleep; they also poll "
     "while "
     "device transfers run and, unless 0, while a device send's receiver "
     "may be copying it (from the offer, as long as its bytes take at "
     "100 GB/s); callers at most 100 ms",
     IPCP_OFF(spin_us), 0, 100000, 0, NULL},
    {"IPCPIPE_MAILBOX", IPCP_SET_ENUM, "on",
     "control messages from the "
     "peers through a ring in shared memory (on) or the socket (off); the "
     "ring saves a few microseconds a message and carries small host "
     "messages that callers write and read themselves, the socket still "
     "carries descriptors and long messages",
     IPCP_OFF(mailbox), 0, 0, 0, ipcp__offon_choices},
    {"IPCPIPE_TRACE", IPCP_SET_STR, "",
     "write a Chrome/Perfetto timeline of "
     "every transfer to this file (rank 0 merges the ranks' parts at "
     "finalize)",
     IPCP_OFF(trace), 0, 0, 0, NULL},
    {"IPCPIPE_TRACE_COPIES", IPCP_SET_ENUM, "on",
     "with IPCPIPE_TRACE: time "
     "each copy in its queue (on), or keep only the protocol's marks of each "
     "transfer (off: no timing operations in the queues to slow them)",
     IPCP_OFF(trace_copies), 0, 0, 0, ipcp__offon_choices},
    {"IPCPIPE_LOG_LEVEL", IPCP_SET_ENUM, "warn",
     "log level: none, error, "
     "warn, info, debug, trace",
     IPCP_OFF(log_level), 0, 0, 0, ipcp__level_choices},
    {"IPCPIPE_LOG_SUBSYS", IPCP_SET_SUBSYS, "all",
     "subsystems to log: all or "
     "a comma list of init,boot,engine,host,cuda,api,env",
     IPCP_OFF(log_mask), 0, 0, 0, NULL},
    {"IPCPIPE_LOG_FILE", IPCP_SET_STR, "",
     "append the log to this file "
     "instead of stderr; %h in the name becomes the host name, %p the pid "
     "(one file per process); every line is one write",
     IPCP_OFF(log_file), 0, 0, 0, NULL},
    {"IPCPIPE_FAULT", IPCP_SET_FAULT, "",
     "testing aid: stage:action[:n] "
     "makes this process send itself SIGKILL (action kill) or SIGSTOP "
     "(stop) the n-th time (default 1) it reaches a protocol stage: "
     "rts-posted, get-posted, rts-matched, cts-posted, cts-received, "
     "staged-chunk, data-in-place, onesided-enqueued, map-requested, "
     "barrier-entered, bye-sent, bye-received (tests/api/test_fault.c)",
     IPCP_OFF(fault), 0, 0, 0, NULL},
};

#define IPCP_NSETTINGS ((int)ipcp__array_size(ipcp__settings))

int ipcp__parse_int(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int ipcp__parse_double(const char *s, double min, double max, double *out)
{
    char *end;
    errno = 0;
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Sizes: digits with an optional binary suffix K, M, G, T (also KiB, KB,
 * k...).  Anything else, "12abc" included, is rejected. */
int ipcp__parse_size(const char *s, size_t *out)
{
    static const struct {
        const char *suf;
        unsigned shift;
    } sufs[] = {
        {"", 0},    {"K", 10},   {"KB", 10},  {"KiB", 10}, {"k", 10},
        {"M", 20},  {"MB", 20},  {"MiB", 20}, {"m", 20},   {"G", 30},
        {"GB", 30}, {"GiB", 30}, {"g", 30},   {"T", 40},   {"TiB", 40},
    };
    char *end;
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    for (size_t i = 0; i < ipcp__array_size(sufs); i++) {
        if (strcmp(end, sufs[i].suf) != 0)
            continue;
        if (sufs[i].shift && v > (~0ULL >> sufs[i].shift))
            return -1;
        *out = (size_t)(v << sufs[i].shift);
        return 0;
    }
    return -1;
}

static int ipcp__parse_enum(const char *s, const char *const *choices)
{
    for (int i = 0; choices[i]; i++)
        if (strcmp(s, choices[i]) == 0)
            return i;
    return -1;
}

static int ipcp__parse_subsys(const char *s, unsigned *mask)
{
    static const char *const names[] = {
#define IPCP_SUBSYS_STR_(n, str) str,
        IPCP_SUBSYS_MAP(IPCP_SUBSYS_STR_)
#undef IPCP_SUBSYS_STR_
    };
    char buf[256];
    unsigned m = 0;
    if (strcmp(s, "all") == 0) {
        *mask = IPCP_SUB_ALL;
        return 0;
    }
    if (strlen(s) >= sizeof(buf) || !*s)
        return -1;
    strcpy(buf, s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        size_t i;
        for (i = 0; i < ipcp__array_size(names); i++)
            if (strcmp(tok, names[i]) == 0)
                break;
        if (i == ipcp__array_size(names))
            return -1;
        m |= 1u << i;
    }
    *mask = m;
    return 0;
}

/* Parses one value into cfg; -1 with a reason in why on error. */
static int ipcp__setting_parse(const ipcp__setting_t *st, const char *val,
                               ipcp__config_t *cfg, const char **why)
{
    char *field = (char *)cfg + st->offset;
    long l;
    size_t z;
    double d;
    int e;

    if (st->allow_auto && strcmp(val, "auto") == 0) {
        if (st->type == IPCP_SET_SIZE)
            *(size_t *)field = 0;
        else if (st->type == IPCP_SET_SHARE)
            *(double *)field = 0;
        else
            *(int *)field = 0;
        return 0;
    }
    switch (st->type) {
    case IPCP_SET_INT:
        *why = "is not an integer in range";
        if (ipcp__parse_int(val, (long)st->min, (long)st->max, &l))
            return -1;
        *(int *)field = (int)l;
        return 0;
    case IPCP_SET_SIZE:
        *why = "is not a size in range (bytes, or with K/M/G)";
        if (ipcp__parse_size(val, &z) || (double)z < st->min ||
            (double)z > st->max)
            return -1;
        *(size_t *)field = z;
        return 0;
    case IPCP_SET_DOUBLE:
        *why = "is not a number in range";
        if (ipcp__parse_double(val, st->min, st->max, &d))
            return -1;
        *(double *)field = d;
        return 0;
    case IPCP_SET_STR:
        *why = "is too long";
        if (strlen(val) >=
            (st->offset == IPCP_OFF(job) ? IPCP_JOB_MAX : IPCP_DIR_MAX - 32))
            return -1;
        strcpy(field, val);
        return 0;
    case IPCP_SET_ENUM:
        *why = "is not one of the accepted values";
        if ((e = ipcp__parse_enum(val, st->choices)) < 0)
            return -1;
        *(int *)field = e;
        return 0;
    case IPCP_SET_SUBSYS:
        *why = "is not 'all' or a comma list of subsystems";
        return ipcp__parse_subsys(val, (unsigned *)field);
    case IPCP_SET_SHARE:
        *why = "is not off, auto or a share between 0.0001 and 0.9";
        if (strcmp(val, "off") == 0) {
            *(double *)field = -1;
            return 0;
        }
        if (ipcp__parse_double(val, st->min, st->max, &d))
            return -1;
        *(double *)field = d;
        return 0;
    case IPCP_SET_FAULT:
        *why = "is not stage:kill|stop[:n] with a known stage";
        return ipcp__fault_parse(val, (ipcp__fault_t *)(void *)field);
    }
    return -1;
}

static void ipcp__config_defaults(ipcp__config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->rank = -1;
    cfg->size = -1;
}

ipcp_status_t ipcp__config_parse(ipcp__config_t *cfg, ipcp__env_get_fn get,
                                 void *arg, char *err, size_t errlen)
{
    ipcp__config_defaults(cfg);
    for (int i = 0; i < IPCP_NSETTINGS; i++) {
        const ipcp__setting_t *st = &ipcp__settings[i];
        const char *val = get(st->name, arg);
        const char *why = "";
        int from_env = val != NULL;
        if (!from_env)
            val = st->deflt;
        if (!*val && !from_env)
            continue; /* unset, no default: keep the "unset" value */
        if (ipcp__setting_parse(st, val, cfg, &why) == 0)
            continue;
        snprintf(err, errlen, "%s='%s' %s", st->name, val, why);
        if (st->choices) {
            size_t n = strlen(err);
            for (int c = 0; st->choices[c] && n < errlen; c++)
                n += (size_t)snprintf(err + n, errlen - n, "%s%s",
                                      c ? "|" : " (", st->choices[c]);
            if (n < errlen)
                snprintf(err + n, errlen - n, ")");
        }
        return IPCP_ERR_CONFIG;
    }
    return IPCP_OK;
}

static const char *ipcp__getenv_cb(const char *name, void *arg)
{
    (void)arg;
    return getenv(name);
}

static pthread_once_t ipcp__config_once = PTHREAD_ONCE_INIT;
static ipcp__config_t ipcp__config_global;
static ipcp_status_t ipcp__config_status;
static char ipcp__config_err[IPCP_ERRMSG_MAX];

/* Edits (insert, delete, replace) between a and b, or more than 3 once
 * it is sure to be; names are short. */
static int ipcp__edits(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b);
    int row[64];
    if (la >= 64 || lb >= 64)
        return 99;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0], best = row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int v = diag + (a[i - 1] != b[j - 1]);
            v = ipcp__min(v, up + 1);
            v = ipcp__min(v, row[j - 1] + 1);
            row[j] = v;
            diag = up;
            best = ipcp__min(best, v);
        }
        if (best > 3)
            return best;
    }
    return row[lb];
}

/* IPCPIPE_* variables that are not settings: a misspelt one would
 * otherwise be ignored without a word.  A name within two edits of a
 * setting is most likely meant as that one (a warning that names it);
 * others (a script's own variables) are noted at info level. */
static void ipcp__config_warn_unknown(void)
{
    extern char **environ;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "IPCPIPE_", 8) != 0)
            continue;
        size_t len = strcspn(*e, "=");
        const char *near = NULL;
        int best = 3, known = 0;
        for (int i = 0; i < IPCP_NSETTINGS && !known; i++) {
            const char *name = ipcp__settings[i].name;
            int d = ipcp__edits(*e, len, name);
            known = d == 0;
            if (d < best) {
                best = d;
                near = name;
            }
        }
        if (known)
            continue;
        if (near)
            IPCP_WARN(IPCP_SUB_ENV,
                      "%.*s is not an ipcpipe setting (ignored); "
                      "did you mean %s?",
                      (int)len, *e, near);
        else
            IPCP_INFO(IPCP_SUB_ENV, "%.*s is not an ipcpipe setting (ignored)",
                      (int)len, *e);
    }
}

static void ipcp__config_load(void)
{
    ipcp__config_status =
        ipcp__config_parse(&ipcp__config_global, ipcp__getenv_cb, NULL,
                           ipcp__config_err, sizeof(ipcp__config_err));
    if (ipcp__config_status == IPCP_OK) {
        __atomic_store_n(&ipcp__log_level, ipcp__config_global.log_level,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&ipcp__log_mask, ipcp__config_global.log_mask,
                         __ATOMIC_RELAXED);
        if (ipcp__config_global.log_file[0])
            ipcp__log_open(ipcp__config_global.log_file);
        ipcp__config_warn_unknown();
        ipcp__fault_arm(&ipcp__config_global.fault);
    }
}

ipcp_status_t ipcp__config_get(const ipcp__config_t **cfg)
{
    pthread_once(&ipcp__config_once, ipcp__config_load);
    if (ipcp__config_status != IPCP_OK)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_ENV, ipcp__config_status,
                          "invalid setting: %s", ipcp__config_err);
    *cfg = &ipcp__config_global;
    return IPCP_OK;
}

ipcp_status_t ipcp_settings_check(void)
{
    const ipcp__config_t *cfg;
    return ipcp__config_get(&cfg);
}

/* Names of other programs' variables that ipcpipe reads. */
static const char *const ipcp__foreign_names[] = {
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid",
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_KVSNAME",
    "MPI_LOCALNRANKS",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_STEP_NUM_NODES",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "XDG_RUNTIME_DIR",
    "TMPDIR",
    "CUDA_VISIBLE_DEVICES",
    "XDG_CACHE_HOME",
    "HOME",
};

const char *ipcp__env_foreign(const char *name)
{
    for (size_t i = 0; i < ipcp__array_size(ipcp__foreign_names); i++)
        if (strcmp(name, ipcp__foreign_names[i]) == 0)
            return getenv(name);
    return NULL;
}

int ipcp_settings_count(void)
{
    return IPCP_NSETTINGS;
}

ipcp_status_t ipcp_setting_get(int index, ipcp_setting_info_t *info)
{
    if (index < 0 || index >= IPCP_NSETTINGS || !info)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_API, IPCP_ERR_INVALID,
                          "setting index %d out of range [0, %d)", index,
                          IPCP_NSETTINGS);
    const ipcp__setting_t *st = &ipcp__settings[index];
    const char *val = getenv(st->name);
    info->name = st->name;
    info->deflt = *st->deflt ? st->deflt : "(unset)";
    info->value = val ? val : info->deflt;
    info->doc = st->doc;
    info->is_set = val != NULL;
    return IPCP_OK;
}
