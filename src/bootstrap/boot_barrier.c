/* The rendezvous's barrier: a token to rank 0 and back over the sockets the
 * ranks keep. */
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

/* ------------------------------------------------------------------------ */
/* Barrier                                                                   */

/* Sends our token to rank r, waiting for room no later than deadline. */
static ipcp_status_t boot_barrier_send(ipcp__boot_t *boot, int r,
                                       double deadline)
{
    boot_token_t tok = {IPCP_BOOT_MAGIC, BOOT_TOKEN_BARRIER, boot->rank};
    int fd = boot->peers[r].fd;
    for (;;) {
        ssize_t n = send(fd, &tok, sizeof(tok), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == (ssize_t)sizeof(tok))
            return IPCP_OK;
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
            return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_PEER_LOST,
                              "barrier of job '%s': rank %d is gone (%s)",
                              boot->job, r, strerror(errno));
        if (n >= 0 || (errno != EAGAIN && errno != EINTR))
            return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                              "barrier of job '%s': send to rank %d: %s",
                              boot->job, r,
                              n >= 0 ? "short send" : strerror(errno));
        double now = ipcp__now_s();
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (now >= deadline ||
            (poll(&p, 1, boot_ms_until(deadline, now)) == 0 &&
             ipcp__now_s() >= deadline))
            return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_TIMEOUT,
                              "barrier of job '%s': rank %d took no message "
                              "within %.1f s",
                              boot->job, r, boot->timeout_s);
    }
}

/* Takes rank r's token off its socket. */
static ipcp_status_t boot_barrier_take(ipcp__boot_t *boot, int r, char *arrived)
{
    boot_token_t tok;
    char raw[sizeof(tok) + 16];
    ssize_t n = boot_recv_msg(boot->peers[r].fd, raw, sizeof(raw));
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return IPCP_OK;
    if (n == 0 || (n < 0 && errno == ECONNRESET))
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_PEER_LOST,
                          "barrier of job '%s': rank %d left (its connection "
                          "closed)",
                          boot->job, r);
    if (n < 0)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_SYSTEM,
                          "barrier of job '%s': receive from rank %d: %s",
                          boot->job, r, strerror(errno));
    memcpy(&tok, raw, ipcp__min((size_t)n, sizeof(tok)));
    if (n != (ssize_t)sizeof(tok) || tok.magic != IPCP_BOOT_MAGIC ||
        tok.kind != BOOT_TOKEN_BARRIER || tok.rank != r)
        return ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_BOOTSTRAP,
                          "barrier of job '%s': unexpected %zd-byte message "
                          "from rank %d",
                          boot->job, n, r);
    arrived[r] = 1;
    return IPCP_OK;
}

static ipcp_status_t boot_barrier_wait(ipcp__boot_t *boot, char *arrived,
                                       struct pollfd *pfds, double deadline)
{
    ipcp_status_t st = IPCP_OK;
    int left = boot->size - 1;
    while (st == IPCP_OK && left > 0) {
        double now = ipcp__now_s();
        if (now >= deadline) {
            char list[96];
            int count = boot_rank_list(boot, arrived, list, sizeof(list));
            return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_TIMEOUT,
                              "barrier of job '%s': %s %s of %d did not "
                              "arrive within %.1f s",
                              boot->job, count == 1 ? "rank" : "ranks", list,
                              boot->size, boot->timeout_s);
        }
        for (int r = 0; r < boot->size; r++) {
            pfds[r].fd = arrived[r] ? -1 : boot->peers[r].fd;
            pfds[r].events = POLLIN;
            pfds[r].revents = 0;
        }
        if (poll(pfds, (nfds_t)boot->size, boot_ms_until(deadline, now)) < 0 &&
            errno != EINTR)
            return boot_errno_fail(IPCP_ERR_SYSTEM, errno,
                                   "poll for barrier of", boot->job);
        for (int r = 0; st == IPCP_OK && r < boot->size; r++) {
            if (pfds[r].fd < 0 || !pfds[r].revents)
                continue;
            st = boot_barrier_take(boot, r, arrived);
            left -= arrived[r];
        }
    }
    return st;
}

/* Every rank sends a token to every other and waits for one from each:
 * O(size^2) small messages, fine for the bootstrap's few barriers, and the
 * socket keeps tokens of a later barrier queued behind the current one. */
ipcp_status_t ipcp__boot_barrier(ipcp__boot_t *boot)
{
    double deadline = ipcp__now_s() + boot->timeout_s;
    ipcp_status_t st = IPCP_OK;
    if (boot->size == 1)
        return IPCP_OK;
    char *arrived = calloc((size_t)boot->size, 1);
    struct pollfd *pfds = calloc((size_t)boot->size, sizeof(*pfds));
    if (arrived == NULL || pfds == NULL) {
        st = ipcp__fail(IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_NOMEM,
                        "no memory for a barrier of %d ranks", boot->size);
        goto free_arrays;
    }
    arrived[boot->rank] = 1;
    for (int r = 0; st == IPCP_OK && r < boot->size; r++)
        if (r != boot->rank)
            st = boot_barrier_send(boot, r, deadline);
    if (st == IPCP_OK)
        st = boot_barrier_wait(boot, arrived, pfds, deadline);
free_arrays:
    free(pfds);
    free(arrived);
    return st;
}
