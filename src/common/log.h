/* Logging: lines start with host:pid, the rank when known, the subsystem
 * and the level.  IPCPIPE_LOG_LEVEL and IPCPIPE_LOG_SUBSYS choose what is
 * printed, to stderr or IPCPIPE_LOG_FILE; each line is one write(2), so
 * that the lines of several processes sharing a file or pipe never cut
 * into each other. */
#ifndef IPCP_COMMON_LOG_H
#define IPCP_COMMON_LOG_H

enum {
    IPCP_LOG_NONE = 0,
    IPCP_LOG_ERROR = 1,
    IPCP_LOG_WARN = 2,
    IPCP_LOG_INFO = 3,
    IPCP_LOG_DEBUG = 4,
    IPCP_LOG_TRACE = 5,
};

/* Subsystems, one bit each. */
#define IPCP_SUBSYS_MAP(X)                                                     \
    X(INIT, "init")                                                            \
    X(BOOT, "boot")                                                            \
    X(ENGINE, "engine")                                                        \
    X(HOST, "host")                                                            \
    X(CUDA, "cuda")                                                            \
    X(API, "api")                                                              \
    X(ENV, "env")

enum {
#define IPCP_SUBSYS_BIT_(n, s) IPCP_SUBSYS_BIT_##n,
    IPCP_SUBSYS_MAP(IPCP_SUBSYS_BIT_)
#undef IPCP_SUBSYS_BIT_
        IPCP_SUBSYS_COUNT
};
enum {
#define IPCP_SUBSYS_ENUM_(n, s) IPCP_SUB_##n = 1 << IPCP_SUBSYS_BIT_##n,
    IPCP_SUBSYS_MAP(IPCP_SUBSYS_ENUM_)
#undef IPCP_SUBSYS_ENUM_
};
#define IPCP_SUB_ALL ((1 << IPCP_SUBSYS_COUNT) - 1)

/* Current level and subsystem mask, as loaded from the settings. */
extern int ipcp__log_level;
extern unsigned ipcp__log_mask;

void ipcp__log_set_rank(int rank);
/* Sends the log to the file named by pattern (%h: host name, %p: pid,
 * %%: a percent sign), appended; on failure it stays on stderr, with a
 * line that says why. */
void ipcp__log_open(const char *pattern);
void ipcp__log_write(int level, int subsys, const char *file, int line,
                     const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define ipcp__log_enabled(level, subsys)                                       \
    ((level) <= __atomic_load_n(&ipcp__log_level, __ATOMIC_RELAXED) &&         \
     ((subsys)&__atomic_load_n(&ipcp__log_mask, __ATOMIC_RELAXED)))

#define IPCP_LOG(level, subsys, ...)                                           \
    do {                                                                       \
        if (ipcp__log_enabled(level, subsys))                                  \
            ipcp__log_write(level, subsys, __FILE__, __LINE__, __VA_ARGS__);   \
    } while (0)

#define IPCP_ERROR(sub, ...) IPCP_LOG(IPCP_LOG_ERROR, sub, __VA_ARGS__)
#define IPCP_WARN(sub, ...)  IPCP_LOG(IPCP_LOG_WARN, sub, __VA_ARGS__)
#define IPCP_INFO(sub, ...)  IPCP_LOG(IPCP_LOG_INFO, sub, __VA_ARGS__)
#define IPCP_DEBUG(sub, ...) IPCP_LOG(IPCP_LOG_DEBUG, sub, __VA_ARGS__)
#define IPCP_TRACE(sub, ...) IPCP_LOG(IPCP_LOG_TRACE, sub, __VA_ARGS__)

#endif
