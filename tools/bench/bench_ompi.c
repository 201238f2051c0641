/* ipcpipe-bench --compare on host memory: Open MPI's figures as "ompi"
 * rows beside ipcpipe's.  Rank 0 runs ipcpipe-bench-mpi (bench_mpi.c, next
 * to this program) once, at the first ompi case, under
 *
 *   mpirun -np 2 --oversubscribe --bind-to none --mca pml ob1
 *          --mca btl self,vader (or self,sm from Open MPI 5 on)
 *
 * for every ompi size of the run, with the window, slots, repetitions,
 * rounds, warm-up and seed ipcpipe's cases of that size use; MPI rank r
 * binds itself to the CPUs ipcpipe's rank r may run on, so that both are
 * measured on the same cores.  ob1 is forced because Debian's Open MPI
 * would otherwise pick its UCX layer, which has shared-memory transports of
 * its own: the row is meant to show Open MPI's shared-memory BTL.  The
 * ranks of ipcpipe wait meanwhile on a receive (their progress threads
 * sleep), then every ompi case takes its size's line of the results. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_ctx.h"

#define OMPI_PATH_MAX 4096
#define OMPI_ARGS_MAX (32 + 2 * BENCH_MAX_SIZES)
/* Output of mpirun shown with a failure, at most. */
#define OMPI_LOG_MAX (16 * 1024)

extern char **environ;

/* One size's figures, as ipcpipe-bench-mpi wrote them. */
typedef struct ompi_row {
    size_t size;
    int window, iters, verified; /* verified: 1, 0, -1 off */
    int waived;
    double gbps, latency_us, first_us, skew_us;
    double gbps_min, gbps_max, latency_min_us, latency_max_us;
    double ahead_gbps, ahead_min, ahead_max; /* --ahead; NAN: none */
    char reason[BENCH_REASON_MAX];
} ompi_row_t;

struct bench_ompi {
    char mpirun[OMPI_PATH_MAX];
    char helper[OMPI_PATH_MAX];
    char version[64];             /* "4.1.4" */
    const char *btl;              /* "vader" or "sm" */
    char error[BENCH_REASON_MAX]; /* set: every ompi row fails with it */
    int ran;
    ompi_row_t rows[BENCH_MAX_SIZES];
    int nrows;
};

/* ---- finding Open MPI -----------------------------------------------------
 */

/* name's first executable on PATH into out; 0, or -1 when none. */
static int find_on_path(const char *name, char *out, size_t len)
{
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t n = strcspn(path, ":");
        if (n > 0 &&
            (size_t)snprintf(out, len, "%.*s/%s", (int)n, path, name) < len &&
            access(out, X_OK) == 0)
            return 0;
        path += n + (path[n] == ':');
    }
    return -1;
}

/* ipcpipe-bench-mpi in the directory of this executable. */
static int find_helper(char *out, size_t len)
{
    char self[OMPI_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    if ((size_t)snprintf(out, len, "%s/ipcpipe-bench-mpi", self) >= len)
        return -1;
    return access(out, X_OK) == 0 ? 0 : -1;
}

/* A temporary file, removed at once (only the descriptor is used). */
static int temp_fd(char *path, size_t len)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, len, "%s/ipcpipe-bench-ompi-XXXXXX",
             dir && *dir ? dir : "/tmp");
    return mkstemp(path);
}

/* Runs argv (argv[0] a path) with envp, stdin from /dev/null, stdout and
 * stderr into log_fd.  Returns its exit status (128 + the signal that
 * ended it), or -1 with err. */
