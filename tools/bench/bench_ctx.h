/* ipcpipe-bench: the run's state and the pieces of a case, shared by the
 * transfer runner (bench_run.c) and the references of --compare
 * (bench_compare.c).  Internal to those two files. */
#ifndef IPCP_BENCH_CTX_H
#define IPCP_BENCH_CTX_H

#include "bench.h"

#define RECV 0
#define SEND 1

enum {
    TAG_SETUP = 1,
    TAG_ALLOC = 2,
    TAG_ALLOC_OK = 3,
    TAG_LOAD = 4,
    TAG_OMPI = 5,
    TAG_CASE0 = 16
};
/* Tags of case i: TAG_CASE0 + 8 * i + one of these, so that a transfer
 * abandoned in one case can never match a receive of another.  T_DATA goes
 * from rank 1 to rank 0, T_REV the other way (bidir). */
enum {
    T_DATA = 0,
    T_VERDICT = 1,
    T_PING = 2,
    T_PONG = 3,
    T_REV = 4,
    T_PEER_WARM = 5,
    T_PEER_REPORT = 6,
    T_PEER_TIMES = 7,
};

struct bench_ctx {
    ipcp_comm_t *comm;
    const bench_opts_t *o;
    const bench_case_t *cs;
    int ncases;
    int rank, size;
    int any_bidir;
    uint64_t seed;
    size_t cap;        /* largest size with buffers; 0: none */
    size_t dst_len;    /* the window's slots at cap */
    uint64_t usable;   /* rank 0: memory it judged free for buffers */
    size_t failed_cap; /* rank 0: smallest cap whose allocation failed */
    bench_mem_t mem;   /* HOST or CUDA once resolved */
    int device;        /* this rank's CUDA device, -1: none yet */
    bench_buf_t src, dst;
    unsigned char *staging; /* cap bytes, for device buffers */
    bench_ceil_t *ceil;     /* rank 0 */
    ipcp_request_t **reqs;  /* 2 * BENCH_MAX_WINDOW */
    bench_setup_info_t info;
    bench_load_t load; /* --load: the worker, on the rank whose GPU it loads */
    /* --load as every rank learnt it: 1 running, 0 not started (no GPU
     * there), with the loaded rank's device */
    int load_state, load_device;
    char mem_note[BENCH_REASON_MAX];
    char ceil_note[BENCH_REASON_MAX];
    char waive[2 * BENCH_REASON_MAX];
    size_t ceil_size; /* size the values below are for */
    double ceil_val[BENCH_CEIL_COUNT];
    char ceil_err[BENCH_CEIL_COUNT][BENCH_REASON_MAX]; /* why not measured */
    int ceil_reps; /* repetitions of the ceilings of ceil_size */
    /* --compare (bench_compare.c), made at the first case that needs it */
    int any_naive;
    bench_nccl_t *nccl; /* ranks 0 and 1 */
    int nccl_broken;    /* aborted after a failure: not used again */
    char nccl_why[BENCH_REASON_MAX];
    bench_naive_t *naive;    /* rank 0 */
    bench_buf_t naive_buf;   /* rank 1: the cuMemAlloc buffer it exports */
    struct bench_ompi *ompi; /* rank 0: Open MPI's rows (bench_ompi.c) */
    /* The stream case: transfers go through the stream-ordered calls on
     * this stream while set (NULL otherwise). */
    void *ustream;
};

typedef struct setup_msg {
    uint64_t seed;
    uint64_t cap;
    uint64_t dst_len;
    int32_t mem;
    int32_t pad;
} setup_msg_t;

/* Rank 1's answer to a proposed cap. */
typedef struct alloc_msg {
    int32_t ok;
    int32_t nomem;
    int32_t device;
    int32_t pad;
    char bus[BENCH_BUS_MAX];
    char name[96];
    char reason[BENCH_REASON_MAX];
    cpu_set_t cpus; /* where this rank may run */
} alloc_msg_t;

typedef struct agree_msg {
    int32_t all;  /* every rank has its buffers */
    int32_t stop; /* give up (not for lack of memory): every case waived */
} agree_msg_t;

/* What rank 1 tells rank 0 about its side of a bidir case. */
typedef struct peer_msg {
    int32_t ok;       /* no transfer failed */
    int32_t verified; /* 1, 0 or -1 (off) */
    char reason[BENCH_REASON_MAX];
} peer_msg_t;

