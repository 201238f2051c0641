/* Fuzzes the packed memory descriptor (ipcp_rmem_import's decoder,
 * ipcp__rmem_prepare in engine/mem.c): bytes that come from another
 * process.  The first byte of an input picks fix-ups that let mutations
 * reach the checks behind the first ones (bit 1: the owner's pid is set to
 * the pid this rank knows for it; bit 0: the checksum is recomputed); the
 * rest is the descriptor.  A descriptor that passes must name a peer
 * of a valid rank and pid and a known memory type, or (the job spans
 * nodes) a rank on another node and an address there. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/mem.h"
#include "engine/remote.h"
#include "fuzz_common.h"

#define FUZZ_SIZE 3
#define FUZZ_RANK 1
/* ipcp__desc_t's layout (engine/mem.c): the owner's rank and pid, and the
 * checksum in the last 8 bytes over all that comes before. */
#define FUZZ_DESC_LEN   96
#define FUZZ_DESC_OWNER 24
#define FUZZ_DESC_PID   28

static ipcp_comm_t fuzz_comm;
static ipcp__peer_t fuzz_peers[FUZZ_SIZE];
/* The job over nodes this node's ranks are part of: ranks 0-2 here, 3
 * and 4 elsewhere. */
#define FUZZ_WIDE 5
static ipcp__remote_t fuzz_remote;
static int fuzz_local[FUZZ_WIDE] = {0, 1, 2, -1, -1};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet();
    /* Only what the decoder reads: job, rank, size and the peers' pids. */
    fuzz_comm.magic = IPCP_COMM_MAGIC;
    fuzz_comm.rank = FUZZ_RANK;
    fuzz_comm.size = FUZZ_SIZE;
    snprintf(fuzz_comm.job, sizeof(fuzz_comm.job), "fuzzjob");
    fuzz_comm.job_hash =
        ipcp__fnv1a(fuzz_comm.job, strlen(fuzz_comm.job), IPCP_FNV_SEED);
    fuzz_comm.peers = fuzz_peers;
    for (int r = 0; r < FUZZ_SIZE; r++) {
        fuzz_peers[r].rank = r;
        fuzz_peers[r].pid = 1000 + r;
    }
    fuzz_remote.rank = FUZZ_RANK;
    fuzz_remote.size = FUZZ_WIDE;
    fuzz_remote.local = fuzz_local;
    snprintf(fuzz_remote.job, sizeof(fuzz_remote.job), "fuzzwide");
    fuzz_comm.remote = &fuzz_remote;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char desc[IPCP_DESC_MAX + 16];
    ipcp_rmem_t rm;
    if (size < 1 || size - 1 > sizeof(desc))
        return 0;
    size_t len = size - 1;
    memcpy(desc, data + 1, len);
    if ((data[0] & 2) && len == FUZZ_DESC_LEN) {
        int32_t owner;
        memcpy(&owner, desc + FUZZ_DESC_OWNER, sizeof(owner));
        if (owner >= 0 && owner < FUZZ_SIZE)
            memcpy(desc + FUZZ_DESC_PID, &fuzz_peers[owner].pid,
                   sizeof(int32_t));
    }
    if ((data[0] & 1) && len == FUZZ_DESC_LEN) {
        uint64_t sum = ipcp__fnv1a(desc, FUZZ_DESC_LEN - 8, IPCP_FNV_SEED);
        memcpy(desc + FUZZ_DESC_LEN - 8, &sum, 8);
    }
    memset(&rm, 0, sizeof(rm));
    if (ipcp__rmem_prepare(&fuzz_comm, desc, len, &rm) != IPCP_OK)
        return 0;
    int bad = rm.type != IPCP_MEM_HOST && rm.type != IPCP_MEM_CUDA;
    if (rm.remote)
        bad |= rm.owner < 0 || rm.owner >= FUZZ_WIDE ||
               fuzz_local[rm.owner] >= 0 || !rm.addr ||
               rm.addr + rm.len < rm.addr;
    else
        bad |= rm.owner < 0 || rm.owner >= FUZZ_SIZE || rm.owner == FUZZ_RANK;
    if (bad) {
        fprintf(stderr, "fuzz_desc: accepted owner %d (remote %d) type %d\n",
                rm.owner, rm.remote, (int)rm.type);
        abort();
    }
    return 0;
}
