/* The cases of test_api_hostile that run one process under a hostile
 * environment (limits, settings, a trace file that cannot be written):
 * the part of test_api_hostile in test_hostile_env.c; the hostile peers
 * are in test_hostile.c. */
#include "apitest.h"
#include "test_hostile_int.h"

#include <dirent.h>
#include <math.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/time.h"

/* Runs fn in a child whose stderr goes to log (read back into out); the
 * child must exit 0. */
static void in_child(void (*fn)(void), char *out, size_t cap)
{
    char path[] = "/tmp/ipcpipe-hostile-log.XXXXXX";
    int fd = mkstemp(path);
    T_CHECK(fd >= 0);
    fflush(stderr);
    pid_t pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        dup2(fd, 2);
        fn();
        fflush(stderr);
        _exit(0);
    }
    int st;
    T_CHECK(waitpid(pid, &st, 0) == pid);
    ssize_t n = pread(fd, out, cap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    fputs(out, stderr);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        T_FAIL("the child %s %d", WIFEXITED(st) ? "exited with" : "died of",
               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

static ipcp_comm_t *init_alone(void)
{
    ipcp_comm_t *comm = NULL;
    setenv("IPCPIPE_RANK", "0", 1);
    setenv("IPCPIPE_SIZE", "1", 1);
    T_OK(ipcp_init(NULL, &comm));
    return comm;
}

/* Under a 4 MiB file size limit (ulimit -f 4096) a 64 MiB shared buffer
 * is an error, not SIGXFSZ. */
static void child_fsize(void)
{
    struct rlimit rl = {4u << 20, 4u << 20};
    void *p = NULL;
    T_CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    ipcp_comm_t *comm = init_alone();
    T_STATUS(ipcp_mem_alloc(comm, 64u << 20, NULL, &p), IPCP_ERR_SYSTEM);
    T_MSG_HAS("RLIMIT_FSIZE");
    T_OK(ipcp_mem_alloc(comm, 1u << 20, NULL, &p));
    T_OK(ipcp_mem_free(comm, p));
    T_OK(ipcp_finalize(comm));
}

/* A NaN or infinite timeout is refused, not taken for "unset". */
static void child_nan_timeout(void)
{
    ipcp_comm_params_t p;
    ipcp_comm_t *comm = NULL;
    const double bad[] = {NAN, INFINITY, -INFINITY};
    setenv("IPCPIPE_RANK", "0", 1);
    setenv("IPCPIPE_SIZE", "1", 1);
    for (int i = 0; i < 3; i++) {
        ipcp_comm_params_init(&p);
        p.timeout_s = bad[i];
        T_STATUS(ipcp_init(&p, &comm), IPCP_ERR_INVALID);
        T_MSG_HAS("timeout_s");
        T_CHECK(comm == NULL);
    }
}

/* A job of 2^20 ranks under a descriptor limit of 4096 is refused at
 * once, naming the limit, before anything is allocated per rank. */
static void child_huge_job(void)
{
    struct rlimit rl = {4096, 4096};
    ipcp_comm_t *comm = NULL;
    T_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    setenv("IPCPIPE_RANK", "0", 1);
    setenv("IPCPIPE_SIZE", "1048576", 1);
    setenv("IPCPIPE_TIMEOUT", "1", 1);
    double t0 = ipcp__now_s();
    T_STATUS(ipcp_init(NULL, &comm), IPCP_ERR_SYSTEM);
    T_MSG_HAS("RLIMIT_NOFILE allows 4096");
    if (ipcp__now_s() - t0 > 0.5)
        T_FAIL("ipcp_init took %.2f s to refuse", ipcp__now_s() - t0);
}

/* A misspelt setting is named, with the one it most likely meant. */
static void child_misspelt(void)
{
    setenv("IPCPIPE_SPINUS", "5", 1);
    setenv("IPCPIPE_TIMOUT", "5", 1);
    T_OK(ipcp_settings_check());
}

/* A trace that cannot be written is said so, never announced as done. */
static void child_trace_full(void)
{
    setenv("IPCPIPE_TRACE", "/dev/full", 1);
    ipcp_comm_t *comm = init_alone();
    T_OK(ipcp_finalize(comm));
}

/* IPCPIPE_LOG_FILE: the lines go to the file named after host and pid,
 * none to stderr. */
static char log_dir[64];

static void child_log_file(void)
{
    char pattern[128];
    snprintf(pattern, sizeof(pattern), "%s/log-%%h-%%p.txt", log_dir);
    setenv("IPCPIPE_LOG_FILE", pattern, 1);
    setenv("IPCPIPE_LOG_LEVEL", "info", 1);
    ipcp_comm_t *comm = init_alone();
    T_OK(ipcp_finalize(comm));
}

static void check_log_file(const char *log)
{
    char host[64] = "?", path[400], text[8192];
    gethostname(host, sizeof(host) - 1);
    T_CHECK(!strstr(log, "ipcpipe"));
    DIR *d = opendir(log_dir);
    struct dirent *e;
    int files = 0;
    T_CHECK(d != NULL);
    while ((e = readdir(d))) {
        int pid;
        char prefix[128];
        if (e->d_name[0] == '.')
            continue;
        snprintf(prefix, sizeof(prefix), "log-%s-", host);
        T_CHECK(strncmp(e->d_name, prefix, strlen(prefix)) == 0);
        T_CHECK(sscanf(e->d_name + strlen(prefix), "%d.txt", &pid) == 1);
        snprintf(path, sizeof(path), "%s/%s", log_dir, e->d_name);
        FILE *f = fopen(path, "r");
        T_CHECK(f != NULL);
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        text[n] = '\0';
        fclose(f);
        unlink(path);
        char head[96];
        snprintf(head, sizeof(head), "%s:%d [", host, pid);
        T_CHECK(strncmp(text, head, strlen(head)) == 0);
        T_CHECK(strstr(text, "rank 0 of 1 ready"));
        T_CHECK(n > 0 && text[n - 1] == '\n');
        files++;
    }
    closedir(d);
    rmdir(log_dir);
    T_EQ_INT(files, 1);
}

int hostile_solo(const char *name)
{
    static char log[16384];
    if (strcmp(name, "fsize") == 0) {
        in_child(child_fsize, log, sizeof(log));
    } else if (strcmp(name, "nan_timeout") == 0) {
        in_child(child_nan_timeout, log, sizeof(log));
    } else if (strcmp(name, "huge_job") == 0) {
        in_child(child_huge_job, log, sizeof(log));
    } else if (strcmp(name, "misspelt") == 0) {
        in_child(child_misspelt, log, sizeof(log));
        T_CHECK(strstr(log, "IPCPIPE_SPINUS is not an ipcpipe setting "
                            "(ignored); did you mean IPCPIPE_SPIN_US?"));
        T_CHECK(strstr(log, "did you mean IPCPIPE_TIMEOUT?"));
    } else if (strcmp(name, "trace_full") == 0) {
        in_child(child_trace_full, log, sizeof(log));
        T_CHECK(strstr(log, "IPCPIPE_TRACE=/dev/full is not a regular file"));
        T_CHECK(!strstr(log, "ipcpipe: trace of"));
    } else if (strcmp(name, "log_file") == 0) {
        snprintf(log_dir, sizeof(log_dir), "/tmp/ipcpipe-log.XXXXXX");
        T_CHECK(mkdtemp(log_dir) != NULL);
        in_child(child_log_file, log, sizeof(log));
        check_log_file(log);
    } else {
        return -1;
    }
    return 0;
}