/* Tag kinds of a reference case (the same 8 per case; such a case moves no
 * data through ipcpipe, so T_DATA and the others are free). */
enum {
    T_CMP_HELLO = T_DATA,         /* rank 0 -> 1: go, NCCL id */
    T_CMP_ANSWER = T_PING,        /* rank 1 -> 0: ready, IPC handle */
    T_CMP_INIT0 = T_PONG,         /* rank 0 -> 1: communicator made */
    T_CMP_INIT1 = T_REV,          /* rank 1 -> 0: communicator made */
    T_CMP_WARM = T_PEER_WARM,     /* rank 1 -> 0: its warm-up */
    T_CMP_REPORT = T_PEER_REPORT, /* rank 1 -> 0: its timed part */
    T_CMP_DONE = T_PEER_TIMES,    /* rank 0 -> 1: done with its buffer */
};

/* Pieces of a case (bench_run.c). */
/* Rank 1: the times (bench_now_s) it left the n timed repetitions'
 * barriers at, to rank 0 (NULL: none known). */
int bench_send_starts(bench_ctx_t *ctx, int tag, const double *starts, int n);
/* Rank 0: takes rank 1's times (bench_send_starts) and sets res->gbps
 * from the median repetition of bytes, each timed from the later of
 * starts[r] and rank 1's exit to ends[r] (NAN: failed; ends is
 * overwritten), and res->skew_us. */
void bench_time_reps(bench_ctx_t *ctx, int tag, const double *starts,
                     double *ends, int n, double bytes, bench_result_t *res);
/* Case i's seeds: k 0 the warm-up, 1 the timed repetitions, 2 the
 * ping-pong's (bench_pingpong_seed), 3 the --ahead windows. */
uint64_t bench_case_seed(const bench_ctx_t *ctx, int i, int k);
/* Seed of round (or batch) k of case i's ping-pong: each its own data. */
uint64_t bench_pingpong_seed(const bench_ctx_t *ctx, int i, int round);
int bench_case_tag(int i, int kind);
/* --ahead (bench_ahead.c): whether case c runs its windows back to back
 * (one-way, host memory), after its timed repetitions and one barrier
 * more; rank 0's part (its figures in res) and rank 1's.  0, or -1 when
 * the barrier failed. */
int bench_ahead_case(const bench_ctx_t *ctx, const bench_case_t *c);
int bench_recv_ahead(bench_ctx_t *ctx, const bench_case_t *c, int i,
                     bench_result_t *res);
int bench_send_ahead(bench_ctx_t *ctx, const bench_case_t *c, int i);
/* Rank 1: a failed call of case c on stderr, the first of a part only
 * (*reported). */
void bench_send_report(const bench_case_t *c, const char *what,
                       ipcp_status_t st, int *reported);
/* A failed call's outcome: waived where the machine cannot serve a forced
 * path or memory ran out, else an error. */
bench_outcome_t bench_classify(const bench_case_t *c, ipcp_status_t st);
int bench_case_slots(const bench_opts_t *o, size_t size);
void bench_set_reason(bench_result_t *res, bench_outcome_t outcome,
                      const char *what, ipcp_status_t st);
void bench_set_error(bench_result_t *res, const char *what, const char *msg);
int bench_poison(bench_ctx_t *ctx, size_t len, bench_result_t *res);
int bench_fill_src(bench_ctx_t *ctx, size_t len, uint64_t seed,
                   bench_result_t *res);
/* Host windows: each send of a window reads its own source slot (k %
 * slots), and the sender rewrites every slot before each repetition, as a
 * program sends data it just wrote: a source sent unchanged again and
 * again would sit in the receiver's cache after the first read, which only
 * a single-copy read gains from.  Device windows send one source. */
int bench_src_slots(const bench_ctx_t *ctx, size_t size);
/* Slot k of the source gets ipcp_pattern_slot_seed(seed, k); 0 or -1. */
int bench_fill_window(bench_ctx_t *ctx, size_t size, uint64_t seed,
                      bench_result_t *res);
/* The sender's source before repetition r of iters: every host slot
 * fresh (seed itself for the checked last one); a device source only for
 * the checked last one. */
void bench_fill_rep(bench_ctx_t *ctx, size_t size, uint64_t seed, int r,
                    int iters, bench_result_t *res);
