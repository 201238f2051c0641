/* ipcpipe-bench: shared types of the option parser, the transfer runner,
 * the memory layer, the ceilings and the report writer. */
#ifndef IPCP_BENCH_H
#define IPCP_BENCH_H

#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench_nccl.h"
#include "ipcpipe.h"

#define BENCH_MAX_SIZES        64
#define BENCH_MAX_PATTERNS     32
#define BENCH_MAX_DEVLIST      64
#define BENCH_REASON_MAX       256
#define BENCH_BUS_MAX          32
#define BENCH_MAX_WINDOW       4096
#define BENCH_MAX_STREAM_BATCH 1024
/* Window of the default: as many transfers as make about this many bytes,
 * between 1 and 64 (like osu_bw's and nccl-tests' windows). */
#define BENCH_WINDOW_BYTES ((size_t)64 << 20)
#define BENCH_WINDOW_MAX   64

/* What a case measures: a path of ipcpipe, or (--compare) a reference a
 * user would otherwise compare against: NCCL, naive and the local copies on
 * GPU memory, Open MPI on host memory. */
typedef enum {
    BENCH_KIND_IPCP = 0,  /* ipcpipe between the two ranks */
    BENCH_KIND_NCCL = 1,  /* ncclSend/ncclRecv between the two ranks */
    BENCH_KIND_NAIVE = 2, /* the forum post's staged pattern (seed.c) */
    BENCH_KIND_LOCAL = 3, /* a single-process copy in rank 0 (a ceiling) */
    BENCH_KIND_MPI = 4,   /* Open MPI's shared memory (ipcpipe-bench-mpi) */
} bench_kind_t;

/* Paths a case can force on the receiver.  "auto" lets the library pick
 * (eager for small host messages); eager itself cannot be forced.  bidir
 * runs the auto path in both directions at once.  Reference cases (kind
 * other than IPCP) leave the library on auto; ceil is what their rows are
 * compared with, local the single-process copy a LOCAL row reports. */
typedef struct bench_path {
    const char *name;
    ipcp_path_t path;
    int bidir;
    bench_kind_t kind;
    int ceil;      /* bench_ceil_kind_t, for kind != IPCP */
    int local;     /* bench_ceil_kind_t, for kind == LOCAL */
    int stream;    /* the stream-ordered calls (ipcpipe_cuda.h) on one
                      stream of each rank; GPU memory only */
    int ungrouped; /* nccl: each ncclSend/ncclRecv of a window outside
                      any group, its own kernel (no ping-pong) */
} bench_path_t;

extern const bench_path_t bench_paths[];
extern const int bench_npaths;

typedef enum {
    BENCH_MEM_AUTO = 0,
    BENCH_MEM_HOST = 1,
    BENCH_MEM_CUDA = 2,
} bench_mem_t;

typedef enum {
    BENCH_DEV_SPLIT = 0, /* rank r on device r % ndev (ndev >= 2), else 0 */
    BENCH_DEV_SAME = 1,  /* every rank on device 0 */
    BENCH_DEV_LIST = 2,  /* rank r on devlist[r % ndevlist] */
} bench_devmode_t;

typedef enum {
    BENCH_ALLOC_IPCP = 0,  /* ipcp_mem_alloc (VMM on CUDA) */
    BENCH_ALLOC_PLAIN = 1, /* cuMemAlloc (legacy IPC in the library) */
    /* GPU memory of other allocators (bench_alloc.c) */
    BENCH_ALLOC_VMM = 2,   /* cuMemCreate with a POSIX fd handle */
    BENCH_ALLOC_VMM0 = 3,  /* cuMemCreate without handle types */
    BENCH_ALLOC_POOL = 4,  /* cuMemAllocAsync: the default pool */
    BENCH_ALLOC_SPOOL = 5, /* a pool made with POSIX fd handles */
} bench_alloc_t;

/* --load: pinned copies in a third process on one rank's GPU, for the
 * whole run (bench_load.c). */
typedef enum {
    BENCH_LOAD_NONE = 0,
    BENCH_LOAD_D2H, /* device to host on the sender's GPU */
    BENCH_LOAD_H2D, /* host to device on the receiver's GPU */
} bench_load_kind_t;