static int run_child(char *const argv[], char *const envp[], int log_fd,
                     char *err, size_t elen)
{
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t parent = getpid(), pid = null_fd < 0 ? -1 : fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        /* mpirun takes its ranks down with it when the bench is killed
         * (--timeout kills the ranks with SIGKILL). */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        if (dup2(null_fd, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0)
            _exit(127);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    if (null_fd >= 0)
        close(null_fd);
    if (pid < 0) {
        bench_fmt(err, elen, "cannot start %s: %s", argv[0], strerror(errno));
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            bench_fmt(err, elen, "waiting for %s: %s", argv[0],
                      strerror(errno));
            return -1;
        }
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The environment of the children: this one's, plus Open MPI's consent to
 * run as root where the bench runs as root (CI does). */
static char **child_env(void)
{
    static char root[] = "OMPI_ALLOW_RUN_AS_ROOT=1";
    static char confirm[] = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 3, sizeof(*env));
    if (!env)
        return NULL;
    memcpy(env, environ, n * sizeof(*env));
    if (geteuid() == 0) {
        env[n++] = root;
        env[n++] = confirm;
    }
    return env;
}

/* Up to len - 1 bytes of fd from its start, NUL-terminated. */
static void read_all(int fd, char *buf, size_t len)
{
    size_t got = 0;
    ssize_t n;
    lseek(fd, 0, SEEK_SET);
    while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
}

/* Runs argv with its output in log (len bytes); the exit status or -1. */
static int run_logged(char *const argv[], char *log, size_t len, char *err,
                      size_t elen)
{
    char path[OMPI_PATH_MAX];
    char **env = child_env();
    int fd = temp_fd(path, sizeof(path)), rc = -1;
    if (fd < 0 || !env) {
        bench_fmt(err, elen, "a temporary file for %s's output: %s", argv[0],
                  env ? strerror(errno) : "out of memory");
    } else {
        unlink(path);
        rc = run_child(argv, env, fd, err, elen);
        read_all(fd, log, len);
    }
    if (fd >= 0)
        close(fd);
    free(env);
    return rc;
}

/* Open MPI's version and its shared-memory BTL, from ompi_info.  1 found,
 * 0 not Open MPI (why in err), -1 ompi_info failed (err). */
static int probe_ompi_info(struct bench_ompi *om, char *err, size_t elen)
{
    char path[OMPI_PATH_MAX];
    if (find_on_path("ompi_info", path, sizeof(path)) < 0) {
        bench_fmt(err, elen,
                  "mpirun (%s) is not Open MPI's: no ompi_info on "
                  "PATH",
                  om->mpirun);
        return 0;
    }
    char *argv[] = {path, NULL};
    char *log = malloc(256 * 1024);
    int rc = log ? run_logged(argv, log, 256 * 1024, err, elen) : -1;
    if (rc != 0) {
        if (rc > 0)
            bench_fmt(err, elen, "%s exited with status %d: %.160s", path, rc,
                      log);
        else if (!log)
            bench_fmt(err, elen, "out of memory");
        free(log);
        return -1;
    }
    const char *v = strstr(log, "Open MPI:");
    if (v)
        sscanf(v + 9, " %63s", om->version);
    /* Open MPI 5 renamed the vader BTL sm. */
    om->btl = strstr(log, "MCA btl: sm ")      ? "sm"
              : strstr(log, "MCA btl: vader ") ? "vader"
                                               : NULL;
    free(log);
    if (!om->btl)
        bench_fmt(err, elen,
                  "ompi_info lists no shared-memory BTL (vader or "
                  "sm)");
    return om->btl ? 1 : -1;
}

/* Rank 0: whether ompi rows can be had.  1 yes, 0 no (why: a note), -1
 * Open MPI is there but broken (the rows then fail with why). */
static int probe(struct bench_ompi *om, char *why, size_t len)
{
    if (find_on_path("mpirun", om->mpirun, sizeof(om->mpirun)) < 0) {
        bench_fmt(why, len, "mpirun not found on PATH");
        return 0;
    }
    if (find_helper(om->helper, sizeof(om->helper)) < 0) {
        bench_fmt(why, len,
                  "no ipcpipe-bench-mpi next to ipcpipe-bench "
                  "(built only where CMake finds MPI)");
        return 0;
    }
    if (getenv("OMPI_COMM_WORLD_SIZE")) {
        bench_fmt(why, len,
                  "ipcpipe-bench runs under Open MPI's mpirun, "
                  "which cannot start another job from inside; run it "
                  "without a launcher for the ompi rows");
        return 0;
    }
    return probe_ompi_info(om, why, len);
}

int bench_ompi_select(bench_ctx_t *ctx, char *why, size_t len)
{
    int32_t rows = 0;
    why[0] = '\0';
    if (ctx->rank == RECV) {
        ctx->ompi = calloc(1, sizeof(*ctx->ompi));
        int p = ctx->ompi ? probe(ctx->ompi, why, len) : -1;
        if (p < 0 && ctx->ompi)
            bench_fmt(ctx->ompi->error, sizeof(ctx->ompi->error), "%s", why);
        rows = ctx->ompi && p != 0;
        for (int r = 1; r < ctx->size; r++)
            if (ipcp_send(ctx->comm, &rows, sizeof(rows), r, TAG_OMPI) !=
                IPCP_OK)
                return -1;
        return rows;
    }
    if (ipcp_recv(ctx->comm, &rows, sizeof(rows), RECV, TAG_OMPI, NULL) !=
        IPCP_OK)
        return -1;
    return rows;
}

void bench_ompi_describe(const bench_ctx_t *ctx, char *buf, size_t len)
{
    const struct bench_ompi *om = ctx->ompi;
    buf[0] = '\0';
    if (om && om->btl)
        bench_fmt(buf, len, "Open MPI %s, btl self,%s, pml ob1 (%s)",
                  om->version, om->btl, om->mpirun);
}

/* ---- the run --------------------------------------------------------------
 */

/* set as a Linux CPU list ("0-3,8"). */
static void cpu_list(const cpu_set_t *set, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && off < len; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
            e++;
        int n = e > c
                    ? snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "",
                               c, e)
                    : snprintf(buf + off, len - off, "%s%d", off ? "," : "", c);
        off += n > 0 ? (size_t)n : 0;
        c = e;
    }
}

