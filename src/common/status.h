/* Error reporting: every failure is a status plus a message naming its
 * cause.  The message is kept per thread for ipcp_last_error(). */
#ifndef IPCP_COMMON_STATUS_H
#define IPCP_COMMON_STATUS_H

#include "ipcpipe.h"
#include "log.h"

#define IPCP_ERRMSG_MAX 320

/* Formats the message, stores it as this thread's last error, logs it at
 * `level` for `subsys`, and returns st.  Call it once, where the error is
 * found; callers further up just return the status. */
ipcp_status_t ipcp__fail(int level, int subsys, ipcp_status_t st,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Stores msg as this thread's last error without logging (used to hand a
 * request's message to the thread that waits on it). */
void ipcp__set_last_error(const char *msg);
const char *ipcp__last_error(void);

#endif
