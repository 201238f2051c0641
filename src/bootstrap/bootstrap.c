/* Rendezvous: the ranks of a job meet through AF_UNIX SOCK_SEQPACKET
 * sockets in a private directory <base>/ipcpipe-<uid>/<job>, one socket
 * file per rank.  Rank i connects to every j < i and accepts every j > i;
 * each connection is checked with SO_PEERCRED and a hello both ways. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bootstrap/boot_int.h"
#include "common/status.h"
#include "common/time.h"
#include "common/util.h"

static const char boot_job_chars[] = "abcdefghijklmnopqrstuvwxyz"
                                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789._-";

ipcp_status_t boot_errno_fail(ipcp_status_t st, int err, const char *what,
                              const char *path)
{
    if (err == EACCES || err == EPERM)
        st = IPCP_ERR_PERMISSION;
    return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, st, "%s %s: %s", what, path,
                      strerror(err));
}

/* Milliseconds for poll until `until`, rounded up, at least 0. */
int boot_ms_until(double until, double now)
{
    double left = until - now;
    if (left <= 0)
        return 0;
    if (left >= INT_MAX / 1000)
        return INT_MAX;
    return (int)(left * 1e3) + 1;
}

/* Writes the ranks other than ours that are not connected (arrived NULL)
 * or have not arrived, comma-separated and cut short with "..." when they
 * do not fit; returns how many there are. */
int boot_rank_list(const ipcp__boot_t *boot, const char *arrived, char *buf,
                   size_t len)
{
    size_t off = 0;
    int count = 0;
    buf[0] = '\0';
    for (int r = 0; r < boot->size; r++) {
        if (r == boot->rank || (arrived ? arrived[r] : boot->peers[r].fd >= 0))
            continue;
        char item[24];
        int n = snprintf(item, sizeof(item), "%s%d", count++ ? ", " : "", r);
        if (off + (size_t)n + 4 < len) {
            memcpy(buf + off, item, (size_t)n + 1);
            off += (size_t)n;
        } else if (off + 4 <= len) {
            memcpy(buf + off, "...", 4);
            off = len;
        }
    }
    return count;
}

/* ------------------------------------------------------------------------ */
/* Hellos                                                                    */

static void boot_refuse(boot_ctx_t *ctx, int fd, int level, const char *fmt,
                        ...) __attribute__((format(printf, 4, 5)));

/* Records and logs why a connection was refused, and closes it; the
 * reason is repeated in the timeout error if the right peer never comes. */
static void boot_refuse(boot_ctx_t *ctx, int fd, int level, const char *fmt,
                        ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->last_refusal, sizeof(ctx->last_refusal), fmt, ap);
    va_end(ap);
    IPCP_LOG(level, IPCP_SUB_BOOT, "rendezvous %s: refused a connection: %s",
             ctx->boot->path, ctx->last_refusal);
    if (fd >= 0)
        close(fd);
}

/* A fresh socket's send buffer is empty, so a hello never finds it full;
 * MSG_NOSIGNAL turns a peer gone meanwhile into EPIPE, not SIGPIPE. */
