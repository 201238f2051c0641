/* IPCPIPE_FAULT: a testing aid that makes this process die (SIGKILL) or
 * hang (SIGSTOP) at a named protocol stage (common/fault.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "log.h"

int ipcp__fault_stage = IPCP_FAULT_NONE;
static int ipcp__fault_action;
static unsigned ipcp__fault_count;
static unsigned ipcp__fault_seen;

static const char *const ipcp__fault_stage_names[IPCP_FAULT_NSTAGES] = {
    [IPCP_FAULT_NONE] = "",
    [IPCP_FAULT_RTS_POSTED] = "rts-posted",
    [IPCP_FAULT_GET_POSTED] = "get-posted",
    [IPCP_FAULT_RTS_MATCHED] = "rts-matched",
    [IPCP_FAULT_CTS_POSTED] = "cts-posted",
    [IPCP_FAULT_CTS_RECEIVED] = "cts-received",
    [IPCP_FAULT_STAGED_CHUNK] = "staged-chunk",
    [IPCP_FAULT_DATA_IN_PLACE] = "data-in-place",
    [IPCP_FAULT_ONESIDED_ENQUEUED] = "onesided-enqueued",
    [IPCP_FAULT_MAP_REQUESTED] = "map-requested",
    [IPCP_FAULT_BARRIER_ENTERED] = "barrier-entered",
    [IPCP_FAULT_BYE_SENT] = "bye-sent",
    [IPCP_FAULT_BYE_RECEIVED] = "bye-received",
};

int ipcp__fault_parse(const char *s, ipcp__fault_t *out)
{
    char buf[64], *stage, *action, *count, *save = NULL, *end;
    ipcp__fault_t f = {IPCP_FAULT_NONE, IPCP_FAULT_KILL, 1};
    if (strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    stage = strtok_r(buf, ":", &save);
    action = strtok_r(NULL, ":", &save);
    count = strtok_r(NULL, ":", &save);
    if (!stage || !action || strtok_r(NULL, ":", &save))
        return -1;
    for (int i = 1; i < IPCP_FAULT_NSTAGES; i++)
        if (strcmp(stage, ipcp__fault_stage_names[i]) == 0)
            f.stage = i;
    if (f.stage == IPCP_FAULT_NONE)
        return -1;
    if (strcmp(action, "stop") == 0)
        f.action = IPCP_FAULT_STOP;
    else if (strcmp(action, "kill") != 0)
        return -1;
    if (count) {
        unsigned long n = strtoul(count, &end, 10);
        if (*count < '1' || *count > '9' || *end || n > 1000000)
            return -1;
        f.count = (unsigned)n;
    }
    *out = f;
    return 0;
}

void ipcp__fault_arm(const ipcp__fault_t *f)
{
    ipcp__fault_action = f->action;
    ipcp__fault_count = f->count ? f->count : 1;
    __atomic_store_n(&ipcp__fault_seen, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ipcp__fault_stage, f->stage, __ATOMIC_RELEASE);
}

void ipcp__fault_names(char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 1; i < IPCP_FAULT_NSTAGES && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i > 1 ? "|" : "",
                              ipcp__fault_stage_names[i]);
}

void ipcp__fault_hit(int stage)
{
    unsigned seen = __atomic_add_fetch(&ipcp__fault_seen, 1, __ATOMIC_RELAXED);
    if (seen != ipcp__fault_count)
        return;
    int sig = ipcp__fault_action == IPCP_FAULT_STOP ? SIGSTOP : SIGKILL;
    IPCP_WARN(IPCP_SUB_ENGINE, "IPCPIPE_FAULT: %s at %s (time %u)",
              sig == SIGSTOP ? "stopping" : "killing",
              ipcp__fault_stage_names[stage], seen);
    /* Directed at this thread, which then stops (or dies) before its next
     * instruction, with every other thread of the process: a signal sent
     * to the process is taken by the main thread, and this one would run
     * on for a while (long enough to send the message the stage
     * precedes). */
    raise(sig);
}