/* Bytes both MPI ranks take for the sizes up to s: a source and the
 * slots each, for the largest of them (ipcpipe-bench-mpi allocates once). */
static uint64_t mpi_need(const bench_opts_t *o, size_t s)
{
    uint64_t slots = (uint64_t)bench_case_slots(o, s) * s;
    uint64_t win = BENCH_WINDOW_BYTES > slots ? BENCH_WINDOW_BYTES : slots;
    return 2 * ((uint64_t)s + win);
}

/* The sizes to run: those of the ompi cases that have ipcpipe buffers and
 * whose MPI buffers fit beside them; the others' rows are waived. */
static int pick_sizes(bench_ctx_t *ctx, size_t *sizes)
{
    struct bench_ompi *om = ctx->ompi;
    uint64_t avail = bench_mem_available(), slack = (uint64_t)256 << 20;
    int n = 0;
    for (int i = 0; i < ctx->ncases && n < BENCH_MAX_SIZES; i++) {
        const bench_case_t *c = &ctx->cs[i];
        if (c->path->kind != BENCH_KIND_MPI || c->size > ctx->cap)
            continue;
        uint64_t need = mpi_need(ctx->o, c->size);
        if (avail == UINT64_MAX || need + slack <= avail) {
            sizes[n++] = c->size;
            continue;
        }
        ompi_row_t *r = &om->rows[om->nrows++];
        *r = (ompi_row_t){.size = c->size, .waived = 1, .verified = -1};
        bench_fmt(r->reason, sizeof(r->reason),
                  "not enough memory for Open MPI's buffers beside "
                  "ipcpipe's (%.1f GiB needed, %.1f GiB usable)",
                  (double)need / (1 << 30), (double)avail / (1 << 30));
    }
    return n;
}

/* mpirun's command line, its strings kept in store. */
typedef struct ompi_cmd {
    char *argv[OMPI_ARGS_MAX + 1];
    int argc;
    char store[32 * 1024];
    size_t used;
} ompi_cmd_t;