typedef struct bench_opts {
    size_t sizes[BENCH_MAX_SIZES];
    int nsizes;
    const char *patterns[BENCH_MAX_PATTERNS]; /* --case, in order given */
    int npatterns;
    int iters; /* 0: chosen per size (bench_reps, bench_lat_rounds) */
    int warmup;
    int nranks;
    int json;
    int csv;          /* --csv: CSV rows instead of the table */
    int compare;      /* --compare: the reference cases too */
    const char *plot; /* --plot FILE.svg */
    int plot_log;     /* --plot-log: GB/s on a log10 axis */
    int list;
    int verify;
    int window;            /* 0: chosen per size (bench_window) */
    size_t lat_max;        /* ping-pong latency for sizes <= this; 0: none */
    int ahead;             /* --ahead: windows back to back; 0: none */
    int stream_reqs_every; /* --stream-reqs every: a request per call */
    int stream_batch;      /* --stream-batch: round trips a stream wait */
    int stream_wait;       /* --stream-wait: a bench_wait_t */
    double timeout_s;      /* launcher's, when it spawns the ranks */
    int pin;               /* --pin: each spawned rank bound to one CPU */
    double heartbeat;      /* --heartbeat: seconds between progress lines
                              when stderr is no terminal (0: none) */
    bench_mem_t mem;
    bench_devmode_t devmode;
    int devlist[BENCH_MAX_DEVLIST];
    int ndevlist;
    bench_alloc_t alloc;
    const char *trace;      /* --trace FILE */
    int tune;               /* --tune: striping calibration, then exit */
    bench_load_kind_t load; /* --load: a third process's copies beside */
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

/* The smallest size the striped ceiling is measured at (its shares'
 * staged parts are whole pages). */
#define BENCH_STRIPED_MIN ((size_t)4 << 20)

/* What a figure is compared with. */
typedef enum {
    BENCH_CEIL_NONE = 0,
    BENCH_CEIL_MEMCPY,       /* host: one thread's memcpy in the receiver */
    BENCH_CEIL_MEMCPY_BIDIR, /* host: each direction copied at once, by
                                as many threads as the library's queues */
    BENCH_CEIL_D2D,          /* cuda: cuMemcpyAsync sender dev -> recv dev */
    BENCH_CEIL_STAGED,       /* cuda: min(pinned D2H, pinned H2D) */
    BENCH_CEIL_D2D_BIDIR,    /* cuda: both directions at once, 2 streams */
    BENCH_CEIL_STAGED_BIDIR, /* cuda: 2 * min(D2H, H2D) (staged bidir) */
    BENCH_CEIL_D2H,          /* cuda: pinned D2H on the sender's device */
    BENCH_CEIL_H2D,          /* cuda: pinned H2D on the receiver's device */
    BENCH_CEIL_MEMCPY_PAR,   /* host: the window copied by as many threads
                                of the receiver as the library's queues */
    BENCH_CEIL_NT_PAR,       /* host: MEMCPY_PAR with non-temporal stores */
    BENCH_CEIL_NT_BIDIR,     /* host: MEMCPY_BIDIR with non-temporal stores */
    BENCH_CEIL_STRIPED,      /* cuda: D2D and a staged share (D2H, H2D) of
                                each copy at once, the best of a few shares */
    BENCH_CEIL_COUNT
} bench_ceil_kind_t;

const char *bench_ceil_name(bench_ceil_kind_t k);
/* Copy threads the library runs per direction on host memory: the value
 * of IPCPIPE_QUEUES, or 2 where it is auto (docs/settings.md). */
int bench_host_queues(void);
/* Whether the non-temporal ceilings (nt-par, nt-bidir) are built for this
 * CPU (x86-64). */
int bench_ceil_have_nt(void);

typedef struct bench_result {
    const bench_case_t *c;
    bench_outcome_t outcome;
    char reason[BENCH_REASON_MAX];
    double gbps;               /* median over the timed repetitions */
    double gbps_min, gbps_max; /* the slowest and fastest repetition; NAN:
                                  not known (ceilings) */
    double ceiling_gbps;
    bench_ceil_kind_t ceiling_kind;
    /* Host rows: the copies the ceiling is the fastest of, as measured
     * (GB/s, 0: not measured), for the table's "^ ceilings" line. */
    int ncand;
    bench_ceil_kind_t cand_kind[3];
    double cand_gbps[3];
    double latency_us; /* half round trip, median; < 0: not measured */
    double latency_min_us, latency_max_us; /* its shortest and longest;
                                              NAN: not known */
    double first_us;       /* the first transfer of the case (receiver's
                              clock, from posting to completion), with the
                              one-time costs the timed ones do not pay:
                              mappings, handle imports, pinning, device
                              start-up; < 0: not measured */
    double post_us;        /* stream ping-pong: CPU time a call took to
                              enqueue (median batch); < 0: not measured */
    double skew_us;        /* median of how much later rank 1 left a timed
                              repetition's barrier than rank 0 (not
                              timed, see bench_time_reps); NAN: none */
    int verified;          /* 1 all checked bytes right, 0 wrong, -1 off,
                              -2 nothing to check (single-process copy) */
    int iters;             /* timed repetitions */
    int window;            /* transfers per repetition */
    ipcp_path_t path_used; /* what the library reported for the last one */
    /* --ahead: GB/s of the median window posted right after the one
     * before, and of the slowest and fastest; 0: not measured */
    double ahead_gbps, ahead_min, ahead_max;
} bench_result_t;

/* The table (bench_table.c): its row format, a case's path as the table
 * names it, and a case's row with the notes under it. */
/* A row's size and path columns, which the waived and failed rows share. */
#define BENCH_ROW_LEAD "%10s  %-19s  "
#define BENCH_ROW_FMT  BENCH_ROW_LEAD "%4s  %10s  %12s  %-14s  %7s  %10s  %8s\n"
void bench_path_label(const bench_result_t *r, char *buf, size_t len);
void bench_table_row(const bench_opts_t *o, const bench_result_t *r);

/* Options (bench_opts.c). */
int bench_window(const bench_opts_t *o, size_t size);
/* --tune (bench_tune.c); the exit status. */
int bench_tune(void);
int bench_reps(const bench_opts_t *o, size_t size);
int bench_lat_rounds(const bench_opts_t *o, size_t size);
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
/* Memory the run uses (HOST or CUDA), known to every rank. */
bench_mem_t bench_ctx_mem(const bench_ctx_t *ctx);

/* What the run moves data in, for the header and the JSON (rank 0). */
typedef struct bench_setup_info {
    bench_mem_t mem; /* HOST or CUDA (auto resolved) */
    bench_alloc_t alloc;
    const char *mem_note; /* why auto chose host; "" otherwise */
    int dev[2];           /* ordinals of ranks 0 and 1, each its own */
    char bus[2][BENCH_BUS_MAX];
    char dev_name[2][96];
    int ceil_dev[2];       /* ceilings: [0] sender's, [1] receiver's device,
                              ordinals in rank 0; -1 when not CUDA */
    const char *ceil_note; /* e.g. sender's device not visible */
    const char *waive_all; /* non-NULL: every case waived for this */
} bench_setup_info_t;
const bench_setup_info_t *bench_ctx_info(const bench_ctx_t *ctx);
/* --load as the ranks agreed: 1 running (*device: the loaded rank's
 * device), 0 not started or not asked for. */
int bench_ctx_load(const bench_ctx_t *ctx, int *device);

/* Runs one case on every rank; rank 0 fills *res, ceiling included.
 * Returns 0, or -1 if this rank must stop. */
int bench_run_case(bench_ctx_t *ctx, const bench_case_t *c, int index,
                   bench_result_t *res);
/* Measures, on rank 0, the ceilings the selected cases of this size need
 * (called before the first case of each size). */
void bench_ceilings_measure(bench_ctx_t *ctx, const bench_case_t *cs, int n,
                            int first);

/* Output (bench_report.c), on rank 0. */
/* note: NULL, or a line for the reader (bench_report_note). */
void bench_report_begin(const bench_opts_t *o, ipcp_comm_t *comm,
                        const bench_ctx_t *ctx, int ncases, const char *note);
/* A line for whoever reads the output: a "# note:" line of the table, or
 * on stderr beside JSON and CSV (which stay parseable). */
void bench_report_note(const bench_opts_t *o, const char *text);
/* On a terminal only: case done + 1 of total, what it is doing. */
void bench_report_progress(const bench_opts_t *o, int done, int total,
                           const char *name);
void bench_report_case(const bench_opts_t *o, const bench_ctx_t *ctx,
                       const bench_result_t *r);
void bench_report_end(const bench_opts_t *o, int nfailed);

/* --plot: an SVG line chart of GB/s against size (log2 axis; GB/s linear,
 * or log10 with logy), one line per path or reference, dashed lines for
 * the ceilings (bench_plot.c).  Returns 0, or -1 with a message. */
int bench_plot_write(const char *path, int logy, const bench_result_t *rs,
                     int n, const char *subtitle, char *err, size_t elen);

/* bench_opts.c: the command line into o (0; 1 after --help; 2 on a bad
 * option, said on stderr), and one size ("4K", "1M+3"; up to ',' with
 * endp). */
int bench_parse_args(int argc, char **argv, bench_opts_t *o);
int bench_parse_size(const char *s, size_t *out, const char **endp);

double bench_median(double *v, int n);
/* res's GB/s from the seconds t[0..n) that repetitions of bytes each took:
 * the median, and the slowest and fastest (t is sorted). */
void bench_set_gbps(bench_result_t *res, double bytes, double *t, int n);
/* res's latency from n half round trips t (seconds; sorted): median, min,
 * max. */
void bench_set_latency(bench_result_t *res, double *t, int n);
/* A decimal integer in [min, max] filling all of s: 0, or -1. */
int bench_parse_int(const char *s, int min, int max, int *out);
double bench_now_s(void);
/* How a rank waits for its CUDA stream (--stream-wait; bench_setup.c). */
typedef enum {
    BENCH_WAIT_AUTO, /* poll when the rank may run on one CPU, else sync */
    BENCH_WAIT_SYNC, /* cuStreamSynchronize */
    BENCH_WAIT_POLL, /* cuStreamQuery, sched_yield between polls */
    BENCH_WAIT_EVENT /* a blocking-sync event after the stream's work:
                        the thread sleeps until the device's interrupt */
} bench_wait_t;
void bench_set_stream_wait(int wait);
/* How this rank waits for streams: auto resolved (sync, poll or event). */
bench_wait_t bench_stream_wait(void);
/* Whether this rank leaves the CPU while it waits for streams (poll,
 * event): on one CPU a wait that spins keeps ipcpipe's threads (and
 * NCCL's) off it. */
int bench_stream_poll(void);
/* snprintf for messages, where cutting a long one short is fine. */
void bench_fmt(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- Memory (bench_mem.c): host or device buffers of one rank ---------- */

typedef struct bench_buf {
    void *ptr;
    size_t len;
    int device;          /* -1: host memory */
    bench_alloc_t alloc; /* who made it */
    void *foreign;       /* vmm, vmm0, pool, spool: bench_alloc.c's */
} bench_buf_t;

/* 1 when this build has CUDA and the library's CUDA backend could run
 * (driver, a device, IPCPIPE_CUDA not off); else 0 with why. */
int bench_cuda_usable(char *why, size_t len);
/* Devices visible to this process (0 without CUDA). */
int bench_cuda_ndev(void);
/* Makes device's primary context current on this thread (retained until
 * bench_cuda_unbind). */
int bench_cuda_bind(int device, char *err, size_t len);
void bench_cuda_unbind(void);
/* A stream of the bound device for the stream-ordered case, made on first
 * use and destroyed by bench_cuda_unbind; NULL with err on failure. */
void *bench_cuda_stream(char *err, size_t len);
int bench_cuda_stream_sync(void *stream, char *err, size_t len);
int bench_cuda_bus_id(int device, char *bus, size_t len, char *name,
                      size_t nlen);
/* Ordinal of the device with this PCI bus id here, or -1. */
int bench_cuda_find_bus(const char *bus);
/* 1 when a can access b's memory directly. */
int bench_cuda_peer(int a, int b);

/* Buffers: host (ipcp_mem_alloc, touched; posix_memalign when plain), or
 * device (ipcp_mem_alloc with IPCP_MEM_CUDA, cuMemAlloc when plain, or
 * another allocator's: bench_alloc_t).  Errors: -1, message in err,
 * *nomem set when it was lack of memory. */
int bench_buf_alloc(ipcp_comm_t *comm, size_t len, int device,
                    bench_alloc_t alloc, bench_buf_t *b, int *nomem, char *err,
                    size_t elen);
void bench_buf_free(ipcp_comm_t *comm, bench_buf_t *b);
/* Data: staging is host memory of at least len bytes, used for device
 * buffers.  Each returns 0, or -1 with a message. */
int bench_buf_fill(bench_buf_t *b, size_t off, size_t len, uint64_t seed,
                   unsigned char *staging, char *err, size_t elen);
int bench_buf_poison(bench_buf_t *b, size_t off, size_t len, char *err,
                     size_t elen);
/* Returns len when all match, else the first bad index (with *got set),
 * or (size_t)-1 when the copy back failed (message in err). */
size_t bench_buf_check(bench_buf_t *b, size_t off, size_t len, uint64_t seed,
                       unsigned char *staging, unsigned char *got, char *err,
                       size_t elen);

/* ---- Ceilings (bench_ceiling.c, bench_cuda.c) ------------------------- */

typedef struct bench_ceil bench_ceil_t;
/* Rank 0's ceiling state.  host: src/dst are rank 0's buffers and the
 * scratch is allocated here; cuda: buffers of len bytes on the sender's
 * device a and the receiver's device b (ordinals here), pinned host memory
 * of pinned_len bytes.  NULL with a message on failure (*nomem set when it
 * was lack of memory). */
bench_ceil_t *bench_ceil_create_host(const bench_buf_t *src,
                                     const bench_buf_t *dst, size_t scratch,
                                     int *nomem, char *err, size_t elen);
bench_ceil_t *bench_ceil_create_cuda(ipcp_comm_t *comm, int a, int b, int plain,
                                     size_t len, size_t pinned_len, int *nomem,
                                     char *err, size_t elen);
void bench_ceil_destroy(ipcp_comm_t *comm, bench_ceil_t *cl);
/* Host ceilings of ranks bound to fewer CPUs than the library's queues:
 * the parallel copies also run on peer's CPUs (rank 1's mask), as the
 * library's split copies do. */
void bench_ceil_set_cpus(bench_ceil_t *cl, const cpu_set_t *peer);
/* GB/s of kind for window x size, median of reps; <= 0 with a message in
 * err when it could not be measured. */
double bench_ceil_measure(bench_ceil_t *cl, bench_ceil_kind_t kind, size_t size,
                          int window, int slots, int reps, char *err,
                          size_t elen);

/* Device memory and CUDA ceilings (bench_cuda.c; without CUDA at build
 * time they fail, saying so). */
int bench_cuda_buf_alloc(ipcp_comm_t *comm, size_t len, int device,
                         bench_alloc_t alloc, bench_buf_t *b, int *nomem,
                         char *err, size_t elen);
void bench_cuda_buf_free(ipcp_comm_t *comm, bench_buf_t *b);
/* On the bound device, synchronized with the device before returning. */
int bench_cuda_h2d(void *dst, const void *src, size_t n, char *err,
                   size_t elen);
int bench_cuda_d2h(void *dst, const void *src, size_t n, char *err,
                   size_t elen);
int bench_cuda_memset(void *dst, unsigned char v, size_t n, char *err,
                      size_t elen);
typedef struct bench_cuda_ceil bench_cuda_ceil_t;
bench_cuda_ceil_t *bench_cuda_ceil_create(ipcp_comm_t *comm, int a, int b,
                                          int plain, size_t len,
                                          size_t pinned_len, int *nomem,
                                          char *err, size_t elen);
void bench_cuda_ceil_destroy(ipcp_comm_t *comm, bench_cuda_ceil_t *cc);
double bench_cuda_ceil_measure(bench_cuda_ceil_t *cc, bench_ceil_kind_t kind,
                               size_t size, int window, int slots, int reps,
                               char *err, size_t elen);

/* ---- References of --compare (bench_nccl.h, bench_cuda.c) ------------ */

#define BENCH_IPC_HANDLE_BYTES 64 /* CU_IPC_HANDLE_SIZE */

/* The forum post's pattern in one process (rank 0): rank 1's buffer
 * mapped while dev0 (the bound device) is current, chunks D2H on 4 streams
 * of dev0 into pinned memory, then H2D on 4 streams of dev1 after an
 * event, as examples/seed.c run_naive does with the runtime API. */
typedef struct bench_naive bench_naive_t;
bench_naive_t *bench_naive_create(int dev0, int dev1, size_t pinned_len,
                                  int *nomem, char *err, size_t elen);
/* Opens a cuIpcGetMemHandle handle in dev0's context (the seed's choice);
 * *ptr is the mapping, closed by bench_naive_close. */
int bench_naive_open(bench_naive_t *nv,
                     const unsigned char h[BENCH_IPC_HANDLE_BYTES], void **ptr,
                     char *err, size_t elen);
void bench_naive_close(bench_naive_t *nv);
/* window transfers of size bytes from src (dev0) into the mapping, the
 * k-th at slot k % slots, each in 16 chunks; returns when all landed. */
int bench_naive_window(bench_naive_t *nv, const void *src, size_t size,
                       int window, int slots, char *err, size_t elen);
void bench_naive_destroy(bench_naive_t *nv);
/* Rank 1: the legacy IPC handle of a cuMemAlloc buffer. */
int bench_cuda_ipc_handle(void *ptr, unsigned char h[BENCH_IPC_HANDLE_BYTES],
                          char *err, size_t elen);

/* Open MPI's rows on host memory (bench_ompi.c).  Whether the run has
 * them: rank 0 looks for mpirun on PATH, ipcpipe-bench-mpi next to this
 * program and Open MPI's shared-memory BTL, and tells the other ranks
 * (every rank calls it).  1 yes (the rows may still fail, where Open MPI
 * is there but broken), 0 no with why (for a note), -1 the ranks lost
 * step. */
int bench_ompi_select(bench_ctx_t *ctx, char *why, size_t len);
/* "Open MPI 4.1.4, btl self,vader, ..." on rank 0, "" without rows. */
void bench_ompi_describe(const bench_ctx_t *ctx, char *buf, size_t len);

/* ---- --load (bench_load.c) -------------------------------------------- */

/* Bytes per copy of the load, and copies per batch. */
#define BENCH_LOAD_CHUNK ((size_t)64 << 20)
#define BENCH_LOAD_DEPTH 4

typedef struct bench_load {
    int pid; /* the worker, 0: none */
    int fd;  /* read end of its pipe */
    bench_load_kind_t kind;
    int device;
} bench_load_t;

/* The worker's copies (bench_cuda.c): until *stop, then *bytes moved in
 * *secs.  Writes a byte to ready_fd after the first batch.  0 or -1. */
int bench_cuda_load_run(int device, int h2d, volatile sig_atomic_t *stop,
                        int ready_fd, double *bytes, double *secs, char *err,
                        size_t elen);
/* Starts the worker on device (this process's ordinal) and returns once
 * its copies run.  0, or -1 with err. */
int bench_load_start(bench_load_t *l, bench_load_kind_t kind, int device,
                     char *err, size_t elen);
/* Stops it and prints what it moved to stderr (nothing when none runs). */
void bench_load_stop(bench_load_t *l);
/* "d2h" or "h2d". */
const char *bench_load_name(bench_load_kind_t kind);
/* main() of "ipcpipe-bench --load-worker KIND DEVICE FD"; the exit status. */
int bench_load_worker_main(int argc, char **argv);

#endif
