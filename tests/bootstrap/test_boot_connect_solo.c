/* The one-process cases of test_boot_connect: ipcp__boot_connect refusing
 * what it must refuse (bad parameters, unsafe directories, a taken socket,
 * too few descriptors) and timing out on ranks that never come.  Each
 * plays every part itself; the helpers are test_boot_connect.c's. */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "bootstrap/bootstrap.h"
#include "common/time.h"
#include "test_boot_connect_int.h"

int solo_size1(void)
{
    char base[512], dir[600];
    ipcp__boot_params_t p;
    ipcp__boot_t *boot;
    make_base(base, sizeof(base), NULL);
    solo_params(&p, 0, 1, base, 1.0);
    T_OK(ipcp__boot_connect(&p, &boot));
    T_EQ_INT(boot->size, 1);
    T_EQ_INT(boot->peers[0].fd, -1);
    T_OK(ipcp__boot_barrier(boot));
    ipcp__boot_destroy(boot);
    user_dir(dir, sizeof(dir), base);
    T_CHECK(!exists(dir));
    rm_tree(base);
    return 0;
}

static void expect_timeout(const char *base, int rank, int size,
                           const char *missing)
{
    ipcp__boot_params_t p;
    ipcp__boot_t *boot = NULL;
    char want[128], dir[600];
    solo_params(&p, rank, size, base, 1.0);
    double t0 = ipcp__now_s();
    T_STATUS(ipcp__boot_connect(&p, &boot), IPCP_ERR_TIMEOUT);
    double dt = ipcp__now_s() - t0;
    if (dt < 0.9 || dt > 3.0)
        T_FAIL("a 1 s rendezvous timeout took %.3f s", dt);
    T_CHECK(boot == NULL);
    t_fmt(want, sizeof(want), "%s of %d never joined job '%s' within 1.0 s",
          missing, size, p.job);
    T_MSG_HAS(want);
    job_dir(dir, sizeof(dir), base, p.job);
    T_MSG_HAS(dir);
    /* Nothing is left behind by a failed rendezvous either. */
    T_CHECK(!exists(dir));
}

int solo_missing_rank(void)
{
    char base[512];
    make_base(base, sizeof(base), NULL);
    expect_timeout(base, 0, 2, "rank 1");
    expect_timeout(base, 1, 2, "rank 0");
    expect_timeout(base, 1, 4, "ranks 0, 2, 3");
    rm_tree(base);
    return 0;
}

/* In a child whose descriptor limit is 16 (soft and hard): a job of 2
 * ranks, and one of 2^20, are refused at once, naming the limit. */
int solo_fd_limit(void)
{
    pid_t pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {16, 16};
        ipcp__boot_params_t p;
        ipcp__boot_t *boot = NULL;
        T_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
        static const int sizes[] = {2, 1 << 20};
        for (int i = 0; i < 2; i++) {
            solo_params(&p, 0, sizes[i], "/tmp", 1.0);
            double t0 = ipcp__now_s();
            T_STATUS(ipcp__boot_connect(&p, &boot), IPCP_ERR_SYSTEM);
            T_MSG_HAS("RLIMIT_NOFILE allows 16");
            T_CHECK(ipcp__now_s() - t0 < 0.5);
        }
        T_CHECK(boot == NULL);
        _exit(0);
    }
    int st;
    T_CHECK(waitpid(pid, &st, 0) == pid);
    T_CHECK(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* The error for a directory we must not use names its path, owner and
 * mode. */
static void expect_refused(const char *base, const char *path, const char *what)
{
    ipcp__boot_params_t p;
    ipcp__boot_t *boot = NULL;
    solo_params(&p, 0, 2, base, 5.0);
    double t0 = ipcp__now_s();
    T_STATUS(ipcp__boot_connect(&p, &boot), IPCP_ERR_PERMISSION);
    T_CHECK(ipcp__now_s() - t0 < 1.0);
    T_MSG_HAS(path);
    T_MSG_HAS(what);
}

int solo_foreign_owner(void)
{
    char base[512], udir[600], jdir[600];
    ipcp__boot_params_t p;
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: chown to another user needs root\n");
        return T_SKIP;
    }
    make_base(base, sizeof(base), NULL);
    solo_params(&p, 0, 2, base, 5.0);
    user_dir(udir, sizeof(udir), base);
    job_dir(jdir, sizeof(jdir), base, p.job);
    mkdir_mode(udir, 0700);
    T_CHECK(chown(udir, 65534, 65534) == 0);
    expect_refused(base, udir, "belongs to uid 65534 (mode 0700)");
    /* The user level ours, the job level someone else's. */
    T_CHECK(chown(udir, getuid(), getgid()) == 0);
    mkdir_mode(jdir, 0700);
    T_CHECK(chown(jdir, 65534, 65534) == 0);
    expect_refused(base, jdir, "belongs to uid 65534");
    rm_tree(base);
    return 0;
}

