#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "status.h"
#include "util.h"

static _Thread_local char ipcp__errmsg[IPCP_ERRMSG_MAX];

const char *ipcp_strerror(ipcp_status_t status)
{
    switch (status) {
#define IPCP_STATUS_NAME_(name, value, desc)                                   \
    case IPCP_##name:                                                          \
        return "IPCP_" #name;
        IPCP_STATUS_MAP(IPCP_STATUS_NAME_)
#undef IPCP_STATUS_NAME_
    }
    return "IPCP_UNKNOWN_STATUS";
}

const char *ipcp_status_desc(ipcp_status_t status)
{
    switch (status) {
#define IPCP_STATUS_DESC_(name, value, desc)                                   \
    case IPCP_##name:                                                          \
        return desc;
        IPCP_STATUS_MAP(IPCP_STATUS_DESC_)
#undef IPCP_STATUS_DESC_
    }
    return "unknown status";
}

const char *ipcp_last_error(void)
{
    return ipcp__errmsg;
}

const char *ipcp__last_error(void)
{
    return ipcp__errmsg;
}

void ipcp__set_last_error(const char *msg)
{
    snprintf(ipcp__errmsg, sizeof(ipcp__errmsg), "%s", msg ? msg : "");
}

ipcp_status_t ipcp__fail(int level, int subsys, ipcp_status_t st,
                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ipcp__errmsg, sizeof(ipcp__errmsg), fmt, ap);
    va_end(ap);
    IPCP_LOG(level, subsys, "%s (%s)", ipcp__errmsg, ipcp_strerror(st));
    return st;
}

ipcp_status_t ipcp__peer_status(int64_t v)
{
    switch (v) {
#define IPCP_STATUS_PEER_(name, value, desc)                                   \
    case IPCP_##name:                                                          \
        return (value) < 0 ? IPCP_##name : IPCP_ERR_STATE;
        IPCP_STATUS_MAP(IPCP_STATUS_PEER_)
#undef IPCP_STATUS_PEER_
    }
    return IPCP_ERR_STATE;
}
