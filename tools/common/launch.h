/* Spawner used by ipcpipe-bench, the examples and the multi-process tests:
 * when no launcher started this process, run it again as N ranks. */
#ifndef IPCP_TOOLS_LAUNCH_H
#define IPCP_TOOLS_LAUNCH_H

#include <sys/types.h>

#define IPCP_LAUNCH_MAX_RANKS 64

/* 1 when this process was started by a launcher or by ipcp_launch (one of
 * IPCPIPE_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID, RANK is set),
 * else 0. */
int ipcp_launch_is_rank(void);

typedef struct ipcp_launch_opts {
    int nranks;             /* 1 .. IPCP_LAUNCH_MAX_RANKS */
    double timeout_s;       /* all ranks are killed after this; <= 0: none */
    char *const *argv;      /* program and arguments; NULL: this program
                               (/proc/self/exe) with argv_self */
    char *const *argv_self; /* arguments when argv is NULL (argv[0] too) */
    char *const *extra_env; /* NULL-terminated "NAME=value", for every rank */
    /* Optional per-rank environment: called in the child after fork, before
     * exec, may call setenv. */
    void (*child_env)(int rank, void *arg);
    void *child_env_arg;
    int keep_going; /* 1: a failing rank does not stop the others
                       (tests that kill a rank on purpose) */
    int pin;        /* 1: rank i runs bound to one CPU, the
                       (i mod n)-th of the n this process may use,
                       as mpirun and srun bind ranks by default;
                       also when IPCP_LAUNCH_PIN=1 is set */
} ipcp_launch_opts_t;

typedef struct ipcp_launch_result {
    int nranks;
    int wait_status[IPCP_LAUNCH_MAX_RANKS]; /* as from waitpid */
    pid_t pid[IPCP_LAUNCH_MAX_RANKS];
    int timed_out; /* 1 if the timeout killed them */
} ipcp_launch_result_t;

/* Starts the ranks in their own process group with IPCPIPE_RANK,
 * IPCPIPE_SIZE and a fresh IPCPIPE_JOB set, waits for all of them, and on
 * the first failure (non-zero exit or signal; unless keep_going) or on
 * timeout kills the rest
 * (SIGTERM, then SIGKILL after 2 s).  SIGINT/SIGTERM to the parent are passed
 * on.  Returns 0 when every rank was started and reaped (see res), -1 with
 * errno on a launcher error. */
int ipcp_launch(const ipcp_launch_opts_t *opts, ipcp_launch_result_t *res);

/* Folds a result into one exit code: 0 if every rank exited 0, 77 if every
 * rank exited 77 (skipped) or was stopped by the launcher after one did,
 * 124 on timeout, else the code of the rank that
 * most likely caused the failure (an exit code other than 77 first, then
 * 128 + a signal, those the launcher sends when stopping the job last),
 * never 0 or 77 (1 when ranks that skipped met ranks that passed).  Prints
 * one line per failing rank to stderr. */
int ipcp_launch_exit_code(const ipcp_launch_result_t *res);

#endif
