#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

int ipcp__log_level = IPCP_LOG_WARN;
unsigned ipcp__log_mask = IPCP_SUB_ALL;
static int ipcp__log_rank = -1;

static const char *const ipcp__level_names[] = {"none", "error", "warn",
                                                "info", "debug", "trace"};

static const char *ipcp__subsys_name(int subsys)
{
#define IPCP_SUBSYS_NAME_(n, s)                                                \
    if (subsys & IPCP_SUB_##n)                                                 \
        return s;
    IPCP_SUBSYS_MAP(IPCP_SUBSYS_NAME_)
#undef IPCP_SUBSYS_NAME_
    return "?";
}

void ipcp__log_set_rank(int rank)
{
    __atomic_store_n(&ipcp__log_rank, rank, __ATOMIC_RELAXED);
}

/* Where lines go: stderr unless IPCPIPE_LOG_FILE opened a file. */
static int ipcp__log_fd = 2;

/* Expands %h and %p of pattern into out; -1 if it does not fit. */
static int ipcp__log_expand(const char *pattern, char *out, size_t cap)
{
    char host[64] = "?";
    size_t n = 0;
    gethostname(host, sizeof(host) - 1);
    for (const char *p = pattern; *p; p++) {
        char pid[16];
        const char *add = NULL;
        char one[2] = {*p, '\0'};
        if (*p == '%' && (p[1] == 'h' || p[1] == 'p' || p[1] == '%')) {
            snprintf(pid, sizeof(pid), "%d", (int)getpid());
            add = *++p == 'h' ? host : *p == 'p' ? pid : "%";
        } else {
            add = one;
        }
        size_t l = strlen(add);
        if (n + l >= cap)
            return -1;
        memcpy(out + n, add, l + 1);
        n += l;
    }
    return 0;
}

void ipcp__log_open(const char *pattern)
{
    char path[4096];
    int fd = -1;
    if (ipcp__log_expand(pattern, path, sizeof(path)) == 0)
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        IPCP_WARN(IPCP_SUB_ENV,
                  "IPCPIPE_LOG_FILE=%s: cannot open: %s; the "
                  "log stays on stderr",
                  pattern, errno ? strerror(errno) : "name too long");
        return;
    }
    __atomic_store_n(&ipcp__log_fd, fd, __ATOMIC_RELEASE);
}

void ipcp__log_write(int level, int subsys, const char *file, int line,
                     const char *fmt, ...)
{
    char host[64] = "?";
    /* At most PIPE_BUF (4096) bytes: one write of that size to a pipe is
     * never interleaved with another's. */
    char buf[4096];
    struct timeval tv;
    va_list ap;

    gethostname(host, sizeof(host) - 1);
    gettimeofday(&tv, NULL);
    const char *base = strrchr(file, '/');
    int n = snprintf(
        buf, sizeof(buf),
        "%s:%d [%d] %ld.%06ld ipcpipe %s %s "
        "%s:%d ",
        host, (int)getpid(), __atomic_load_n(&ipcp__log_rank, __ATOMIC_RELAXED),
        (long)tv.tv_sec, (long)tv.tv_usec, ipcp__subsys_name(subsys),
        level >= 0 && level <= IPCP_LOG_TRACE ? ipcp__level_names[level] : "?",
        base ? base + 1 : file, line);
    if (n < 0 || (size_t)n >= sizeof(buf) - 2)
        n = 0;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - 1 - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len =
        (size_t)n +
        (m < 0 ? 0 : ipcp__min((size_t)m, sizeof(buf) - 2 - (size_t)n));
    buf[len++] = '\n';
    /* One write per line: lines of other threads and processes that
     * share the file or pipe come before or after it, never inside.
     * stdio's stderr is unbuffered and may write a line in pieces. */
    int fd = __atomic_load_n(&ipcp__log_fd, __ATOMIC_ACQUIRE);
    ssize_t w;
    do {
        w = write(fd, buf, len);
    } while (w < 0 && errno == EINTR);
}
