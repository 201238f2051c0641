/* ipcpipe-bench: shared types of the option parser, the transfer runner and
 * the report writer. */
#ifndef IPCP_BENCH_H
#define IPCP_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ipcpipe.h"

#define BENCH_MAX_SIZES    64
#define BENCH_MAX_PATTERNS 32
#define BENCH_REASON_MAX   256

/* Paths a case can force on the receiver.  "auto" lets the library pick
 * (eager for small host messages); eager itself cannot be forced. */
typedef struct bench_path {
    const char *name;
    ipcp_path_t path;
} bench_path_t;

extern const bench_path_t bench_paths[];
extern const int bench_npaths;

typedef struct bench_opts {
    size_t sizes[BENCH_MAX_SIZES];
    int nsizes;
    const char *patterns[BENCH_MAX_PATTERNS]; /* --case, in order given */
    int npatterns;
    int iters; /* 0: chosen per size (bench_iters) */
    int warmup;
    int nranks;
    int json;
    int list;
    int verify;
    size_t lat_max;   /* ping-pong latency for sizes <= this; 0: none */
    double timeout_s; /* launcher's, when it spawns the ranks */
} bench_opts_t;

typedef struct bench_case {
    const bench_path_t *path;
    size_t size;
    char name[48]; /* "<path>:<size>", e.g. "direct:256M" */
} bench_case_t;

typedef enum {
    BENCH_OK = 0,     /* measured (verification may still have failed) */
    BENCH_WAIVED = 1, /* cannot run on this machine; reason says why */
    BENCH_ERROR = 2,  /* a transfer failed */
} bench_outcome_t;

typedef struct bench_result {
    const bench_case_t *c;
    bench_outcome_t outcome;
    char reason[BENCH_REASON_MAX];
    double gbps;         /* median over the timed repetitions */
    double ceiling_gbps; /* memcpy of the same size in the receiver */
    double latency_us;   /* half round trip, median; < 0: not measured */
    int verified;        /* 1 all checked bytes right, 0 wrong, -1 off */
    int iters;
    ipcp_path_t path_used; /* what the library reported for the last one */
} bench_result_t;

/* Options and case list (bench.c). */
int bench_iters(const bench_opts_t *o, size_t size);
void bench_format_size(size_t size, char *buf, size_t len);

/* Transfers (bench_run.c).  The receiver is rank 0, the sender rank 1; the
 * other ranks only keep the barrier schedule. */
typedef struct bench_ctx bench_ctx_t;
bench_ctx_t *bench_ctx_create(ipcp_comm_t *comm, const bench_opts_t *o,
                              const bench_case_t *cs, int n);
void bench_ctx_destroy(bench_ctx_t *ctx);
/* Largest size the ranks could allocate buffers for (agreed by all). */
size_t bench_ctx_cap(const bench_ctx_t *ctx);
/* Seed of this run's data (printed, so a failure can be reproduced). */
uint64_t bench_ctx_seed(const bench_ctx_t *ctx);
/* Runs one case on every rank; rank 0 fills *res. ceiling_gbps must be set
 * by the caller (bench_ceiling). Returns 0, or -1 if this rank must stop. */
int bench_run_case(bench_ctx_t *ctx, const bench_case_t *c, int index,
                   bench_result_t *res);
/* memcpy bandwidth of size bytes in rank 0's buffers, median of reps. */
double bench_ceiling(bench_ctx_t *ctx, size_t size, int reps);

/* Output (bench_report.c), on rank 0. */
void bench_report_begin(const bench_opts_t *o, ipcp_comm_t *comm,
                        const bench_ctx_t *ctx, int ncases);
void bench_report_progress(const bench_opts_t *o, int done, int total,
                           const char *name);
void bench_report_case(const bench_opts_t *o, const bench_result_t *r);
void bench_report_end(const bench_opts_t *o, int nfailed);

double bench_median(double *v, int n);

#endif
