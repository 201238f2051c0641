/* The one table of IPCPIPE_* settings.  Read once, parsed strictly; no other
 * file calls getenv. */
#ifndef IPCP_COMMON_CONFIG_H
#define IPCP_COMMON_CONFIG_H

#include <stddef.h>
#include "ipcpipe.h"
#include "fault.h"

#define IPCP_JOB_MAX 64
#define IPCP_DIR_MAX 200

/* IPCPIPE_CUDA */
enum { IPCP_CUDA_AUTO = 0, IPCP_CUDA_OFF = 1 };
/* IPCPIPE_CUDA_NOTIFY */
enum { IPCP_NOTIFY_EVENT = 0, IPCP_NOTIFY_CALLBACK = 1 };
/* IPCPIPE_PVM */
enum { IPCP_PVM_AUTO = 0, IPCP_PVM_OFF = 1 };
/* IPCPIPE_REMOTE_COPIES */
enum { IPCP_COPIES_AUTO = 0, IPCP_COPIES_THREAD = 1, IPCP_COPIES_CALLER = 2 };
/* IPCPIPE_MAILBOX */
enum { IPCP_MBOX_OFF = 0, IPCP_MBOX_ON = 1 };

typedef struct ipcp__config {
    int rank;                /* IPCPIPE_RANK, -1 unset */
    int size;                /* IPCPIPE_SIZE, -1 unset */
    char job[IPCP_JOB_MAX];  /* IPCPIPE_JOB, "" unset */
    char node[IPCP_DIR_MAX]; /* IPCPIPE_NODE, "" unset (libipcpipe_mpi) */
    size_t remote_chunk;     /* IPCPIPE_REMOTE_CHUNK (libipcpipe_mpi) */
    size_t remote_inline;    /* IPCPIPE_REMOTE_INLINE (libipcpipe_mpi) */
    int remote_rma;          /* IPCPIPE_REMOTE_RMA (libipcpipe_mpi) */
    int remote_copies;       /* IPCPIPE_REMOTE_COPIES */
    double timeout_s;        /* IPCPIPE_TIMEOUT */
    char dir[IPCP_DIR_MAX];  /* IPCPIPE_DIR, "" = default place */
    int path;                /* IPCPIPE_PATH: ipcp__path_of_setting */
    size_t chunk;            /* IPCPIPE_CHUNK, 0 = backend default */
    int slots;               /* IPCPIPE_SLOTS, 0 = backend default */
    int slots_per_queue;     /* IPCPIPE_SLOTS_PER_QUEUE, 0 = 4 */
    int queues;              /* IPCPIPE_QUEUES, 0 = backend default */
    size_t piece;            /* IPCPIPE_PIECE */
    double stripe;           /* IPCPIPE_STRIPE: 0 auto, < 0 off, else the
                                staged share */
    char stripe_cache[IPCP_DIR_MAX]; /* IPCPIPE_STRIPE_CACHE, "" default */
    int stripe_adapt;                /* IPCPIPE_STRIPE_ADAPT: 0 off, 1 on */
    int drive;                       /* IPCPIPE_DRIVE: 0 auto, 1 off, 2 on */
    size_t eager;                    /* IPCPIPE_EAGER */
    size_t split;                    /* IPCPIPE_SPLIT (0: off) */
    size_t small;                    /* IPCPIPE_SMALL, 0 = no lane */
    size_t small_words;              /* IPCPIPE_SMALL_WORDS */
    int pvm;                         /* IPCPIPE_PVM */
    int cuda;                        /* IPCPIPE_CUDA */
    int cuda_notify;                 /* IPCPIPE_CUDA_NOTIFY */
    int spin_us;                     /* IPCPIPE_SPIN_US */
    int mailbox;                     /* IPCPIPE_MAILBOX */
    char trace[IPCP_DIR_MAX];        /* IPCPIPE_TRACE, "" = off */
    int trace_copies;                /* IPCPIPE_TRACE_COPIES: 0 off, 1 on */
    int log_level;                   /* IPCPIPE_LOG_LEVEL */
    unsigned log_mask;               /* IPCPIPE_LOG_SUBSYS */
    char log_file[IPCP_DIR_MAX];     /* IPCPIPE_LOG_FILE, "" = stderr */
    ipcp__fault_t fault;             /* IPCPIPE_FAULT (testing aid) */
} ipcp__config_t;

enum { IPCP_DRIVE_AUTO, IPCP_DRIVE_OFF, IPCP_DRIVE_ON }; /* cfg.drive */

/* Looks a variable up; returns NULL when unset. */
typedef const char *(*ipcp__env_get_fn)(const char *name, void *arg);

/* Parses every setting through get into *cfg.  On a bad value returns
 * IPCP_ERR_CONFIG with a message naming the variable in err. */
ipcp_status_t ipcp__config_parse(ipcp__config_t *cfg, ipcp__env_get_fn get,
                                 void *arg, char *err, size_t errlen);

/* The process's settings, loaded from the environment on first use.  On a
 * bad value returns IPCP_ERR_CONFIG (and the same on every later call). */
ipcp_status_t ipcp__config_get(const ipcp__config_t **cfg);

/* Variables that belong to launchers (OMPI_COMM_WORLD_RANK, SLURM_PROCID,
 * ...) and to the system (XDG_RUNTIME_DIR, TMPDIR, CUDA_VISIBLE_DEVICES).
 * Returns NULL when unset or not a known name. */
const char *ipcp__env_foreign(const char *name);

/* Strict parsers, exported for tests.  0 on success, -1 on a bad string. */
int ipcp__parse_size(const char *s, size_t *out);
int ipcp__parse_int(const char *s, long min, long max, long *out);
int ipcp__parse_double(const char *s, double min, double max, double *out);

/* The paths a user may force (params, ipcp_comm_set_path, IPCPIPE_PATH),
 * and the path of an IPCPIPE_PATH value (its index among the choices
 * auto, direct, staged, bounce). */
static inline int ipcp__path_forceable(int p)
{
    return p == IPCP_PATH_AUTO || p == IPCP_PATH_DIRECT ||
           p == IPCP_PATH_STAGED || p == IPCP_PATH_BOUNCE;
}

static inline ipcp_path_t ipcp__path_of_setting(int v)
{
    return v == 3 ? IPCP_PATH_BOUNCE : (ipcp_path_t)v;
}

#endif
