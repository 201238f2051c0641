/* Fuzzes what the bootstrap reads off a rendezvous socket from another
 * process: the hello of a connecting (or answering) peer
 * (ipcp__boot_hello_check, the check of bootstrap.c's boot_on_hello and
 * boot_on_answer) and the barrier token (ipcp__boot_barrier, through a real
 * socket pair).  Input: a mode byte, then the message.  Mode bits 0-1: 0 a
 * hello on our listening socket, 1 an answer from a lower rank we
 * connected to, 2 a barrier token; bits 2-3: our rank in a job of four;
 * bit 4: the hello's pid is set to the one the kernel reports for the
 * connection (so that mutations reach the checks after it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "fuzz_common.h"

#define FUZZ_SIZE     4
#define FUZZ_PEER_PID 4242
/* Where boot_hello_t (bootstrap.c) keeps the pid. */
#define FUZZ_HELLO_PID 20

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet();
    return 0;
}

static void fuzz_boot_init(ipcp__boot_t *boot, ipcp__boot_peer_t *peers,
                           int rank)
{
    memset(boot, 0, sizeof(*boot));
    boot->rank = rank;
    boot->size = FUZZ_SIZE;
    snprintf(boot->job, sizeof(boot->job), "fuzzjob");
    boot->timeout_s = 0.05;
    boot->peers = peers;
    for (int r = 0; r < FUZZ_SIZE; r++) {
        peers[r].fd = -1;
        peers[r].pid = r == rank ? getpid() : FUZZ_PEER_PID;
    }
}

/* Our rank and one peer over a socket pair: the peer's token (the input)
 * is queued, its end closed, and the barrier runs against it. */
static void fuzz_barrier(int rank, const uint8_t *msg, size_t len)
{
    ipcp__boot_t boot;
    ipcp__boot_peer_t peers[FUZZ_SIZE];
    int sv[2];
    fuzz_boot_init(&boot, peers, rank);
    boot.size = 2;
    boot.rank = rank & 1;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    peers[!boot.rank].fd = sv[0];
    if (send(sv[1], msg, len, MSG_NOSIGNAL) < 0 && len <= 4096)
        abort();
    close(sv[1]);
    (void)ipcp__boot_barrier(&boot);
    close(sv[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ipcp__boot_t boot;
    ipcp__boot_peer_t peers[FUZZ_SIZE];
    char why[160];
    unsigned char msg[4096];
    if (size < 1 || size > sizeof(msg))
        return 0;
    int mode = data[0] & 3, rank = (data[0] >> 2) & 3;
    if (mode == 2) {
        fuzz_barrier(rank, data + 1, size - 1);
        return 0;
    }
    fuzz_boot_init(&boot, peers, rank);
    /* A lower rank answers on its own socket; its number is the next one
     * down (rank 0 has none: then the peer is rank 1 connecting). */
    int want = mode == 1 && rank > 0 ? rank - 1 : -1;
    why[0] = '\0';
    memcpy(msg, data + 1, size - 1);
    if ((data[0] & 0x10) && size - 1 >= FUZZ_HELLO_PID + 4) {
        int32_t pid = FUZZ_PEER_PID;
        memcpy(msg + FUZZ_HELLO_PID, &pid, sizeof(pid));
    }
    if (ipcp__boot_hello_check(&boot, msg, size - 1, FUZZ_PEER_PID, want, why,
                               sizeof(why)) == 0)
        return 0;
    if (!why[0] || !memchr(why, '\0', sizeof(why))) {
        fprintf(stderr, "fuzz_hello: a refusal without a reason\n");
        abort();
    }
    return 0;
}