static int boot_send_hello(const boot_ctx_t *ctx, int fd)
{
    ssize_t n;
    do {
        n = send(fd, &ctx->hello, sizeof(ctx->hello),
                 MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(ctx->hello) ? 0 : -1;
}

/* Reads one message without waiting: its length, 0 at end of stream, or
 * -1 with errno.  Descriptors sent along are discarded by the kernel, as
 * no control buffer is given. */
ssize_t boot_recv_msg(int fd, void *buf, size_t cap)
{
    ssize_t n;
    do {
        n = recv(fd, buf, cap, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    return n;
}

static int boot_why(char *why, size_t wlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes why a hello was refused; returns -1 for boot_hello_check. */
static int boot_why(char *why, size_t wlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, wlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Checks a received hello.  want >= 0: it must come from that rank (we
 * connected to it); want < 0: from a higher rank not yet connected (it
 * connected to us).  Returns 0, or -1 with the reason in why. */
static int boot_hello_check(const boot_ctx_t *ctx, const void *buf, ssize_t n,
                            pid_t pid, int want, boot_hello_t *h, char *why,
                            size_t wlen)
{
    const ipcp__boot_t *boot = ctx->boot;
    uint64_t magic;
    uint32_t version;
    if (n < (ssize_t)(sizeof(magic) + sizeof(version)))
        return boot_why(why, wlen, "a %zd-byte message is no hello", n);
    memcpy(&magic, buf, sizeof(magic));
    memcpy(&version, (const char *)buf + sizeof(magic), sizeof(version));
    if (magic != IPCP_BOOT_MAGIC)
        return boot_why(why, wlen, "bad magic 0x%016" PRIx64, magic);
    if (version != boot->proto)
        return boot_why(why, wlen,
                        "protocol 0x%08" PRIx32 ", ours is 0x%08" PRIx32
                        " (two ipcpipe versions in one job?)",
                        version, boot->proto);
    if (n != (ssize_t)sizeof(*h))
        return boot_why(why, wlen, "hello of %zd bytes, expected %zu", n,
                        sizeof(*h));
    memcpy(h, buf, sizeof(*h));
    if (memchr(h->job, '\0', sizeof(h->job)) == NULL ||
        strspn(h->job, boot_job_chars) != strlen(h->job))
        return boot_why(why, wlen, "a malformed job name, ours is '%s'",
                        boot->job);
    if (strcmp(h->job, boot->job) != 0)
        return boot_why(why, wlen, "job '%s', ours is '%s'", h->job, boot->job);
    if (memchr(h->node, '\0', sizeof(h->node)) == NULL)
        return boot_why(why, wlen, "a node name without its end");
    if (h->size != (uint32_t)boot->size)
        return boot_why(why, wlen, "job size %" PRIu32 ", ours is %d", h->size,
                        boot->size);
    if (want >= 0 && h->rank != (uint32_t)want)
        return boot_why(why, wlen,
                        "rank %" PRIu32 " answered on rank %d's socket",
                        h->rank, want);
    if (want < 0 && (h->rank <= (uint32_t)boot->rank || h->rank >= h->size))
        return boot_why(why, wlen, "rank %" PRIu32 " is not in [%d, %d)",
                        h->rank, boot->rank + 1, boot->size);
    if (want < 0 && boot->peers[h->rank].fd >= 0)
        return boot_why(why, wlen, "rank %" PRIu32 " is already connected",
                        h->rank);
    if (h->pid != (int32_t)pid)
        return boot_why(why, wlen,
                        "hello says pid %" PRId32 ", the kernel says pid %d",
                        h->pid, (int)pid);
    return 0;
}

static void boot_hello_fill(boot_hello_t *h, const ipcp__boot_t *boot,
                            uint64_t probe_addr)
{
    memset(h, 0, sizeof(*h));
    h->magic = IPCP_BOOT_MAGIC;
    h->version = boot->proto;
    h->size = (uint32_t)boot->size;
    h->rank = (uint32_t)boot->rank;
    h->pid = (int32_t)getpid();
    h->probe_addr = probe_addr;
    h->node_hash = boot->node_hash;
    memcpy(h->node, boot->node, sizeof(h->node));
    memcpy(h->job, boot->job, sizeof(h->job));
}

size_t ipcp__boot_hello_pack(const ipcp__boot_t *boot, uint64_t probe_addr,
                             void *out, size_t cap)
{
    boot_hello_t h;
    if (cap < sizeof(h))
        return 0;
    boot_hello_fill(&h, boot, probe_addr);
    memcpy(out, &h, sizeof(h));
    return sizeof(h);
}

int ipcp__boot_hello_check(const ipcp__boot_t *boot, const void *buf, size_t n,
                           pid_t pid, int want, char *why, size_t wlen)
{
    boot_ctx_t ctx;
    boot_hello_t h;
    memset(&ctx, 0, sizeof(ctx));
    ctx.boot = (ipcp__boot_t *)boot;
    return boot_hello_check(&ctx, buf, (ssize_t)n, pid, want, &h, why, wlen);
}

static void boot_peer_set(boot_ctx_t *ctx, int rank, int fd, pid_t pid,
                          const boot_hello_t *h)
{
    ipcp__boot_peer_t *p = &ctx->boot->peers[rank];
    p->fd = fd;
    p->pid = pid;
    p->probe_addr = h->probe_addr;
    p->node_hash = h->node_hash;
    memcpy(p->node, h->node, sizeof(p->node));
    ctx->missing--;
    IPCP_DEBUG(IPCP_SUB_BOOT, "connected to rank %d (pid %d), %d to go", rank,
               (int)pid, ctx->missing);
}

/* ------------------------------------------------------------------------ */
/* Connecting                                                                */

/* Connects to lower rank j and sends our hello; j answers once it has
 * checked it.  A peer not there yet is retried later. */
static ipcp_status_t boot_try_connect(boot_ctx_t *ctx, int j, double now)
{
    struct sockaddr_un sa;
    struct ucred cr;
    socklen_t len = boot_sock_addr(ctx, j, &sa);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return boot_errno_fail(IPCP_ERR_SYSTEM, errno, "socket() for",
                               ctx->boot->path);
    ctx->retry_at[j] = now + BOOT_RETRY_S;
    if (connect(fd, (struct sockaddr *)&sa, len) != 0) {
        int err = errno;
        close(fd);
        /* ENOENT: j has not bound yet.  ECONNREFUSED: the file is stale or
         * j has not called listen yet.  EAGAIN: j's backlog is full. */
        if (err == ENOENT || err == ECONNREFUSED || err == EAGAIN)
            return IPCP_OK;
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                          "cannot connect to rank %d at %s/r%d.sock: %s", j,
                          ctx->boot->path, j, strerror(err));
    }
    ctx->retry_at[j] = now + BOOT_REFUSED_RETRY_S;
    if (boot_peer_cred(fd, &cr) != 0) {
        boot_refuse(ctx, fd, IPCP_LOG_WARN,
                    "SO_PEERCRED on rank %d's "
                    "socket: %s",
                    j, strerror(errno));
        return IPCP_OK;
    }
    if (cr.uid != getuid()) {
        boot_refuse(ctx, fd, IPCP_LOG_WARN,
                    "rank %d's socket is served by "
                    "pid %d of uid %u, not by our uid %u",
                    j, (int)cr.pid, (unsigned)cr.uid, (unsigned)getuid());
        return IPCP_OK;
    }
    /* Peer sockets are handed out blocking; only this bootstrap polls. */
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 ||
        boot_send_hello(ctx, fd) != 0) {
        /* A peer that closed meanwhile (it gave up, or is going): the
         * reason it gave before, a refused hello, says more and stays
         * the one the timeout names. */
        int err = errno;
        char before[sizeof(ctx->last_refusal)];
        memcpy(before, ctx->last_refusal, sizeof(before));
        boot_refuse(ctx, fd, IPCP_LOG_INFO,
                    "sending our hello to rank %d: "
                    "%s",
                    j, strerror(err));
        if (before[0] && (err == EPIPE || err == ECONNRESET))
            memcpy(ctx->last_refusal, before, sizeof(before));
        return IPCP_OK;
    }
    ctx->out_fd[j] = fd;
    ctx->out_pid[j] = cr.pid;
    return IPCP_OK;
}

/* Lower rank j answered our hello (or closed the connection). */
static void boot_on_answer(boot_ctx_t *ctx, int j)
{
    union {
        boot_hello_t h;
        char raw[sizeof(boot_hello_t) + 64];
    } buf;
    boot_hello_t h;
    char why[160];
    int fd = ctx->out_fd[j];
    ssize_t n = boot_recv_msg(fd, &buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    ctx->out_fd[j] = -1;
    if (n <= 0) {
        boot_refuse(ctx, fd, IPCP_LOG_INFO,
                    "rank %d closed our connection "
                    "(it refused our hello; its log says why)",
                    j);
        return;
    }
    if (boot_hello_check(ctx, &buf, n, ctx->out_pid[j], j, &h, why,
                         sizeof(why)) != 0) {
        boot_refuse(ctx, fd, IPCP_LOG_WARN,
                    "answer on rank %d's socket "
                    "(pid %d): %s",
                    j, (int)ctx->out_pid[j], why);
        return;
    }
    boot_peer_set(ctx, j, fd, ctx->out_pid[j], &h);
}

/* A free pending slot, else the one whose connection has been silent
 * longest, once past the grace time (it is dropped); NULL if none. */
static boot_pending_t *boot_free_slot(boot_ctx_t *ctx, double now)
{
    boot_pending_t *oldest = NULL;
    for (int i = 0; i < BOOT_PENDING_MAX; i++) {
        boot_pending_t *pc = &ctx->pending[i];
        if (pc->fd < 0)
            return pc;
        if (!oldest || pc->since < oldest->since)
            oldest = pc;
    }
    if (now < oldest->since + BOOT_HELLO_GRACE_S)
        return NULL;
    ctx->silent++;
    boot_refuse(ctx, oldest->fd, IPCP_LOG_INFO,
                "pid %d sent no hello within %.1f s of connecting",
                (int)oldest->pid, BOOT_HELLO_GRACE_S);
    oldest->fd = -1;
    return oldest;
}

/* When a silent connection may be dropped to make room (no slot free). */
static double boot_evict_at(const boot_ctx_t *ctx)
{
    double at = 0;
    for (int i = 0; i < BOOT_PENDING_MAX; i++) {
        if (ctx->pending[i].fd < 0)
            return 0;
        if (i == 0 || ctx->pending[i].since < at)
            at = ctx->pending[i].since;
    }
    return at + BOOT_HELLO_GRACE_S;
}

/* Accepts what the backlog holds, as far as pending slots allow. */
static ipcp_status_t boot_accept(boot_ctx_t *ctx, double now)
{
    struct ucred cr;
    for (;;) {
        boot_pending_t *slot = boot_free_slot(ctx, now);
        if (slot == NULL)
            return IPCP_OK;
        int fd = accept4(ctx->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return IPCP_OK;
        if (fd < 0 && errno != EINTR && errno != ECONNABORTED)
            return boot_errno_fail(IPCP_ERR_SYSTEM, errno, "accept in",
                                   ctx->boot->path);
        if (fd < 0)
            continue;
        if (boot_peer_cred(fd, &cr) != 0) {
            boot_refuse(ctx, fd, IPCP_LOG_WARN, "SO_PEERCRED: %s",
                        strerror(errno));
        } else if (cr.uid != getuid()) {
            boot_refuse(ctx, fd, IPCP_LOG_WARN,
                        "pid %d runs as uid %u, we "
                        "as uid %u",
                        (int)cr.pid, (unsigned)cr.uid, (unsigned)getuid());
        } else {
            slot->fd = fd;
            slot->pid = cr.pid;
            slot->since = now;
        }
    }
}

/* An accepted connection sent its hello (or closed). */
static void boot_on_hello(boot_ctx_t *ctx, boot_pending_t *pc)
{
    union {
        boot_hello_t h;
        char raw[sizeof(boot_hello_t) + 64];
    } buf;
    boot_hello_t h;
    char why[160];
    int fd = pc->fd;
    ssize_t n = boot_recv_msg(fd, &buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    pc->fd = -1;
    if (n <= 0) {
        boot_refuse(ctx, fd, IPCP_LOG_INFO,
                    "pid %d closed the connection "
                    "before its hello",
                    (int)pc->pid);
        return;
    }
    if (boot_hello_check(ctx, &buf, n, pc->pid, -1, &h, why, sizeof(why))) {
        boot_refuse(ctx, fd, IPCP_LOG_WARN, "hello from pid %d: %s",
                    (int)pc->pid, why);
        return;
    }
    if (boot_send_hello(ctx, fd) != 0) {
        boot_refuse(ctx, fd, IPCP_LOG_INFO,
                    "rank %" PRIu32 " (pid %d) left "
                    "before our answer: %s",
                    h.rank, (int)pc->pid, strerror(errno));
        return;
    }
    boot_peer_set(ctx, (int)h.rank, fd, pc->pid, &h);
}

static ipcp_status_t boot_timeout_error(const boot_ctx_t *ctx)
{
    const ipcp__boot_t *boot = ctx->boot;
    char list[96];
    int count = boot_rank_list(boot, NULL, list, sizeof(list));
    char silent[96] = "";
    if (ctx->silent)
        snprintf(silent, sizeof(silent),
                 "; %d connection(s) of this user sent no hello", ctx->silent);
    return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_TIMEOUT,
                      "%s %s of %d never joined job '%s' within %.1f s "
                      "(rendezvous %s)%s%s%s",
                      count == 1 ? "rank" : "ranks", list, boot->size,
                      boot->job, boot->timeout_s, boot->path, silent,
                      ctx->last_refusal[0] ? "; last refused: " : "",
                      ctx->last_refusal);
}

/* One poll over the listening socket, accepted connections waiting for a
 * hello and our connections waiting for an answer; fixed slots so that an
 * index tells what it is (poll skips negative fds). */
static ipcp_status_t boot_poll_once(boot_ctx_t *ctx, double now, double wake)
{
    const int me = ctx->boot->rank;
    const int np = 1 + BOOT_PENDING_MAX + me;
    for (int i = 0; i < BOOT_PENDING_MAX; i++)
        ctx->pfds[1 + i].fd = ctx->pending[i].fd;
    /* The backlog is looked at while a slot is free or can be freed. */
    double evict_at = boot_evict_at(ctx);
    ctx->pfds[0].fd = evict_at <= now ? ctx->lfd : -1;
    if (evict_at > now)
        wake = ipcp__min(wake, evict_at);
    for (int j = 0; j < me; j++)
        ctx->pfds[1 + BOOT_PENDING_MAX + j].fd = ctx->out_fd[j];
    for (int i = 0; i < np; i++) {
        ctx->pfds[i].events = POLLIN;
        ctx->pfds[i].revents = 0;
    }
    if (poll(ctx->pfds, (nfds_t)np, boot_ms_until(wake, now)) < 0) {
        if (errno == EINTR)
            return IPCP_OK;
        return boot_errno_fail(IPCP_ERR_SYSTEM, errno, "poll in",
                               ctx->boot->path);
    }
    for (int j = 0; j < me; j++)
        if (ctx->pfds[1 + BOOT_PENDING_MAX + j].revents)
            boot_on_answer(ctx, j);
    for (int i = 0; i < BOOT_PENDING_MAX; i++)
        if (ctx->pfds[1 + i].revents)
            boot_on_hello(ctx, &ctx->pending[i]);
    if (ctx->pfds[0].revents)
        return boot_accept(ctx, ipcp__now_s());
    return IPCP_OK;
}

static ipcp_status_t boot_meet(boot_ctx_t *ctx)
{
    const int me = ctx->boot->rank;
    ipcp_status_t st;
    while (ctx->missing > 0) {
        double now = ipcp__now_s();
        if (now >= ctx->deadline)
            return boot_timeout_error(ctx);
        double wake = ctx->deadline;
        for (int j = 0; j < me; j++) {
            if (ctx->boot->peers[j].fd >= 0 || ctx->out_fd[j] >= 0)
                continue;
            if (ctx->retry_at[j] <= now) {
                st = boot_try_connect(ctx, j, now);
                if (st != IPCP_OK)
                    return st;
            }
            if (ctx->out_fd[j] < 0)
                wake = ipcp__min(wake, ctx->retry_at[j]);
        }
        st = boot_poll_once(ctx, now, wake);
        if (st != IPCP_OK)
            return st;
    }
    return IPCP_OK;
}

/* ------------------------------------------------------------------------ */
/* Set-up and tear-down                                                      */

/* Closes what the rendezvous used and removes our socket file and, when it
 * is empty, the job directory.  No rank gets here on success before every
 * rank has bound its socket (each one waits to be connected with all
 * others, and binds before it connects), and a rank's socket file stays
 * until every rank that connects to it has done so; so the directory
 * empties only when the last rank leaves, and ENOTEMPTY just means that
 * others are still at work. */
static void boot_ctx_cleanup(boot_ctx_t *ctx)
{
    char name[32];
    for (int i = 0; i < BOOT_PENDING_MAX; i++)
        if (ctx->pending[i].fd >= 0)
            close(ctx->pending[i].fd);
    for (int j = 0; ctx->out_fd != NULL && j < ctx->boot->rank; j++)
        if (ctx->out_fd[j] >= 0)
            close(ctx->out_fd[j]);
    if (ctx->lfd >= 0)
        close(ctx->lfd);
    if (ctx->bound) {
        boot_sock_name(ctx->boot->rank, name, sizeof(name));
        if (unlinkat(ctx->dirfd, name, 0) != 0)
            IPCP_DEBUG(IPCP_SUB_BOOT, "unlink %s/%s: %s", ctx->boot->path, name,
                       strerror(errno));
    }
    if (ctx->dirfd >= 0)
        close(ctx->dirfd);
    if (ctx->udirfd >= 0) {
        if (unlinkat(ctx->udirfd, ctx->boot->job, AT_REMOVEDIR) == 0)
            IPCP_DEBUG(IPCP_SUB_BOOT, "removed %s", ctx->boot->path);
        else if (errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT)
            IPCP_DEBUG(IPCP_SUB_BOOT, "rmdir %s: %s", ctx->boot->path,
                       strerror(errno));
        close(ctx->udirfd);
    }
    if (ctx->basefd >= 0)
        close(ctx->basefd);
    free(ctx->out_fd);
    free(ctx->out_pid);
    free(ctx->retry_at);
    free(ctx->pfds);
}

/* Once every rank met: all of them count as on one node (IPCPIPE_NODE),
 * or each fails, naming the lowest rank that differs from it.  Every
 * rank has the hellos of all the others, so they all decide alike, and
 * none waits for one that failed. */
static ipcp_status_t boot_one_node(const ipcp__boot_t *boot)
{
    for (int r = 0; r < boot->size; r++) {
        const ipcp__boot_peer_t *p = &boot->peers[r];
        if (p->node_hash == boot->node_hash)
            continue;
        return ipcp__fail(
            IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_UNSUPPORTED,
            "rank %d counts as on node '%s' and rank %d as on '%s' "
            "(IPCPIPE_NODE): ipcp_init joins the ranks of one node; start "
            "from an MPI communicator instead (ipcp_init_mpi, "
            "libipcpipe_mpi), or give each node's ranks a job of their own",
            boot->rank, boot->node, r, p->node);
    }
    return IPCP_OK;
}

static ipcp_status_t boot_rendezvous(boot_ctx_t *ctx)
{
    const ipcp__boot_t *boot = ctx->boot;
    ipcp_status_t st;
    size_t lower = (size_t)boot->rank + 1;
    double t0 = ipcp__now_s();

    ctx->deadline = t0 + boot->timeout_s;
    ctx->missing = boot->size - 1;
    ctx->out_fd = malloc(lower * sizeof(int));
    ctx->out_pid = calloc(lower, sizeof(pid_t));
    ctx->retry_at = calloc(lower, sizeof(double));
    ctx->pfds = calloc(1 + BOOT_PENDING_MAX + lower, sizeof(struct pollfd));
    if (!ctx->out_fd || !ctx->out_pid || !ctx->retry_at || !ctx->pfds)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_NOMEM,
                          "no memory for the rendezvous of %d ranks",
                          boot->size);
    for (size_t j = 0; j < lower; j++)
        ctx->out_fd[j] = -1;

    boot_hello_fill(&ctx->hello, boot, ctx->params->probe_addr);

    st = boot_make_dirs(ctx);
    if (st == IPCP_OK)
        st = boot_listen(ctx);
    if (st == IPCP_OK)
        st = boot_meet(ctx);
    if (st == IPCP_OK)
        IPCP_DEBUG(IPCP_SUB_BOOT, "rank %d met %d peers in %.3f s (%s)",
                   boot->rank, boot->size - 1, ipcp__now_s() - t0, boot->path);
    return st == IPCP_OK ? boot_one_node(boot) : st;
}

static ipcp_status_t boot_check_params(const ipcp__boot_params_t *p)
{
    size_t jl = strnlen(p->job, sizeof(p->job));
    if (p->size < 1 || p->size > BOOT_SIZE_MAX || p->rank < 0 ||
        p->rank >= p->size)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_INVALID,
                          "bootstrap: rank %d, size %d: need 0 <= rank < "
                          "size <= %d",
                          p->rank, p->size, BOOT_SIZE_MAX);
    if (jl == 0 || jl == sizeof(p->job) || p->job[0] == '.' ||
        strspn(p->job, boot_job_chars) != jl)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_INVALID,
                          "bootstrap: job name '%.*s' must be 1..%d characters "
                          "of [A-Za-z0-9._-], not starting with '.'",
                          (int)jl, p->job, IPCP_JOB_MAX - 1);
    if (!(p->timeout_s > 0) || p->timeout_s > 1e9)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_INVALID,
                          "bootstrap: timeout %g s must be positive",
                          p->timeout_s);
    return IPCP_OK;
}

/* Each peer keeps a socket, and poll() refuses more entries than
 * RLIMIT_NOFILE allows (EINVAL): a job larger than the limit is refused
 * at once, by name, rather than failing in a poll or running into the
 * timeout.  A soft limit below what the job needs is raised towards the
 * hard one. */
static ipcp_status_t boot_fd_budget(int size)
{
    uint64_t need = (uint64_t)size + BOOT_PENDING_MAX + BOOT_FD_SPARE;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        (uint64_t)rl.rlim_cur >= need)
        return IPCP_OK;
    if (rl.rlim_max == RLIM_INFINITY || (uint64_t)rl.rlim_max >= need) {
        rlim_t old = rl.rlim_cur;
        rl.rlim_cur = (rlim_t)need;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
            IPCP_INFO(IPCP_SUB_BOOT,
                      "raised the soft RLIMIT_NOFILE from %llu "
                      "to %llu for a job of %d ranks",
                      (unsigned long long)old, (unsigned long long)need, size);
            return IPCP_OK;
        }
    }
    return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                      "a job of %d ranks needs about %llu file descriptors "
                      "per rank; RLIMIT_NOFILE allows %llu (hard limit "
                      "%llu): raise it (ulimit -n)",
                      size, (unsigned long long)need,
                      (unsigned long long)rl.rlim_cur,
                      (unsigned long long)rl.rlim_max);
}