/* Checks the window's last receive (of w) against the source slot it
 * came from. */
void bench_check_last(bench_ctx_t *ctx, bench_result_t *res, size_t size, int w,
                      uint64_t seed);
/* Checks [off, off + len) of b against seed; a mismatch clears
 * res->verified and names the first bad byte. */
void bench_check_buf(bench_ctx_t *ctx, bench_buf_t *b, bench_result_t *res,
                     size_t off, size_t len, uint64_t seed, const char *what);
int bench_bcast_verdict(bench_ctx_t *ctx, int i, int32_t ok);
int bench_barrier(bench_ctx_t *ctx);
void bench_pick_ceiling(const bench_ctx_t *ctx, const bench_case_t *c,
                        bench_result_t *res);
/* 1 (and res waived, saying why) when the case's size has no buffers. */
int bench_size_waived(const bench_ctx_t *ctx, const bench_case_t *c,
                      bench_result_t *res);
int bench_recv_peer_msg(bench_ctx_t *ctx, int tag, peer_msg_t *m,
                        bench_result_t *res);
int bench_send_peer_msg(bench_ctx_t *ctx, int tag, const bench_result_t *lr);

/* Bytes this job may still take for buffers (MemAvailable, the cgroup's
 * limit, /dev/shm's free space); UINT64_MAX when unknown. */
uint64_t bench_mem_available(void);

/* The ompi case (bench_ompi.c): rank 0 runs Open MPI at the first one and
 * fills res from its results; the others wait for rank 0's verdict. */
int bench_ompi_rank0(bench_ctx_t *ctx, const bench_case_t *c, int i,
                     bench_result_t *res);
int bench_ompi_other(bench_ctx_t *ctx, const bench_case_t *c, int i);
void bench_ompi_destroy(bench_ctx_t *ctx);

/* A reference case on this rank (bench_compare.c); as bench_run_case. */
int bench_cmp_run(bench_ctx_t *ctx, const bench_case_t *c, int i,
                  bench_result_t *res);
/* Releases the references' state (communicator, mapping, buffers). */
void bench_cmp_destroy(bench_ctx_t *ctx);

/* Shared by the run (bench_run.c), the set-up (bench_setup.c) and the
 * sender (bench_send.c). */
/* A seed no earlier run used, and the bytes of the slots of the largest
 * window among the sizes up to cap. */
uint64_t bench_fresh_seed(void);
size_t bench_window_len(const bench_opts_t *o, const bench_case_t *cs, int n,
                        size_t cap);
/* Host memory a rank needs for transfers of size s. */
uint64_t bench_host_need(const bench_ctx_t *ctx, size_t s);
/* Checks len bytes at off of the receive buffer against seed's data. */
void bench_check_data(bench_ctx_t *ctx, bench_result_t *res, size_t off,
                      size_t len, uint64_t seed, const char *what);
/* The same as bench_check_last for the --ahead windows' last transfer. */
void bench_check_ahead(bench_ctx_t *ctx, bench_result_t *res, size_t size,
                       int w, uint64_t seed);
/* Checks round's pong (len bytes at the start of the receive buffer) of
 * the host ping-pong, naming the round. */
void bench_check_round(bench_ctx_t *ctx, bench_result_t *res, size_t len,
                       uint64_t seed, int round);
/* One window: nrecv receives and nsend sends posted back to back over
 * slots, then waited for; *what names a failed call. */
ipcp_status_t bench_xfer_window(bench_ctx_t *ctx, size_t size, int nrecv,
                                int nsend, int slots, int rtag, int stag,
                                bench_result_t *res, const char **what);
/* The stream case's ping-pong (--stream-batch round trips a batch),
 * its data fresh and checked every batch (res: rank 0's result). */
int bench_stream_pingpong(bench_ctx_t *ctx, const bench_case_t *c, int i,
                          int nbatches, double *t, double *tpost,
                          ipcp_status_t *st, bench_result_t *res);
/* Whether a case measures a ping-pong latency. */
int bench_lat_case(const bench_ctx_t *ctx, const bench_case_t *c);
/* Makes the stream of a stream-ordered case. */
int bench_stream_begin(bench_ctx_t *ctx, bench_result_t *res);
/* Rank 1's part of case i. */
int bench_run_sender(bench_ctx_t *ctx, const bench_case_t *c, int i);

#endif
