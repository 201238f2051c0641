/* ipcp__sock_send / ipcp__sock_recv over a socketpair: messages, file
 * descriptors, truncation, timeouts and a vanished peer. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"
#include "bootstrap/bootstrap.h"
#include "common/time.h"

static void pair(int sv[2])
{
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        T_FAIL("socketpair: %s", strerror(errno));
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (d == NULL)
        T_FAIL("opendir /proc/self/fd: %s", strerror(errno));
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

static void case_roundtrip(void)
{
    int sv[2];
    char in[IPCP_SOCK_MSG_MAX], out[IPCP_SOCK_MSG_MAX];
    size_t len = 0;
    pair(sv);
    uint64_t seed = t_fresh_seed();
    t_fill(in, sizeof(in), seed);
    T_OK(ipcp__sock_send(sv[0], in, 1, NULL, 0, 0));
    T_OK(ipcp__sock_send(sv[0], in, sizeof(in), NULL, 0, 0));
    T_OK(ipcp__sock_recv(sv[1], out, sizeof(out), &len, NULL, 0, NULL, 1.0));
    T_EQ_INT(len, 1);
    T_EQ_INT(out[0], in[0]);
    /* Message boundaries hold: the second comes whole. */
    T_OK(ipcp__sock_recv(sv[1], out, sizeof(out), &len, NULL, 0, NULL, -1));
    T_EQ_INT(len, sizeof(out));
    t_verify(out, len, seed, "64 KiB message");
    close(sv[0]);
    close(sv[1]);
}

static void case_args(void)
{
    int sv[2], fds[IPCP_SOCK_MAX_FDS + 1] = {0};
    char buf[16] = {0};
    static char big[IPCP_SOCK_MSG_MAX + 1];
    pair(sv);
    T_STATUS(ipcp__sock_send(sv[0], buf, 0, NULL, 0, 0), IPCP_ERR_INVALID);
    T_STATUS(ipcp__sock_send(sv[0], big, sizeof(big), NULL, 0, 0),
             IPCP_ERR_INVALID);
    T_MSG_HAS("65537");
    T_STATUS(ipcp__sock_send(sv[0], buf, 1, fds, IPCP_SOCK_MAX_FDS + 1, 0),
             IPCP_ERR_INVALID);
    T_STATUS(ipcp__sock_send(sv[0], buf, 1, NULL, 1, 0), IPCP_ERR_INVALID);
    close(sv[0]);
    close(sv[1]);
}

static void case_truncated(void)
{
    int sv[2];
    char buf[100] = {1}, small[10];
    size_t len = 0;
    pair(sv);
    T_OK(ipcp__sock_send(sv[0], buf, sizeof(buf), NULL, 0, 0));
    T_STATUS(
        ipcp__sock_recv(sv[1], small, sizeof(small), &len, NULL, 0, NULL, 1.0),
        IPCP_ERR_TRUNCATED);
    T_MSG_HAS("larger than the 10-byte receive buffer");
    close(sv[0]);
    close(sv[1]);
}

static void case_poll(void)
{
    int sv[2];
    char buf[8];
    size_t len;
    pair(sv);
    T_STATUS(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, NULL, 0, NULL, 0),
             IPCP_IN_PROGRESS);
    double t0 = ipcp__now_s();
    T_STATUS(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, NULL, 0, NULL, 0.2),
             IPCP_ERR_TIMEOUT);
    double dt = ipcp__now_s() - t0;
    if (dt < 0.19 || dt > 2.0)
        T_FAIL("0.2 s receive timeout took %.3f s", dt);
    /* A full socket: nonblocking sends stop with IN_PROGRESS. */
    int i, st = IPCP_OK;
    static char chunk[4096];
    for (i = 0; i < 100000 && st == IPCP_OK; i++)
        st = ipcp__sock_send(sv[0], chunk, sizeof(chunk), NULL, 0, 1);
    T_EQ_INT(st, IPCP_IN_PROGRESS);
    T_CHECK(i > 1);
    close(sv[0]);
    close(sv[1]);
}

static int make_pipe_fds(int *fds, int n)
{
    for (int i = 0; i < n; i += 2) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0)
            T_FAIL("pipe2: %s", strerror(errno));
        fds[i] = p[0];
        if (i + 1 < n)
            fds[i + 1] = p[1];
        else
            close(p[1]);
    }
    return n;
}

