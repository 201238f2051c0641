/* The lock-order check of IPCP_LOCK_CHECK builds (common/lockorder.h). */
#include "common/lockorder.h"

#ifdef IPCP_LOCK_CHECK
#include <stdio.h>
#include <stdlib.h>

static const char *const ipcp__lock_names[IPCP_LOCK_RANKS] = {
    [IPCP_LOCK_DEV] = "dev_lock",   [IPCP_LOCK_PROG] = "prog_lock",
    [IPCP_LOCK_RX] = "rx_lock",     [IPCP_LOCK_TX] = "tx_lock",
    [IPCP_LOCK_LANE] = "lane_lock", [IPCP_LOCK_SYNC] = "sync_lock",
    [IPCP_LOCK_MEM] = "mem_lock",   [IPCP_LOCK_COMM] = "comm->lock",
};

/* The locks this thread holds, in the order taken. */
#define IPCP_LOCK_HELD_MAX 32
static _Thread_local struct {
    const void *m;
    int rank;
} ipcp__held[IPCP_LOCK_HELD_MAX];
static _Thread_local int ipcp__nheld;

static int ipcp__nkept(void)
{
    return ipcp__nheld < IPCP_LOCK_HELD_MAX ? ipcp__nheld : IPCP_LOCK_HELD_MAX;
}

void ipcp__lock_wait_check(const void *m, int rank)
{
    int n = ipcp__nkept();
    /* A recursive lock this thread holds already cannot make it wait. */
    for (int i = 0; rank == IPCP_LOCK_RX && i < n; i++)
        if (ipcp__held[i].m == m)
            return;
    for (int i = 0; i < n; i++) {
        int r = ipcp__held[i].rank;
        if (r < rank)
            continue;
        /* IPCP_LOCK_CHECK_LOG=file: every break noted there, and the
         * process goes on (to survey an order before enforcing it). */
        const char *log = getenv("IPCP_LOCK_CHECK_LOG");
        FILE *f = log ? fopen(log, "a") : stderr;
        if (f) {
            fprintf(f,
                    "ipcpipe: lock order broken: waiting for %s (%p) while "
                    "holding %s (%p); common/lockorder.h gives the order\n",
                    ipcp__lock_names[rank], (const void *)m,
                    ipcp__lock_names[r], (const void *)ipcp__held[i].m);
            if (f != stderr)
                fclose(f);
        }
        if (!log)
            abort();
    }
}

void ipcp__lock_note_held(const void *m, int rank)
{
    if (ipcp__nheld < IPCP_LOCK_HELD_MAX) {
        ipcp__held[ipcp__nheld].m = m;
        ipcp__held[ipcp__nheld].rank = rank;
    }
    ipcp__nheld++;
}

void ipcp__lock_note_released(const void *m, int rank)
{
    (void)rank;
    int n = ipcp__nkept();
    if (ipcp__nheld > IPCP_LOCK_HELD_MAX) { /* the newest were not kept */
        ipcp__nheld--;
        return;
    }
    for (int i = n - 1; i >= 0; i--)
        if (ipcp__held[i].m == m) {
            for (int j = i; j + 1 < n; j++)
                ipcp__held[j] = ipcp__held[j + 1];
            ipcp__nheld--;
            return;
        }
}
#endif
