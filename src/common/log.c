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

static const char *const ipcp__level_names[] = {"none",  "error", "warn",
                                                "info",  "debug", "trace"};

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

void ipcp__log_write(int level, int subsys, const char *file, int line,
                     const char *fmt, ...)
{
    char host[64] = "?";
    char msg[1024];
    struct timeval tv;
    va_list ap;

    gethostname(host, sizeof(host) - 1);
    gettimeofday(&tv, NULL);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    /* One fprintf per line so lines of concurrent threads do not mix. */
    fprintf(stderr, "%s:%d [%d] %ld.%06ld ipcpipe %s %s %s:%d %s\n", host,
            (int)getpid(), __atomic_load_n(&ipcp__log_rank, __ATOMIC_RELAXED),
            (long)tv.tv_sec, (long)tv.tv_usec, ipcp__subsys_name(subsys),
            level >= 0 && level <= IPCP_LOG_TRACE ? ipcp__level_names[level]
                                                  : "?",
            base ? base + 1 : file, line, msg);
}
