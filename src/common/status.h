/* Error reporting: every failure is a status plus a message naming its
 * cause.  The message is kept per thread for ipcp_last_error(). */
#ifndef IPCP_COMMON_STATUS_H
#define IPCP_COMMON_STATUS_H

#include <stdint.h>

#include "ipcpipe.h"
#include "log.h"

#define IPCP_ERRMSG_MAX 320

/* Formats the message, stores it as this thread's last error, logs it at
 * `level` for `subsys`, and returns st.  Call it once, where the error is
 * found; callers further up just return the status.  Exported for the
 * library's own modules built apart (libipcpipe_mpi), not for users. */
IPCP_API ipcp_status_t ipcp__fail(int level, int subsys, ipcp_status_t st,
                                  const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Stores msg as this thread's last error without logging (used to hand a
 * request's message to the thread that waits on it). */
/* An error status that came from a peer (a CTS, a map reply, an error
 * slot): itself when it is one of our error statuses, else IPCP_ERR_STATE,
 * so that a broken or hostile peer cannot make a call return a value
 * outside ipcp_status_t, or a success code for a failure. */
ipcp_status_t ipcp__peer_status(int64_t v);

void ipcp__set_last_error(const char *msg);
const char *ipcp__last_error(void);

#endif
