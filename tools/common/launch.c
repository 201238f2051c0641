/* Spawner for the tools and the multi-process tests (see launch.h).
 *
 * The parent blocks SIGCHLD, SIGINT and SIGTERM while the ranks run and
 * takes them with sigtimedwait, so that a child's exit, a Ctrl-C and the
 * timeout are all handled in one loop without signal handlers and without a
 * pipe that the children could inherit. */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Grace between SIGTERM and SIGKILL when the ranks are stopped. */
#define KILL_GRACE_S 2.0
/* Longest sleep of the wait loop; bounds the delay of a missed signal. */
#define TICK_S 0.1

static const char *const rank_vars[] = {
    "IPCPIPE_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK",
};

int ipcp_launch_is_rank(void)
{
    for (size_t i = 0; i < sizeof(rank_vars) / sizeof(rank_vars[0]); i++) {
        const char *v = getenv(rank_vars[i]);
        if (v && *v)
            return 1;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Marks every inherited descriptor above stderr close-on-exec, so a rank
 * never holds the parent's sockets or pipes open (a peer waiting for EOF on
 * them would hang).  The child_env hook may still use them before exec. */
static void child_cloexec_all(void)
{
#if defined(SYS_close_range) && defined(CLOSE_RANGE_CLOEXEC)
    if (syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) == 0)
        return;
#endif
    struct rlimit rl;
    long max = 4096;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        max = rl.rlim_cur < 65536 ? (long)rl.rlim_cur : 65536;
    for (int fd = 3; fd < max; fd++) {
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0 && !(fl & FD_CLOEXEC))
            fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
}

static void child_setenv_int(const char *name, int value)
{
    char buf[16];
    snprintf(buf, sizeof(buf), "%d", value);
    setenv(name, buf, 1);
}

/* Binds the calling process to the (rank mod n)-th CPU it may use; the
 * error goes to stderr and the rank runs unbound. */
static void child_pin(int rank)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
        return;
    int n = CPU_COUNT(&allowed), want = rank % (n > 0 ? n : 1), seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed) || seen++ != want)
            continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0)
            fprintf(stderr,
                    "ipcp_launch: rank %d: cannot bind to CPU %d: "
                    "%s\n",
                    rank, c, strerror(errno));
        return;
    }
}

/* Runs in the forked child; never returns. */
static void child_exec(const ipcp_launch_opts_t *opts, int rank, pid_t pgid,
                       const char *job, const char *self,
                       const sigset_t *oldmask)
{
    setpgid(0, pgid);
    sigprocmask(SIG_SETMASK, oldmask, NULL);
    child_cloexec_all();

    child_setenv_int("IPCPIPE_RANK", rank);
    child_setenv_int("IPCPIPE_SIZE", opts->nranks);
    setenv("IPCPIPE_JOB", job, 1);
    for (char *const *e = opts->extra_env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e)
            continue;
        char name[256];
        size_t n = (size_t)(eq - *e);
        if (n >= sizeof(name))
            continue;
        memcpy(name, *e, n);
        name[n] = '\0';
        setenv(name, eq + 1, 1);
    }
    if (opts->child_env)
        opts->child_env(rank, opts->child_env_arg);
    const char *pin = getenv("IPCP_LAUNCH_PIN");
    if (opts->pin || (pin && strcmp(pin, "1") == 0))
        child_pin(rank);

    if (opts->argv) {
        execvp(opts->argv[0], opts->argv);
        fprintf(stderr, "ipcp_launch: rank %d: cannot run %s: %s\n", rank,
                opts->argv[0], strerror(errno));
    } else {
        static char *const fallback[] = {"ipcpipe-rank", NULL};
        char *const *av = opts->argv_self ? opts->argv_self : fallback;
        /* The resolved path gives the ranks their program's name in ps;
         * /proc/self/exe still works if the file was replaced meanwhile. */
        if (self[0])
            execv(self, av);
        execv("/proc/self/exe", av);
        fprintf(stderr,
                "ipcp_launch: rank %d: cannot re-run /proc/self/exe: %s\n",
                rank, strerror(errno));
    }
    _exit(127);
}

/* Book-keeping of one launch, shared by the wait loop's helpers. */
typedef struct launch_state {
    ipcp_launch_result_t *res;
    int alive[IPCP_LAUNCH_MAX_RANKS];
    int nalive;
    pid_t pgid;
    double kill_at; /* when to send SIGKILL; 0: not stopping */
    int killed_hard;
} launch_state_t;

