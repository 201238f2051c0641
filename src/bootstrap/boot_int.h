/* What the rendezvous's files share (bootstrap.c: hellos, connecting,
 * set-up; rdv.c: the directory and the sockets; boot_barrier.c). */
#ifndef IPCP_BOOT_INT_H
#define IPCP_BOOT_INT_H

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "bootstrap/bootstrap.h"

#define BOOT_SIZE_MAX (1 << 20)
/* Accepted connections whose hello has not come yet; more wait in the
 * listen backlog. */
#define BOOT_PENDING_MAX 16
/* A rank sends its hello as soon as it is connected; an accepted
 * connection that has sent none this long after it came gives its slot to
 * the next one in the backlog, so that connections that never speak
 * cannot keep the ranks of the job out. */
#define BOOT_HELLO_GRACE_S 0.2
/* Descriptors a rank needs besides one socket per peer and the pending
 * slots: the listening socket, the engine's eventfd, mailboxes, channels
 * and device handles on their way. */
#define BOOT_FD_SPARE 32
/* Delay before connecting again when the peer has not bound or listened
 * yet, and after a peer refused our hello. */
#define BOOT_RETRY_S         0.005
#define BOOT_REFUSED_RETRY_S 0.05

/* The hello.  All ranks run on one machine, so host byte order is used;
 * magic and version come first so that a different layout is recognised
 * as another version rather than as garbage.  The version is the caller's
 * protocol (the engine's IPCP_PROTO_VERSION and routes): a change of this
 * layout must raise IPCP_PROTO_VERSION too (a hello of another size is
 * refused as well). */
typedef struct boot_hello {
    uint64_t magic;   /* IPCP_BOOT_MAGIC */
    uint32_t version; /* the caller's protocol (params->proto) */
    uint32_t size;
    uint32_t rank;
    int32_t pid;
    uint64_t probe_addr;
    uint64_t node_hash;            /* params->node_hash */
    char node[IPCP_BOOT_NODE_MAX]; /* params->node */
    char job[IPCP_JOB_MAX];
} boot_hello_t;
_Static_assert(sizeof(boot_hello_t) == 40 + IPCP_BOOT_NODE_MAX + IPCP_JOB_MAX,
               "the hello's layout is part of the protocol: no padding");

/* Barrier token. */
typedef struct boot_token {
    uint64_t magic;
    uint32_t kind;
    int32_t rank;
} boot_token_t;
#define BOOT_TOKEN_BARRIER 1u

typedef struct boot_pending {
    int fd;       /* accepted, waiting for its hello; -1: slot free */
    pid_t pid;    /* SO_PEERCRED of the connecting process */
    double since; /* when it was accepted */
} boot_pending_t;

typedef struct boot_ctx {
    const ipcp__boot_params_t *params;
    ipcp__boot_t *boot;
    char base[IPCP_DIR_MAX];
    int basefd;  /* base directory */
    int udirfd;  /* <base>/ipcpipe-<uid> */
    int dirfd;   /* the job directory */
    int lfd;     /* our listening socket */
    int bound;   /* our socket file exists */
    int missing; /* connections still to make */
    double deadline;
    int *out_fd;         /* [rank]: connected to a lower rank, hello pending */
    pid_t *out_pid;      /* [rank]: SO_PEERCRED of that connection */
    double *retry_at;    /* [rank]: when to connect to that rank again */
    struct pollfd *pfds; /* [1 + BOOT_PENDING_MAX + rank] */
    boot_pending_t pending[BOOT_PENDING_MAX];
    boot_hello_t hello; /* ours */
    int silent;         /* connections dropped for sending no hello */
    char last_refusal[200];
} boot_ctx_t;

/* bootstrap.c: a failed system call as a status (EACCES and EPERM are
 * IPCP_ERR_PERMISSION) naming what and path. */
ipcp_status_t boot_errno_fail(ipcp_status_t st, int err, const char *what,
                              const char *path);
/* Milliseconds for poll until `until`, rounded up, at least 0. */
int boot_ms_until(double until, double now);
/* The ranks other than ours not connected (arrived NULL) or not arrived,
 * comma-separated, cut short with "..."; returns how many. */
int boot_rank_list(const ipcp__boot_t *boot, const char *arrived, char *buf,
                   size_t len);
/* One message without waiting: its length, 0 at end of stream, -1. */
ssize_t boot_recv_msg(int fd, void *buf, size_t cap);

/* rdv.c: the job directory's path, the directories made (ours alone), a
 * rank's socket name and address, a connection's credentials, and our
 * listening socket. */
ipcp_status_t boot_build_path(boot_ctx_t *ctx);
ipcp_status_t boot_make_dirs(boot_ctx_t *ctx);
void boot_sock_name(int rank, char *buf, size_t len);
socklen_t boot_sock_addr(const boot_ctx_t *ctx, int rank,
                         struct sockaddr_un *sa);
int boot_peer_cred(int fd, struct ucred *cr);
ipcp_status_t boot_listen(boot_ctx_t *ctx);

#endif
