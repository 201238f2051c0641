/* One message at a time over a connected AF_UNIX SOCK_SEQPACKET socket,
 * with file descriptors attached as SCM_RIGHTS. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "common/status.h"
#include "common/time.h"

/* Control buffer large enough for IPCP_SOCK_MAX_FDS descriptors, aligned
 * as the CMSG_* macros require. */
typedef union sock_cmsg_buf {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * IPCP_SOCK_MAX_FDS)];
} sock_cmsg_buf_t;

static ipcp_status_t sock_check_args(const void *buf, size_t len,
                                     const int *fds, int nfds)
{
    /* A 0-byte SEQPACKET read is indistinguishable from end of stream, so
     * empty messages are refused at the sender. */
    if (buf == NULL || len == 0 || len > IPCP_SOCK_MSG_MAX)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_INVALID,
                          "socket message of %zu bytes: must be 1..%d bytes",
                          len, IPCP_SOCK_MSG_MAX);
    if (nfds < 0 || nfds > IPCP_SOCK_MAX_FDS || (nfds > 0 && fds == NULL))
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_INVALID,
                          "%d file descriptors on one socket message: at most "
                          "%d allowed",
                          nfds, IPCP_SOCK_MAX_FDS);
    return IPCP_OK;
}

ipcp_status_t ipcp__sock_send(int fd, const void *buf, size_t len,
                              const int *fds, int nfds, int nonblock)
{
    sock_cmsg_buf_t cbuf;
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    ipcp_status_t st = sock_check_args(buf, len, fds, nfds);
    if (st != IPCP_OK)
        return st;

    if (nfds > 0) {
        memset(&cbuf, 0, sizeof(cbuf));
        msg.msg_control = cbuf.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }

    /* MSG_NOSIGNAL: writing to a socket whose peer is gone must return
     * EPIPE instead of raising SIGPIPE, which would kill the application. */
    int flags = MSG_NOSIGNAL | (nonblock ? MSG_DONTWAIT : 0);
    ssize_t n;
    do {
        n = sendmsg(fd, &msg, flags);
    } while (n < 0 && errno == EINTR);

    if (n < 0) {
        int err = errno;
        if (nonblock && (err == EAGAIN || err == EWOULDBLOCK))
            return IPCP_IN_PROGRESS;
        if (err == EPIPE || err == ECONNRESET || err == ENOTCONN)
            return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_BOOT, IPCP_ERR_PEER_LOST,
                              "send on socket %d: peer is gone (%s)", fd,
                              strerror(err));
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                          "sendmsg of %zu bytes with %d fds on socket %d: %s",
                          len, nfds, fd, strerror(err));
    }
    /* SEQPACKET sends are atomic: a short count would mean a different
     * socket type. */
    if ((size_t)n != len)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                          "sendmsg on socket %d sent %zd of %zu bytes", fd, n,
                          len);
    return IPCP_OK;
}

/* Waits until fd is readable.  IPCP_IN_PROGRESS when timeout_s is 0 and
 * nothing is there; a positive timeout that expires is an error. */
static ipcp_status_t sock_wait_readable(int fd, double timeout_s)
{
    double deadline = ipcp__now_s() + timeout_s;
    for (;;) {
        int ms = -1;
        if (timeout_s >= 0) {
            double left = deadline - ipcp__now_s();
            ms = left <= 0                ? 0
                 : left >= INT_MAX / 1000 ? INT_MAX
                                          : (int)(left * 1e3) + 1;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, ms);
        if (r > 0)
            return IPCP_OK;
        if (r < 0 && errno != EINTR)
            return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                              "poll on socket %d: %s", fd, strerror(errno));
        if (r == 0 && timeout_s == 0)
            return IPCP_IN_PROGRESS;
        if (r == 0 && ms >= 0 && ipcp__now_s() >= deadline)
            return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_TIMEOUT,
                              "no message on socket %d within %.1f s", fd,
                              timeout_s);
    }
}

/* Takes the descriptors out of a received control buffer: the first maxfds
 * go to fds, the rest are closed.  Returns how many were kept. */
static int sock_take_fds(struct msghdr *msg, int *fds, int maxfds)
{
    int kept = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL;
         c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int rfd;
            memcpy(&rfd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (kept < maxfds)
                fds[kept++] = rfd;
            else
                close(rfd);
        }
    }
    return kept;
}

static void sock_close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

ipcp_status_t ipcp__sock_recv(int fd, void *buf, size_t cap, size_t *len,
                              int *fds, int maxfds, int *nfds, double timeout_s)
{
    sock_cmsg_buf_t cbuf;
    int got[IPCP_SOCK_MAX_FDS];
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    struct msghdr msg;
    ssize_t n;
    int reset = 0;

    if (maxfds < 0 || (maxfds > 0 && (fds == NULL || nfds == NULL)))
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_INVALID,
                          "socket receive: maxfds %d without room for them",
                          maxfds);
    for (;;) {
        ipcp_status_t st = sock_wait_readable(fd, timeout_s);
        if (st != IPCP_OK)
            return st;
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.buf;
        msg.msg_controllen = sizeof(cbuf.buf);
        /* MSG_CMSG_CLOEXEC sets close-on-exec atomically, so a concurrent
         * fork+exec elsewhere in the process cannot inherit the fds. */
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        /* A peer that ended with messages of ours unread leaves a reset on
         * the socket, which Linux hands to the next call once, ahead of the
         * messages the peer sent before it ended: read on, they come, and
         * after them the end (a hang-up, never EAGAIN). */
        if (n < 0 && errno == ECONNRESET && !reset) {
            reset = 1;
            continue;
        }
        if (n >= 0 || (errno != EINTR && errno != EAGAIN))
            break;
    }
    if (n < 0) {
        int err = errno;
        if (err == ECONNRESET || err == ENOTCONN || err == EPIPE)
            return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_BOOT, IPCP_ERR_PEER_LOST,
                              "receive on socket %d: peer is gone (%s)", fd,
                              strerror(err));
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                          "recvmsg on socket %d: %s", fd, strerror(err));
    }

    int kept = sock_take_fds(&msg, got, maxfds);
    if (n == 0) {
        sock_close_fds(got, kept);
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_BOOT, IPCP_ERR_PEER_LOST,
                          "receive on socket %d: peer closed the connection",
                          fd);
    }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        sock_close_fds(got, kept);
        if (msg.msg_flags & MSG_TRUNC)
            return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_TRUNCATED,
                              "message on socket %d is larger than the "
                              "%zu-byte receive buffer",
                              fd, cap);
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_TRUNCATED,
                          "message on socket %d carried more than %d file "
                          "descriptors; the rest were dropped",
                          fd, IPCP_SOCK_MAX_FDS);
    }
    if (kept > 0)
        memcpy(fds, got, sizeof(int) * (size_t)kept);
    if (nfds != NULL)
        *nfds = kept;
    *len = (size_t)n;
    return IPCP_OK;
}
