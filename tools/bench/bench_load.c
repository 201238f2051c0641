/* ipcpipe-bench --load: a third process that keeps one GPU's PCIe link
 * busy with pinned copies while the cases run, to show what the paths do
 * when another process shares the staged path's link (a striped transfer
 * waits for its staged part; IPCPIPE_STRIPE_ADAPT is the defence).  A
 * process and not a thread: the copies of another process's context
 * compete for the copy engines as a real neighbour's do, which a second
 * stream of the rank's own context would not show.
 *
 * The rank whose GPU is loaded starts it by re-running its own program
 * (fork, then exec at once: the child never touches the rank's CUDA
 * state), waits until its first copies are done, and stops it at the end.
 * The worker ends with its rank (PR_SET_PDEATHSIG) and with the job (it
 * stays in the ranks' process group). */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Longest wait for the worker's first copies (its CUDA start-up included),
 * and for it to finish its batch once told to stop. */
#define LOAD_READY_MS 60000
#define LOAD_STOP_MS  10000

const char *bench_load_name(bench_load_kind_t kind)
{
    return kind == BENCH_LOAD_H2D ? "h2d" : "d2h";
}

static volatile sig_atomic_t load_stop;

static void on_stop(int sig)
{
    (void)sig;
    load_stop = 1;
}

int bench_load_worker_main(int argc, char **argv)
{
    int dev, fd, ppid;
    int h2d = argc == 6 && strcmp(argv[2], "h2d") == 0;
    if (argc != 6 || (!h2d && strcmp(argv[2], "d2h") != 0) ||
        bench_parse_int(argv[3], 0, 1023, &dev) < 0 ||
        bench_parse_int(argv[4], 0, 1 << 20, &fd) < 0 ||
        bench_parse_int(argv[5], 1, 1 << 30, &ppid) < 0) {
        fprintf(stderr, "ipcpipe-bench: --load-worker d2h|h2d DEVICE FD "
                        "PARENT is --load's own process, not for use by "
                        "hand\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* A mask survives exec: the rank's thread may have blocked these. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    /* Its rank may have died before this was set. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != (pid_t)ppid)
        return 1;
    double bytes, secs;
    char err[BENCH_REASON_MAX];
    if (bench_cuda_load_run(dev, h2d, &load_stop, fd, &bytes, &secs, err,
                            sizeof(err)) < 0) {
        fprintf(stderr, "ipcpipe-bench: --load %s on device %d: %s\n", argv[2],
                dev, err);
        return 1;
    }
    dprintf(fd, "%.0f %.6f\n", bytes, secs);
    return 0;
}

/* Waits up to ms for the worker's pipe to be readable (or closed). */
static int wait_readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    double end = bench_now_s() + ms / 1e3;
    for (;;) {
        double left = end - bench_now_s();
        int n = poll(&p, 1, left > 0 ? (int)(left * 1e3) + 1 : 0);
        if (n >= 0 || errno != EINTR)
            return n;
    }
}

/* Ends the worker, by force after LOAD_STOP_MS; *text gets what it wrote
 * last (its figures), NUL-terminated.  Returns its wait status. */
static int reap(bench_load_t *l, char *text, size_t len)
{
    size_t got = 0;
    int ended = 0; /* its end of the pipe closed: it is exiting */
    kill(l->pid, SIGTERM);
    while (got + 1 < len && wait_readable(l->fd, LOAD_STOP_MS) > 0) {
        ssize_t n = read(l->fd, text + got, len - 1 - got);
        if (n <= 0) {
            ended = n == 0;
            break;
        }
        got += (size_t)n;
    }
    text[got] = '\0';
    int status = 0;
    if (!ended)
        kill(l->pid, SIGKILL);
    waitpid(l->pid, &status, 0);
    close(l->fd);
    l->pid = 0;
    l->fd = -1;
    return status;
}

int bench_load_start(bench_load_t *l, bench_load_kind_t kind, int device,
                     char *err, size_t elen)
{
    int fds[2];
    char a_dev[16], a_fd[16], a_ppid[24], text[128];
    const char *name = bench_load_name(kind);
    *l = (bench_load_t){.fd = -1, .kind = kind, .device = device};
    if (pipe2(fds, O_CLOEXEC) != 0) {
        bench_fmt(err, elen, "pipe: %s", strerror(errno));
        return -1;
    }
    /* Everything the child needs is made before the fork: between fork
     * and exec it only calls what is safe there. */
    snprintf(a_dev, sizeof(a_dev), "%d", device);
    snprintf(a_fd, sizeof(a_fd), "%d", fds[1]);
    snprintf(a_ppid, sizeof(a_ppid), "%ld", (long)getpid());
    char *av[] = {"ipcpipe-bench",
                  "--load-worker",
                  (char *)name,
                  a_dev,
                  a_fd,
                  a_ppid,
                  NULL};
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        bench_fmt(err, elen, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        fcntl(fds[1], F_SETFD, 0); /* the worker's end survives the exec */
        execv("/proc/self/exe", av);
        _exit(127);
    }
    close(fds[1]);
    l->pid = pid;
    l->fd = fds[0];
    char c = 0;
    int n = wait_readable(l->fd, LOAD_READY_MS);
    if (n > 0 && read(l->fd, &c, 1) == 1 && c == 'R')
        return 0;
    int status = reap(l, text, sizeof(text));
    if (n == 0)
        bench_fmt(err, elen, "its process did not start copying within %d s",
                  LOAD_READY_MS / 1000);
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        bench_fmt(err, elen, "cannot re-run this program (/proc/self/exe)");
    else
        bench_fmt(err, elen,
                  "its process ended before its first copies "
                  "(its own message is above)");
    return -1;
}

void bench_load_stop(bench_load_t *l)
{
    char text[128];
    double bytes = 0, secs = 0;
    if (l->pid <= 0)
        return;
    int status = reap(l, text, sizeof(text));
    if (sscanf(text, "%lf %lf", &bytes, &secs) == 2 && secs > 0)
        fprintf(stderr,
                "ipcpipe-bench: --load %s on device %d: %.1f GB/s of pinned "
                "copies over %.1f s, beside the cases\n",
                bench_load_name(l->kind), l->device, bytes / secs / 1e9, secs);
    else
        fprintf(stderr,
                "ipcpipe-bench: --load %s on device %d: its process ended "
                "without its figures (wait status %d)\n",
                bench_load_name(l->kind), l->device, status);
}