/* Sends sig to the ranks still running: to the group (which reaches their
 * own children too) and to each rank (in case one left the group). */
static void signal_alive(launch_state_t *st, int sig)
{
    if (st->nalive == 0)
        return;
    kill(-st->pgid, sig);
    for (int i = 0; i < st->res->nranks; i++)
        if (st->alive[i])
            kill(st->res->pid[i], sig);
}

static void stop_all(launch_state_t *st, int sig)
{
    if (st->kill_at > 0)
        return;
    signal_alive(st, sig);
    st->kill_at = now_s() + KILL_GRACE_S;
}

static int is_failure(int status)
{
    return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/* Reaps every rank that has ended; returns 1 if one of them failed. */
static int reap_ready(launch_state_t *st)
{
    int failed = 0;
    for (int i = 0; i < st->res->nranks; i++) {
        if (!st->alive[i])
            continue;
        int status;
        pid_t r = waitpid(st->res->pid[i], &status, WNOHANG);
        if (r == st->res->pid[i] || (r < 0 && errno == ECHILD)) {
            /* ECHILD: someone else reaped it; count it as killed. */
            st->res->wait_status[i] = r < 0 ? SIGKILL : status;
            st->alive[i] = 0;
            st->nalive--;
            failed |= is_failure(st->res->wait_status[i]);
        }
    }
    return failed;
}

static void wait_loop(launch_state_t *st, const ipcp_launch_opts_t *opts,
                      const sigset_t *waitset)
{
    double deadline = opts->timeout_s > 0 ? now_s() + opts->timeout_s : 0;
    while (st->nalive > 0) {
        if (reap_ready(st) && !opts->keep_going)
            stop_all(st, SIGTERM);
        if (st->nalive == 0)
            break;
        double t = now_s(), wake = t + TICK_S;
        if (deadline > 0 && t >= deadline && !st->res->timed_out) {
            st->res->timed_out = 1;
            fprintf(stderr,
                    "ipcp_launch: timed out after %.1f s; stopping "
                    "%d rank(s)\n",
                    opts->timeout_s, st->nalive);
            st->kill_at = 0;
            stop_all(st, SIGTERM);
        }
        if (st->kill_at > 0 && t >= st->kill_at && !st->killed_hard) {
            signal_alive(st, SIGKILL);
            st->killed_hard = 1;
        }
        if (deadline > 0 && !st->res->timed_out && deadline < wake)
            wake = deadline;
        if (st->kill_at > 0 && !st->killed_hard && st->kill_at < wake)
            wake = st->kill_at;
        double dt = wake - t > 0 ? wake - t : 0;
        struct timespec ts = {(time_t)dt,
                              (long)((dt - (double)(time_t)dt) * 1e9)};
        int sig = sigtimedwait(waitset, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) {
            /* The ranks are in their own group, so a terminal's Ctrl-C
             * reaches only us: pass it on, then escalate as for a failure. */
            signal_alive(st, sig);
            if (st->kill_at <= 0)
                st->kill_at = now_s() + KILL_GRACE_S;
        }
    }
}

static int start_ranks(launch_state_t *st, const ipcp_launch_opts_t *opts,
                       const char *job, const sigset_t *oldmask)
{
    char self[4096] = "";
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    if (n <= 0 || access(self, X_OK) != 0)
        self[0] = '\0';
    for (int i = 0; i < opts->nranks; i++) {
        pid_t pid = fork();
        if (pid < 0)
            return -1;
        if (pid == 0)
            child_exec(opts, i, st->pgid, job, self, oldmask);
        /* Set the group from both sides so that neither order of running
         * leaves a window where a signal to the group misses this rank. */
        if (i == 0)
            st->pgid = pid;
        setpgid(pid, st->pgid);
        st->res->pid[i] = pid;
        st->alive[i] = 1;
        st->nalive++;
    }
    return 0;
}

int ipcp_launch(const ipcp_launch_opts_t *opts, ipcp_launch_result_t *res)
{
    static atomic_uint counter;
    if (!opts || !res || opts->nranks < 1 ||
        opts->nranks > IPCP_LAUNCH_MAX_RANKS ||
        (opts->argv && !opts->argv[0])) {
        errno = EINVAL;
        return -1;
    }
    memset(res, 0, sizeof(*res));
    res->nranks = opts->nranks;

    char job[64];
    snprintf(job, sizeof(job), "l%ld-%u-%lld", (long)getpid(),
             atomic_fetch_add(&counter, 1), (long long)time(NULL));
    fflush(NULL); /* or buffered output would be written once per rank */

    sigset_t waitset, oldmask;
    sigemptyset(&waitset);
    sigaddset(&waitset, SIGCHLD);
    sigaddset(&waitset, SIGINT);
    sigaddset(&waitset, SIGTERM);
    /* SIGCHLD set to SIG_IGN would make the kernel reap the ranks for us and
     * lose their statuses. */
    struct sigaction dfl = {.sa_handler = SIG_DFL}, oldchld;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, &oldchld);
    pthread_sigmask(SIG_BLOCK, &waitset, &oldmask);

    launch_state_t st = {.res = res};
    int rc = start_ranks(&st, opts, job, &oldmask);
    int saved = errno;
    if (rc < 0) {
        fprintf(stderr, "ipcp_launch: fork: %s\n", strerror(saved));
        stop_all(&st, SIGKILL);
    }
    wait_loop(&st, opts, &waitset);

    pthread_sigmask(SIG_SETMASK, &oldmask, NULL);
    sigaction(SIGCHLD, &oldchld, NULL);
    if (rc < 0)
        errno = saved;
    return rc;
}