static void case_fds(void)
{
    int sv[2], sent[3], got[IPCP_SOCK_MAX_FDS], nfds = -1;
    char msg = 'x', buf[4];
    size_t len;
    pair(sv);
    make_pipe_fds(sent, 3);
    T_OK(ipcp__sock_send(sv[0], &msg, 1, sent, 3, 0));
    T_OK(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, got, IPCP_SOCK_MAX_FDS,
                         &nfds, 1.0));
    T_EQ_INT(nfds, 3);
    for (int i = 0; i < 3; i++) {
        T_CHECK(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
        close(got[i]);
    }
    /* More descriptors than the receiver takes: the rest are closed. */
    T_OK(ipcp__sock_send(sv[0], &msg, 1, sent, 3, 0));
    int before = count_fds();
    T_OK(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, got, 1, &nfds, 1.0));
    T_EQ_INT(nfds, 1);
    T_EQ_INT(count_fds(), before + 1);
    close(got[0]);
    /* None at all wanted. */
    T_OK(ipcp__sock_send(sv[0], &msg, 1, sent, 2, 0));
    before = count_fds();
    T_OK(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, NULL, 0, NULL, 1.0));
    T_EQ_INT(count_fds(), before);
    for (int i = 0; i < 3; i++)
        close(sent[i]);
    close(sv[0]);
    close(sv[1]);
}

/* A sender that attaches more descriptors than IPCP_SOCK_MAX_FDS: the
 * kernel drops what does not fit (MSG_CTRUNC), which must be an error, and
 * none of the received ones may leak. */
static void case_ctrunc(void)
{
    enum { N = IPCP_SOCK_MAX_FDS + 3 };
    int sv[2], sent[N], got[IPCP_SOCK_MAX_FDS], nfds;
    char msg = 'x', buf[4];
    size_t len;
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(sizeof(int) * N)];
    } cbuf;
    struct iovec iov = {.iov_base = &msg, .iov_len = 1};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cbuf.b,
                        .msg_controllen = sizeof(cbuf.b)};
    pair(sv);
    make_pipe_fds(sent, N);
    memset(&cbuf, 0, sizeof(cbuf));
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * N);
    memcpy(CMSG_DATA(c), sent, sizeof(sent));
    if (sendmsg(sv[0], &mh, 0) != 1)
        T_FAIL("sendmsg: %s", strerror(errno));
    int before = count_fds();
    T_STATUS(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, got,
                             IPCP_SOCK_MAX_FDS, &nfds, 1.0),
             IPCP_ERR_TRUNCATED);
    T_MSG_HAS("file descriptors");
    T_EQ_INT(count_fds(), before);
    for (int i = 0; i < N; i++)
        close(sent[i]);
    close(sv[0]);
    close(sv[1]);
}

static void case_peer_gone(void)
{
    int sv[2];
    char buf[8] = {0};
    size_t len;
    /* Default SIGPIPE disposition: a send without MSG_NOSIGNAL would kill
     * this test. */
    signal(SIGPIPE, SIG_DFL);
    pair(sv);
    T_OK(ipcp__sock_send(sv[0], buf, 4, NULL, 0, 0));
    close(sv[0]);
    /* What was sent before the close is still delivered, then EOF. */
    T_OK(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, NULL, 0, NULL, 1.0));
    T_EQ_INT(len, 4);
    T_STATUS(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, NULL, 0, NULL, 1.0),
             IPCP_ERR_PEER_LOST);
    T_MSG_HAS("closed");
    T_STATUS(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, NULL, 0, NULL, -1),
             IPCP_ERR_PEER_LOST);
    T_STATUS(ipcp__sock_send(sv[1], buf, 4, NULL, 0, 0), IPCP_ERR_PEER_LOST);
    T_STATUS(ipcp__sock_send(sv[1], buf, 4, NULL, 0, 1), IPCP_ERR_PEER_LOST);
    close(sv[1]);
}

/* A peer that ends with messages of ours unread leaves a reset, which the
 * kernel reports to the next call on the socket ahead of what the peer sent
 * before it ended: a receive reads on, the messages come, then the end. */
static void case_reset(void)
{
    int sv[2];
    char buf[16] = {0};
    size_t len = 0;
    pair(sv);
    T_OK(ipcp__sock_send(sv[1], "unread", 6, NULL, 0, 0));
    T_OK(ipcp__sock_send(sv[0], "first", 5, NULL, 0, 0));
    T_OK(ipcp__sock_send(sv[0], "second!", 7, NULL, 0, 0));
    close(sv[0]);
    T_OK(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, NULL, 0, NULL, 0));
    T_EQ_INT(len, 5);
    T_CHECK(memcmp(buf, "first", 5) == 0);
    T_OK(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, NULL, 0, NULL, 0));
    T_EQ_INT(len, 7);
    T_CHECK(memcmp(buf, "second!", 7) == 0);
    T_STATUS(ipcp__sock_recv(sv[1], buf, sizeof(buf), &len, NULL, 0, NULL, 0),
             IPCP_ERR_PEER_LOST);
    T_MSG_HAS("closed the connection");
    close(sv[1]);
}

static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"sock_roundtrip", case_roundtrip},
    {"sock_args", case_args},
    {"sock_truncated", case_truncated},
    {"sock_poll", case_poll},
    {"sock_fds", case_fds},
    {"sock_ctrunc", case_ctrunc},
    {"sock_peer_gone", case_peer_gone},
    {"sock_reset", case_reset},
};

int main(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    cases[i].fn();
    return 0;
}