static void cmd_add(ompi_cmd_t *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void cmd_add(ompi_cmd_t *cmd, const char *fmt, ...)
{
    va_list ap;
    size_t room = sizeof(cmd->store) - cmd->used;
    va_start(ap, fmt);
    int n = vsnprintf(cmd->store + cmd->used, room, fmt, ap);
    va_end(ap);
    /* Never reached with 64 sizes and CPU lists of 1024 CPUs; a cut
     * argument would fail mpirun's parsing rather than run wrongly. */
    if (n < 0 || (size_t)n >= room || cmd->argc == OMPI_ARGS_MAX)
        return;
    cmd->argv[cmd->argc++] = cmd->store + cmd->used;
    cmd->argv[cmd->argc] = NULL;
    cmd->used += (size_t)n + 1;
}

static void build_cmd(const bench_ctx_t *ctx, const size_t *sizes, int n,
                      const char *out, const char cpus[2][1024],
                      ompi_cmd_t *cmd)
{
    const struct bench_ompi *om = ctx->ompi;
    const bench_opts_t *o = ctx->o;
    cmd->argc = 0;
    cmd->used = 0;
    cmd_add(cmd, "%s", om->mpirun);
    cmd_add(cmd, "-np");
    cmd_add(cmd, "2");
    /* Each rank binds itself (--cpus0/1); mpirun's own binding and its
     * count of slots (cores it sees) would only get in the way. */
    cmd_add(cmd, "--oversubscribe");
    cmd_add(cmd, "--bind-to");
    cmd_add(cmd, "none");
    cmd_add(cmd, "--mca");
    cmd_add(cmd, "pml");
    cmd_add(cmd, "ob1");
    cmd_add(cmd, "--mca");
    cmd_add(cmd, "btl");
    cmd_add(cmd, "self,%s", om->btl);
    cmd_add(cmd, "%s", om->helper);
    cmd_add(cmd, "--out");
    cmd_add(cmd, "%s", out);
    cmd_add(cmd, "--seed");
    cmd_add(cmd, "%llx", (unsigned long long)ctx->seed);
    cmd_add(cmd, "--warmup");
    cmd_add(cmd, "%d", o->warmup);
    if (!o->verify)
        cmd_add(cmd, "--no-verify");
    for (int r = 0; r < 2; r++) {
        if (!cpus[r][0])
            continue;
        cmd_add(cmd, "--cpus%d", r);
        cmd_add(cmd, "%s", cpus[r]);
    }
    for (int k = 0; k < n; k++) {
        size_t s = sizes[k];
        int rounds = s <= o->lat_max ? bench_lat_rounds(o, s) : 0;
        cmd_add(cmd, "--case");
        cmd_add(cmd, "%zu,%d,%d,%d,%d,%d", s, bench_window(o, s),
                bench_case_slots(o, s), bench_reps(o, s), rounds, o->ahead);
    }
}

/* ---- reading the results: one flat JSON object a line -------------------- */

/* p at a string's opening quote: just past its closing one, or NULL. */
static const char *skip_string(const char *p)
{
    for (p++; *p && *p != '\n'; p++) {
        if (*p == '\\' && p[1])
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

/* The value of key in the object that starts line, or NULL. */
static const char *json_value(const char *line, const char *key)
{
    size_t klen = strlen(key);
    const char *p = line + strspn(line, " ");
    if (*p++ != '{')
        return NULL;
    for (;;) {
        p += strspn(p, " ");
        if (*p != '"')
            return NULL;
        const char *k = p + 1;
        if (!(p = skip_string(p)))
            return NULL;
        int match = (size_t)(p - 1 - k) == klen && !strncmp(k, key, klen);
        p += strspn(p, " ");
        if (*p++ != ':')
            return NULL;
        p += strspn(p, " ");
        if (match)
            return p;
        p = *p == '"' ? skip_string(p) : p + strcspn(p, ",}\n");
        if (!p)
            return NULL;
        p += strspn(p, " ");
        if (*p++ != ',')
            return NULL;
    }
}

/* A number, or NAN when absent or null. */
static double json_num(const char *line, const char *key)
{
    const char *v = json_value(line, key);
    char *end;
    double d = v ? strtod(v, &end) : NAN;
    return v && end != v ? d : NAN;
}

/* true 1, false 0, null or absent -1. */
static int json_bool(const char *line, const char *key)
{
    const char *v = json_value(line, key);
    return !v                        ? -1
           : !strncmp(v, "true", 4)  ? 1
           : !strncmp(v, "false", 5) ? 0
                                     : -1;
}

/* A string into buf (escapes undone; \u escapes, which only stand for
 * control characters here, as '?'). */
static void json_strv(const char *line, const char *key, char *buf, size_t len)
{
    const char *v = json_value(line, key);
    size_t n = 0;
    if (v && *v == '"') {
        for (v++; *v && *v != '"' && *v != '\n' && n + 1 < len; v++) {
            if (*v == '\\' && v[1] == 'u' && strlen(v) >= 6) {
                buf[n++] = '?';
                v += 5;
                continue;
            }
            if (*v == '\\' && v[1])
                v++;
            buf[n++] = *v;
        }
    }
    buf[n] = '\0';
}

static void parse_results(struct bench_ompi *om, const char *text,
                          char *library, size_t llen)
{
    for (const char *line = text; *line;) {
        char status[16];
        if (json_value(line, "library"))
            json_strv(line, "library", library, llen);
        if (json_value(line, "size") && om->nrows < BENCH_MAX_SIZES) {
            ompi_row_t *r = &om->rows[om->nrows++];
            json_strv(line, "status", status, sizeof(status));
            *r = (ompi_row_t){
                .size = (size_t)json_num(line, "size"),
                .window = (int)json_num(line, "window"),
                .iters = (int)json_num(line, "iters"),
                .verified = json_bool(line, "verified"),
                .waived = strcmp(status, "waived") == 0,
                .gbps = json_num(line, "gbps"),
                .gbps_min = json_num(line, "gbps_min"),
                .gbps_max = json_num(line, "gbps_max"),
                .latency_us = json_num(line, "latency_us"),
                .latency_min_us = json_num(line, "latency_min_us"),
                .latency_max_us = json_num(line, "latency_max_us"),
                .first_us = json_num(line, "first_us"),
                .skew_us = json_num(line, "skew_us"),
                .ahead_gbps = json_num(line, "ahead_gbps"),
                .ahead_min = json_num(line, "ahead_gbps_min"),
                .ahead_max = json_num(line, "ahead_gbps_max"),
            };
            json_strv(line, "reason", r->reason, sizeof(r->reason));
        }
        line += strcspn(line, "\n");
        line += *line == '\n';
    }
}

/* ---- the cases ------------------------------------------------------------
 */

/* mpirun failed: its command and output on stderr, once; every ompi row
 * then fails, pointing there. */
static void report_failure(struct bench_ompi *om, const ompi_cmd_t *cmd, int rc,
                           const char *log, const char *err)
{
    fprintf(stderr, "ipcpipe-bench: the ompi rows' mpirun %s",
            rc < 0 ? "could not run: " : "failed: exit status ");
    if (rc < 0)
        fprintf(stderr, "%s\n", err);
    else
        fprintf(stderr, "%d\n", rc);
    fprintf(stderr, "ipcpipe-bench: command:");
    for (int k = 0; k < cmd->argc; k++)
        fprintf(stderr, " %s", cmd->argv[k]);
    fprintf(stderr, "\nipcpipe-bench: its output:\n%s%s", log,
            log[0] && log[strlen(log) - 1] != '\n' ? "\n" : "");
    if (rc < 0)
        bench_fmt(om->error, sizeof(om->error), "mpirun: %s", err);
    else
        bench_fmt(om->error, sizeof(om->error),
                  "mpirun exited with status %d (its command and output are "
                  "on stderr)",
                  rc);
}

/* Rank 0, at the first ompi case: every ompi size in one mpirun, rank r
 * of MPI on ipcpipe's rank r's CPUs (rank 1's in cpus1). */
static void ompi_run(bench_ctx_t *ctx, const cpu_set_t *cpus1)
{
    struct bench_ompi *om = ctx->ompi;
    static ompi_cmd_t cmd;
    size_t sizes[BENCH_MAX_SIZES];
    char cpus[2][1024], out[OMPI_PATH_MAX], err[BENCH_REASON_MAX], lib[160];
    cpu_set_t mine;
    om->ran = 1;
    int n = om->error[0] ? 0 : pick_sizes(ctx, sizes);
    if (n == 0)
        return;
    if (sched_getaffinity(0, sizeof(mine), &mine) != 0)
        CPU_ZERO(&mine);
    cpu_list(&mine, cpus[0], sizeof(cpus[0]));
    cpu_list(cpus1, cpus[1], sizeof(cpus[1]));
    int fd = temp_fd(out, sizeof(out));
    char *log = malloc(OMPI_LOG_MAX), *res = malloc(64 * 1024);
    if (fd < 0 || !log || !res) {
        bench_fmt(om->error, sizeof(om->error), "the results' file: %s",
                  fd < 0 ? strerror(errno) : "out of memory");
        goto out_free;
    }
    build_cmd(ctx, sizes, n, out, (const char(*)[1024])cpus, &cmd);
    double t0 = bench_now_s();
    int rc = run_logged(cmd.argv, log, OMPI_LOG_MAX, err, sizeof(err));
    double secs = bench_now_s() - t0;
    if (rc != 0) {
        report_failure(om, &cmd, rc, rc < 0 ? "" : log, err);
        goto out_free;
    }
    lib[0] = '\0';
    read_all(fd, res, 64 * 1024);
    parse_results(om, res, lib, sizeof(lib));
    lib[strcspn(lib, ",")] = '\0'; /* "Open MPI v4.1.4", not the package */
    bench_fmt(err, sizeof(err),
              "ompi: %s; %d size%s in %.1f s, MPI ranks 0 and 1 on CPUs %s "
              "and %s (as ipcpipe's)",
              lib[0] ? lib : "(no library line)", n, n == 1 ? "" : "s", secs,
              cpus[0][0] ? cpus[0] : "?", cpus[1][0] ? cpus[1] : "?");
    bench_report_note(ctx->o, err);
out_free:
    if (fd >= 0) {
        close(fd);
        unlink(out);
    }
    free(log);
    free(res);
}

/* The row of c's size from the run's results. */
static void ompi_fill(const struct bench_ompi *om, const bench_case_t *c,
                      bench_result_t *res)
{
    const ompi_row_t *r = NULL;
    for (int k = 0; k < om->nrows && !r; k++)
        if (om->rows[k].size == c->size)
            r = &om->rows[k];
    if (om->error[0] || !r || r->waived) {
        res->outcome = r && r->waived ? BENCH_WAIVED : BENCH_ERROR;
        bench_fmt(res->reason, sizeof(res->reason), "%s",
                  om->error[0] ? om->error
                  : r          ? r->reason
                               : "ipcpipe-bench-mpi wrote no result for this "
                                 "size");
        return;
    }
    if (r->window != res->window || !(r->gbps > 0)) {
        res->outcome = BENCH_ERROR;
        bench_fmt(res->reason, sizeof(res->reason),
                  "ipcpipe-bench-mpi's result is off: W %d (expected %d), "
                  "GB/s %g",
                  r->window, res->window, r->gbps);
        return;
    }
    res->gbps = r->gbps;
    res->gbps_min = r->gbps_min;
    res->gbps_max = r->gbps_max;
    res->latency_us = isfinite(r->latency_us) ? r->latency_us : -1;
    res->latency_min_us = r->latency_min_us;
    res->latency_max_us = r->latency_max_us;
    res->first_us = isfinite(r->first_us) ? r->first_us : -1;
    res->skew_us = r->skew_us;
    res->ahead_gbps = isfinite(r->ahead_gbps) ? r->ahead_gbps : 0;
    res->ahead_min = isfinite(r->ahead_min) ? r->ahead_min : 0;
    res->ahead_max = isfinite(r->ahead_max) ? r->ahead_max : 0;
    res->iters = r->iters;
    res->verified = r->verified;
    if (r->verified == 0)
        bench_fmt(res->reason, sizeof(res->reason), "%s", r->reason);
}

int bench_ompi_rank0(bench_ctx_t *ctx, const bench_case_t *c, int i,
                     bench_result_t *res)
{
    cpu_set_t cpus1;
    ipcp_status_t st = ipcp_recv(ctx->comm, &cpus1, sizeof(cpus1), SEND,
                                 bench_case_tag(i, T_CMP_ANSWER), NULL);
    if (st != IPCP_OK) {
        fprintf(stderr, "ipcpipe-bench [rank 0]: rank 1's CPUs: %s: %s\n",
                ipcp_strerror(st), ipcp_last_error());
        return -1;
    }
    if (!bench_size_waived(ctx, c, res)) {
        if (!ctx->ompi->ran)
            ompi_run(ctx, &cpus1);
        ompi_fill(ctx->ompi, c, res);
    }
    /* Nothing of the case runs on the other ranks. */
    return bench_bcast_verdict(ctx, i, 0);
}

int bench_ompi_other(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    int32_t verdict;
    ipcp_status_t st = IPCP_OK;
    if (ctx->rank == SEND) {
        /* Where rank 1 may run is where MPI's rank 1 will. */
        cpu_set_t mine;
        if (sched_getaffinity(0, sizeof(mine), &mine) != 0)
            CPU_ZERO(&mine);
        st = ipcp_send(ctx->comm, &mine, sizeof(mine), RECV,
                       bench_case_tag(i, T_CMP_ANSWER));
    }
    /* Waits for the whole MPI run at the first ompi case: a receive from a
     * peer that answers keepalives waits as long as it takes. */
    if (st == IPCP_OK)
        st = ipcp_recv(ctx->comm, &verdict, sizeof(verdict), RECV,
                       bench_case_tag(i, T_VERDICT), NULL);
    if (st != IPCP_OK)
        fprintf(stderr, "ipcpipe-bench [rank %d] %s: %s: %s\n", ctx->rank,
                c->name, ipcp_strerror(st), ipcp_last_error());
    return st == IPCP_OK ? 0 : -1;
}

void bench_ompi_destroy(bench_ctx_t *ctx)
{
    free(ctx->ompi);
    ctx->ompi = NULL;
}
