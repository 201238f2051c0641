/* A communicator without a job, for the control-message harness
 * (fuzz_ctrl.c) and the corpus generator (gen_corpus.c): three ranks, the
 * two peers played by the harness over socket pairs, no progress thread.
 * A script (the fuzz input) posts requests and hands the engine messages
 * from the peers, with descriptors attached; the engine's real handlers
 * (ipcp__dispatch and what it calls) take them.  See ctrl_env.c for the
 * script's format. */
#ifndef IPCP_FUZZ_CTRL_ENV_H
#define IPCP_FUZZ_CTRL_ENV_H

#include <stddef.h>
#include <stdint.h>

/* Script operations (the low 3 bits of an op byte). */
enum {
    CTRL_OP_MSG = 0,  /* peer, fds, u16 length, the message */
    CTRL_OP_RECV,     /* flags, tag, u16 length */
    CTRL_OP_SEND,     /* flags, tag, u16 length */
    CTRL_OP_REGION,   /* flags, u16 length */
    CTRL_OP_ONESIDED, /* flags, region id, u16 offset, u16 length */
    CTRL_OP_INBOX,    /* peer, u16 offset, length byte, bytes */
    CTRL_OP_DROP,     /* peer, a reason */
    CTRL_OP_PEER,     /* peer, pvm allowed */
};

/* Descriptor kinds a message may carry (fd byte, low 3 bits; the high
 * bits pick a size or a pool entry). */
enum {
    CTRL_FD_MEMFD_SEALED = 0,
    CTRL_FD_MEMFD,
    CTRL_FD_PIPE,
    CTRL_FD_EVENTFD,
    CTRL_FD_FILE,
    CTRL_FD_POOL, /* a descriptor the engine sent to a peer earlier */
    CTRL_FD_SOCKET,
    CTRL_FD_DEVNULL,
};

/* Variant byte (the input's first): bit 0 mailbox on, bit 1
 * IPCPIPE_DRIVE=on, bit 2 this rank is 1 (else 0). */
#define CTRL_VAR_MAILBOX 0x1
#define CTRL_VAR_DRIVE   0x2
#define CTRL_VAR_RANK1   0x4

/* Called with every message the engine sends to a peer (peer index 0 or
 * 1 of the script), before its descriptors go to the pool. */
typedef void (*ctrl_tap_fn)(int peer, const void *msg, size_t len, int nfds,
                            void *arg);

void ctrl_env_init(void);
/* Runs one script; returns 0, or -1 when the input is not a script (too
 * long).  Every descriptor and byte it made is released before it
 * returns. */
int ctrl_env_run(const uint8_t *data, size_t size, ctrl_tap_fn tap, void *arg);

#endif
