/* The transport of test_remote.c (remote_echo.c): it echoes.  A receive
 * from a rank elsewhere completes with the oldest unread send to that
 * rank with its channel and tag, receives taking sends in the order they
 * were posted, as MPI's do (the pieces of a message share a tag); a
 * message longer than its receive fills it and fails it. */
#ifndef IPCP_TEST_REMOTE_ECHO_H
#define IPCP_TEST_REMOTE_ECHO_H

#include <stddef.h>

#include "engine/remote.h"

enum { MAX_OPS = 128 };

typedef struct op {
    int used, chan, send, peer, tag, done, barrier;
    unsigned long order; /* its place among all operations */
    void *buf;           /* a send's: a copy of its bytes, freed when read */
    size_t len;
    int matched; /* a receive that took its send (of mn bytes) */
    size_t mn;
} op_t;

typedef struct echo {
    op_t ops[MAX_OPS];
    unsigned long sends;
    int barriers, closes, cancels;
    int refuse; /* the next send fails */
    /* A transport that reads device memory (case_device): operations
     * that named (fake) device memory. */
    int device_ops;
    const void *watch; /* operations that named this (a user's buffer) */
    int watched;
    /* Sends on channel 1 (pieces), and sends of a short message's bytes
     * alone (on channel 0, longer than any header). */
    int piece_sends, alone_sends;
} echo_t;

extern echo_t echo;
extern const ipcp__remote_ops_t echo_ops;

/* An operation of the transport, as the engine's isend/irecv make one:
 * a message to or from peer, posted now (a send's bytes copied). */
ipcp_status_t echo_post(int chan, int send, void *buf, size_t len, int peer,
                        int tag, void **out);

#endif