int solo_bad_mode(void)
{
    char base[512], udir[600], jdir[600], want[64];
    ipcp__boot_params_t p;
    make_base(base, sizeof(base), NULL);
    solo_params(&p, 0, 2, base, 5.0);
    user_dir(udir, sizeof(udir), base);
    job_dir(jdir, sizeof(jdir), base, p.job);
    mkdir_mode(udir, 0755);
    t_fmt(want, sizeof(want), "(owner uid %u) has mode 0755",
          (unsigned)getuid());
    expect_refused(base, udir, want);
    mkdir_mode(udir, 0700);
    mkdir_mode(jdir, 0750);
    expect_refused(base, jdir, "mode 0750");
    /* A symbolic link in place of a level is not followed. */
    rmdir(jdir);
    char target[600];
    t_fmt(target, sizeof(target), "%s/elsewhere", base);
    mkdir_mode(target, 0700);
    T_CHECK(symlink(target, jdir) == 0);
    expect_refused(base, jdir, "symbolic link");
    rm_tree(base);
    return 0;
}

/* Our socket's name is taken by a live process, or by something that is
 * not a socket: both are reported, neither is removed. */
int solo_sock_taken(void)
{
    char base[512], jdir[600], path[700];
    ipcp__boot_params_t p;
    ipcp__boot_t *boot = NULL;
    make_base(base, sizeof(base), NULL);
    solo_params(&p, 0, 2, base, 5.0);
    user_dir(jdir, sizeof(jdir), base);
    mkdir_mode(jdir, 0700);
    job_dir(jdir, sizeof(jdir), base, p.job);
    mkdir_mode(jdir, 0700);
    t_fmt(path, sizeof(path), "%s/r0.sock", jdir);
    int lfd = raw_listen(path);
    T_STATUS(ipcp__boot_connect(&p, &boot), IPCP_ERR_BOOTSTRAP);
    T_MSG_HAS("already rank 0");
    T_CHECK(exists(path));
    close(lfd);
    unlink(path);
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    T_CHECK(fd >= 0);
    close(fd);
    T_STATUS(ipcp__boot_connect(&p, &boot), IPCP_ERR_BOOTSTRAP);
    T_MSG_HAS("is not a socket");
    T_CHECK(exists(path));
    rm_tree(base);
    return 0;
}

int solo_bad_params(void)
{
    ipcp__boot_params_t p;
    ipcp__boot_t *boot = NULL;
    static const char *const jobs[] = {"", ".", "..", "a/b", "a b"};
    solo_params(&p, 0, 0, "/tmp", 1.0);
    T_STATUS(ipcp__boot_connect(&p, &boot), IPCP_ERR_INVALID);
    solo_params(&p, 2, 2, "/tmp", 1.0);
    T_STATUS(ipcp__boot_connect(&p, &boot), IPCP_ERR_INVALID);
    T_MSG_HAS("rank 2, size 2");
    solo_params(&p, 0, 2, "/tmp", 0);
    T_STATUS(ipcp__boot_connect(&p, &boot), IPCP_ERR_INVALID);
    for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++) {
        solo_params(&p, 0, 2, "/tmp", 1.0);
        t_fmt(p.job, sizeof(p.job), "%s", jobs[i]);
        T_STATUS(ipcp__boot_connect(&p, &boot), IPCP_ERR_INVALID);
        T_MSG_HAS("job name");
    }
    T_CHECK(boot == NULL);
    return 0;
}
