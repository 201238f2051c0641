/* What the ranks of test_lane.c use of the fake device backend in
 * test_lane_fake.c (both are linked into the one test_lane executable). */
#ifndef IPCP_TEST_LANE_INT_H
#define IPCP_TEST_LANE_INT_H

#include <pthread.h>

#include "backend/backend.h"

/* A fake stream: the kernels queued on it run, in order, on its thread. */
typedef struct fk_stream {
    pthread_t thread;
    pthread_mutex_t m;
    pthread_cond_t c;
    struct {
        int op;
        ipcp__lane_kargs_t a;
    } * jobs;
    unsigned head, tail; /* jobs [head, tail) queued */
    int running, stop;
    int capturing; /* as if capturing a CUDA graph (case capture) */
} fk_stream_t;

/* The backend's table; the ranks install it as the device backend. */
extern const ipcp__backend_ops_t fk_ops;

/* Set: this rank cannot map the peer's memory (case importfail). */
extern int fk_fail_import;
/* Set: the next launch fails (case launchfail). */
extern int fk_fail_launch;

fk_stream_t *fk_stream_new(void);
/* Waits until every kernel queued so far ran, or fails after limit_s. */
void fk_sync(fk_stream_t *s, double limit_s, const char *what);
void fk_stream_free(fk_stream_t *s);

#endif