ipcp_status_t ipcp__boot_check(const ipcp__boot_params_t *params)
{
    ipcp_status_t st = boot_check_params(params);
    if (st == IPCP_OK && params->size > 1)
        st = boot_fd_budget(params->size);
    return st;
}

ipcp_status_t ipcp__boot_connect(const ipcp__boot_params_t *params,
                                 ipcp__boot_t **bootp)
{
    boot_ctx_t ctx;
    ipcp__boot_t *boot;
    ipcp_status_t st = ipcp__boot_check(params);
    if (st != IPCP_OK)
        return st;

    boot = calloc(1, sizeof(*boot));
    if (boot == NULL || (boot->peers = calloc((size_t)params->size,
                                              sizeof(*boot->peers))) == NULL) {
        free(boot);
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_NOMEM,
                          "no memory for %d bootstrap peers", params->size);
    }
    boot->rank = params->rank;
    boot->size = params->size;
    boot->timeout_s = params->timeout_s;
    boot->proto = params->proto;
    memcpy(boot->job, params->job, sizeof(boot->job));
    for (int r = 0; r < boot->size; r++)
        boot->peers[r].fd = -1;
    boot->peers[boot->rank].pid = getpid();
    boot->peers[boot->rank].probe_addr = params->probe_addr;
    boot->node_hash = params->node_hash;
    memcpy(boot->node, params->node, sizeof(boot->node));
    boot->peers[boot->rank].node_hash = params->node_hash;
    memcpy(boot->peers[boot->rank].node, params->node, sizeof(boot->node));

    memset(&ctx, 0, sizeof(ctx));
    ctx.params = params;
    ctx.boot = boot;
    ctx.basefd = ctx.udirfd = ctx.dirfd = ctx.lfd = -1;
    for (int i = 0; i < BOOT_PENDING_MAX; i++)
        ctx.pending[i].fd = -1;
    st = boot_build_path(&ctx);
    /* One rank alone has nobody to meet and touches no file. */
    if (st == IPCP_OK && boot->size > 1) {
        st = boot_rendezvous(&ctx);
        boot_ctx_cleanup(&ctx);
    }
    if (st != IPCP_OK) {
        ipcp__boot_destroy(boot);
        return st;
    }
    *bootp = boot;
    return IPCP_OK;
}

void ipcp__boot_destroy(ipcp__boot_t *boot)
{
    if (boot == NULL)
        return;
    for (int r = 0; boot->peers != NULL && r < boot->size; r++)
        if (boot->peers[r].fd >= 0)
            close(boot->peers[r].fd);
    free(boot->peers);
    free(boot);
}
