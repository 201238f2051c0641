/* Bootstrap: finds rank, size and job, meets every other rank of the job
 * over Unix domain sockets, and moves opaque messages and file descriptors
 * between ranks.  It never looks inside the messages it moves. */
#ifndef IPCP_BOOTSTRAP_H
#define IPCP_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipcpipe.h"
#include "common/config.h"

#define IPCP_BOOT_MAGIC 0x69706370626f6f74ULL /* "ipcpboot" */
/* Largest message ipcp__sock_send/recv move (one SOCK_SEQPACKET datagram). */
#define IPCP_SOCK_MSG_MAX (64 * 1024)
/* Most file descriptors attached to one message (the engine's largest
 * carries a channel's and those of an export of 64 pieces). */
#define IPCP_SOCK_MAX_FDS 72

/* Bytes of a node's name a hello carries (IPCPIPE_NODE's start). */
#define IPCP_BOOT_NODE_MAX 48

typedef struct ipcp__boot_params {
    int rank;               /* 0 <= rank < size */
    int size;               /* >= 1 */
    char job[IPCP_JOB_MAX]; /* non-empty, [A-Za-z0-9._-] */
    double timeout_s;       /* every wait is bounded by this */
    char dir[IPCP_DIR_MAX]; /* base directory; "" = $XDG_RUNTIME_DIR, else
                               $TMPDIR, else /tmp */
    uint64_t probe_addr;    /* address of a word holding IPCP_BOOT_MAGIC in
                               this process, sent to peers so that they can
                               test process_vm_readv permission */
    uint32_t proto;         /* the caller's protocol (the engine's
                               ipcp__proto): a peer with another is
                               refused at its hello */
    /* The node this rank counts as on (IPCPIPE_NODE, "" unset): a hash of
     * the whole value, and its start for messages.  Ranks that met with
     * another value fail together once all have met (ipcp_init joins the
     * ranks of one node). */
    uint64_t node_hash;
    char node[IPCP_BOOT_NODE_MAX];
} ipcp__boot_params_t;

/* Where rank/size/job came from, for the log and ipcpipe-info. */
typedef struct ipcp__boot_origin {
    char rank_from[48]; /* e.g. "IPCPIPE_RANK", "OMPI_COMM_WORLD_RANK" */
    char size_from[48];
    char job_from[48];
} ipcp__boot_origin_t;

/* Fills out from explicit values (rank/size >= 0, job non-NULL) and, for the
 * rest, from cfg (IPCPIPE_RANK/SIZE/JOB) then the launchers' variables:
 * Open MPI (OMPI_COMM_WORLD_RANK/SIZE, job from PMIX_NAMESPACE or
 * OMPI_MCA_ess_base_jobid), MPICH/Hydra (PMI_RANK/PMI_SIZE), Slurm
 * (SLURM_PROCID/SLURM_NTASKS, SLURM_JOB_ID.SLURM_STEP_ID), torchrun
 * (RANK/WORLD_SIZE, TORCHELASTIC_RUN_ID).  A job that no variable names is
 * derived from the parent pid (the launcher).  A job name with characters
 * outside [A-Za-z0-9._-] is reduced to a hash.  Errors say which variable
 * is missing or wrong.  origin may be NULL. */
ipcp_status_t ipcp__boot_resolve(const ipcp__config_t *cfg, int rank, int size,
                                 const char *job, double timeout_s,
                                 ipcp__boot_params_t *out,
                                 ipcp__boot_origin_t *origin);

typedef struct ipcp__boot_peer {
    int fd;              /* connected AF_UNIX SOCK_SEQPACKET, CLOEXEC,
                            blocking; -1 for self */
    pid_t pid;           /* checked against SO_PEERCRED */
    uint64_t probe_addr; /* the peer's probe word, from its hello */
    uint64_t node_hash;  /* its node (params->node_hash), from its hello */
    char node[IPCP_BOOT_NODE_MAX];
} ipcp__boot_peer_t;

typedef struct ipcp__boot {
    int rank;
    int size;
    char job[IPCP_JOB_MAX];
    double timeout_s;
    uint32_t proto;     /* params->proto */
    uint64_t node_hash; /* params->node_hash */
    char node[IPCP_BOOT_NODE_MAX];
    char path[IPCP_DIR_MAX + 64]; /* the job's rendezvous directory */
    ipcp__boot_peer_t *peers;     /* [size] */
} ipcp__boot_t;

/* Makes (or checks) the job's private directory <base>/ipcpipe-<uid>/<job>
 * (each level mode 0700, owned by us, not a symlink), listens there, and
 * connects every pair of ranks: rank i connects to every j < i and accepts
 * every j > i.  Each connection is checked with SO_PEERCRED (same uid) and
 * a hello carrying IPCP_BOOT_MAGIC, the caller's protocol, the job, the
 * ranks, pid and probe address.  Stale socket files from an earlier run of
 * the same job are replaced.  On expiry of timeout_s the error names the
 * ranks that never came.  The socket files and directory are removed once
 * every connection is made. */
ipcp_status_t ipcp__boot_connect(const ipcp__boot_params_t *params,
                                 ipcp__boot_t **boot);

/* The checks ipcp__boot_connect makes before it starts (parameters, and
 * the descriptors a job of that size needs), for callers that allocate
 * per rank before it. */
ipcp_status_t ipcp__boot_check(const ipcp__boot_params_t *params);

/* Closes every peer fd still >= 0 and frees boot. */
void ipcp__boot_destroy(ipcp__boot_t *boot);

/* The hello this process sends for boot (its bytes into out; 0 when cap is
 * too small), and the check a received one passes (0, or -1 with the
 * reason in why; want as for a connection we made to rank want, or -1 for
 * one a higher rank made to us).  For the fuzz harness of tests/fuzz. */
size_t ipcp__boot_hello_pack(const ipcp__boot_t *boot, uint64_t probe_addr,
                             void *out, size_t cap);
int ipcp__boot_hello_check(const ipcp__boot_t *boot, const void *buf, size_t n,
                           pid_t pid, int want, char *why, size_t wlen);

/* Blocking barrier over the peer sockets (used during init and in tests),
 * bounded by boot->timeout_s; the error names the missing ranks. */
ipcp_status_t ipcp__boot_barrier(ipcp__boot_t *boot);

/* Sends one message (len <= IPCP_SOCK_MSG_MAX) with nfds descriptors.
 * nonblock = 1: returns IPCP_IN_PROGRESS if the socket is full (nothing
 * sent).  A closed peer gives IPCP_ERR_PEER_LOST. */
ipcp_status_t ipcp__sock_send(int fd, const void *buf, size_t len,
                              const int *fds, int nfds, int nonblock);

/* Receives one message into buf (cap bytes).  timeout_s < 0 waits forever,
 * 0 polls (IPCP_IN_PROGRESS when nothing is there).  Received descriptors
 * (at most maxfds, CLOEXEC) go to fds and their count to *nfds; extra ones
 * are closed.  A truncated message is an error.  End of stream gives
 * IPCP_ERR_PEER_LOST. */
ipcp_status_t ipcp__sock_recv(int fd, void *buf, size_t cap, size_t *len,
                              int *fds, int maxfds, int *nfds,
                              double timeout_s);

#endif