/* A signal the launcher sends when it stops the job. */
static int is_stop(int status)
{
    return WIFSIGNALED(status) &&
           (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGKILL ||
            WTERMSIG(status) == SIGINT);
}

/* A rank that ended by a signal we send when stopping the job is less
 * likely to be the cause of the failure than one that failed on its own,
 * and one that skipped (77) while others ran is not the cause at all. */
static int failure_rank(const ipcp_launch_result_t *res)
{
    int first_exit = -1, first_stop = -1, first_skip = -1;
    for (int i = 0; i < res->nranks; i++) {
        int s = res->wait_status[i];
        if (!is_failure(s))
            continue;
        if (WIFSIGNALED(s)) {
            if (!is_stop(s))
                return i;
            if (first_stop < 0)
                first_stop = i;
        } else if (WEXITSTATUS(s) == 77) {
            if (first_skip < 0)
                first_skip = i;
        } else if (first_exit < 0) {
            first_exit = i;
        }
    }
    return first_exit >= 0   ? first_exit
           : first_stop >= 0 ? first_stop
                             : first_skip;
}

static int status_code(int s)
{
    return WIFSIGNALED(s) ? 128 + WTERMSIG(s) : WEXITSTATUS(s);
}

static void print_failure(const ipcp_launch_result_t *res, int i)
{
    int s = res->wait_status[i];
    if (WIFSIGNALED(s))
        fprintf(stderr,
                "ipcp_launch: rank %d (pid %ld) killed by signal %d "
                "(%s)\n",
                i, (long)res->pid[i], WTERMSIG(s), strsignal(WTERMSIG(s)));
    else
        fprintf(stderr,
                "ipcp_launch: rank %d (pid %ld) exited with code %d%s\n", i,
                (long)res->pid[i], WEXITSTATUS(s),
                WEXITSTATUS(s) == 77 ? " (skipped)" : "");
}

int ipcp_launch_exit_code(const ipcp_launch_result_t *res)
{
    int all_ok = 1, skipped = 0, skip_or_stop = 1;
    for (int i = 0; i < res->nranks; i++) {
        int s = res->wait_status[i];
        int skip = WIFEXITED(s) && WEXITSTATUS(s) == 77;
        if (is_failure(s))
            all_ok = 0;
        skipped |= skip;
        /* A rank stopped because another one skipped first (it might have
         * skipped too) does not make the job a failure; one that passed
         * while another skipped does. */
        if (!skip && !is_stop(s))
            skip_or_stop = 0;
    }
    if (!res->timed_out && (all_ok || (skipped && skip_or_stop)))
        return all_ok ? 0 : 77;
    for (int i = 0; i < res->nranks; i++)
        if (is_failure(res->wait_status[i]))
            print_failure(res, i);
    if (res->timed_out)
        return 124;
    int code = status_code(res->wait_status[failure_rank(res)]);
    /* Some ranks skipped while others ran (or failed): the job did not
     * skip, and the test runner must not count it as skipped. */
    if (code == 77) {
        fprintf(stderr, "ipcp_launch: some ranks skipped (77) and others "
                        "did not: a failure\n");
        code = 1;
    }
    return code;
}
