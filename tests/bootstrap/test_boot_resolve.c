/* ipcp__boot_resolve: rank, size and job from arguments, settings and each
 * launcher's variables.  ipcp__env_foreign reads the real environment, so
 * every case sets the variables it needs in this process first. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "bootstrap/bootstrap.h"
#include "common/config.h"

static const char *const launcher_vars[] = {
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid",
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_KVSNAME",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "RANK",
    "WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALNRANKS",
    "LOCAL_WORLD_SIZE",
    "SLURM_STEP_NUM_NODES",
};

/* ctest may itself run under a launcher: start from a clean slate. */
static void clear_env(void)
{
    for (size_t i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]);
         i++)
        unsetenv(launcher_vars[i]);
}

static void set(const char *name, const char *value)
{
    if (setenv(name, value, 1) != 0)
        T_FAIL("setenv %s", name);
}

/* Settings as if no IPCPIPE_* variable were set. */
static ipcp__config_t cfg_unset(void)
{
    ipcp__config_t c;
    memset(&c, 0, sizeof(c));
    c.rank = -1;
    c.size = -1;
    c.timeout_s = 5.0;
    return c;
}

static void resolve_ok(const ipcp__config_t *c, int rank, int size,
                       const char *job, ipcp__boot_params_t *p,
                       ipcp__boot_origin_t *o)
{
    T_OK(ipcp__boot_resolve(c, rank, size, job, 0, p, o));
}

static void check_job_chars(const char *job)
{
    size_t n = strlen(job);
    T_CHECK(n > 0 && n < IPCP_JOB_MAX);
    T_CHECK(job[0] != '.');
    T_EQ_INT(strspn(job, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "0123456789._-"),
             n);
}

static void expect_ppid_job(const ipcp__boot_params_t *p,
                            const ipcp__boot_origin_t *o)
{
    char want[64];
    snprintf(want, sizeof(want), "ppid-%ld", (long)getppid());
    T_EQ_STR(p->job, want);
    T_EQ_STR(o->job_from, "parent pid");
}

static void case_explicit(void)
{
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    ipcp__boot_origin_t o;
    /* Garbage in the launcher's variables is never read when the caller
     * gives everything. */
    set("OMPI_COMM_WORLD_RANK", "x");
    set("OMPI_COMM_WORLD_SIZE", "y");
    c.rank = 7;
    c.size = 9;
    strcpy(c.job, "fromcfg");
    T_OK(ipcp__boot_resolve(&c, 2, 4, "myjob", 3.5, &p, &o));
    T_EQ_INT(p.rank, 2);
    T_EQ_INT(p.size, 4);
    T_EQ_STR(p.job, "myjob");
    T_CHECK(p.timeout_s == 3.5);
    T_EQ_STR(o.rank_from, "argument");
    T_EQ_STR(o.size_from, "argument");
    T_EQ_STR(o.job_from, "argument");
    /* origin may be NULL, and cfg too when everything is given. */
    T_OK(ipcp__boot_resolve(NULL, 0, 1, "j", 1.0, &p, NULL));
    T_EQ_INT(p.size, 1);
}

static void case_settings(void)
{
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    ipcp__boot_origin_t o;
    set("SLURM_PROCID", "5");
    set("SLURM_NTASKS", "8");
    set("SLURM_JOB_ID", "99");
    c.rank = 1;
    c.size = 3;
    c.timeout_s = 7.0;
    strcpy(c.job, "cfgjob");
    strcpy(c.dir, "/some/where");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_INT(p.rank, 1);
    T_EQ_INT(p.size, 3);
    T_EQ_STR(p.job, "cfgjob");
    T_CHECK(p.timeout_s == 7.0);
    T_EQ_STR(p.dir, "/some/where");
    T_EQ_STR(o.rank_from, "IPCPIPE_RANK");
    T_EQ_STR(o.size_from, "IPCPIPE_SIZE");
    T_EQ_STR(o.job_from, "IPCPIPE_JOB");
    /* A rank from the settings, the size from the launcher. */
    c.size = -1;
    c.job[0] = '\0';
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_INT(p.size, 8);
    T_EQ_STR(o.size_from, "SLURM_NTASKS");
    T_EQ_STR(p.job, "99");
}

static void case_ompi(void)
{
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p, p2;
    ipcp__boot_origin_t o;
    set("OMPI_COMM_WORLD_RANK", "3");
    set("OMPI_COMM_WORLD_SIZE", "4");
    set("OMPI_MCA_ess_base_jobid", "4242");
    set("PMIX_NAMESPACE", "prterun-node1-1234@1");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_INT(p.rank, 3);
    T_EQ_INT(p.size, 4);
    T_EQ_STR(o.rank_from, "OMPI_COMM_WORLD_RANK");
    T_EQ_STR(o.size_from, "OMPI_COMM_WORLD_SIZE");
    T_EQ_STR(o.job_from, "PMIX_NAMESPACE");
    /* '@' is not allowed in a directory name we make: readable prefix plus
     * a hash, the same in every rank. */
    check_job_chars(p.job);
    T_CHECK(strncmp(p.job, "prterun-node1-1234_1-", 21) == 0);
    resolve_ok(&c, -1, -1, NULL, &p2, NULL);
    T_EQ_STR(p.job, p2.job);
    set("PMIX_NAMESPACE", "prterun-node1-1234@2");
    resolve_ok(&c, -1, -1, NULL, &p2, NULL);
    T_CHECK(strcmp(p.job, p2.job) != 0);
    /* Without PMIx (Open MPI before 5), the ess job id. */
    unsetenv("PMIX_NAMESPACE");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_STR(p.job, "4242");
    T_EQ_STR(o.job_from, "OMPI_MCA_ess_base_jobid");
    unsetenv("OMPI_MCA_ess_base_jobid");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    expect_ppid_job(&p, &o);
}

static void case_mpich(void)
{
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    ipcp__boot_origin_t o;
    set("PMI_RANK", "0");
    set("PMI_SIZE", "2");
    set("PMI_KVSNAME", "kvs_5555_0");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_INT(p.rank, 0);
    T_EQ_INT(p.size, 2);
    T_EQ_STR(p.job, "kvs_5555_0");
    T_EQ_STR(o.rank_from, "PMI_RANK");
    T_EQ_STR(o.size_from, "PMI_SIZE");
    T_EQ_STR(o.job_from, "PMI_KVSNAME");
    /* Hydra without a KVS name: the ranks share mpiexec's proxy as
     * parent. */
    unsetenv("PMI_KVSNAME");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    expect_ppid_job(&p, &o);
}

static void case_slurm(void)
{
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    ipcp__boot_origin_t o;
    set("SLURM_PROCID", "5");
    set("SLURM_NTASKS", "8");
    set("SLURM_JOB_ID", "777");
    set("SLURM_STEP_ID", "2");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_INT(p.rank, 5);
    T_EQ_INT(p.size, 8);
    T_EQ_STR(p.job, "777.2");
    T_EQ_STR(o.rank_from, "SLURM_PROCID");
    T_EQ_STR(o.size_from, "SLURM_NTASKS");
    T_EQ_STR(o.job_from, "SLURM_JOB_ID.SLURM_STEP_ID");
    unsetenv("SLURM_STEP_ID");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_STR(p.job, "777");
    T_EQ_STR(o.job_from, "SLURM_JOB_ID");
    unsetenv("SLURM_JOB_ID");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    expect_ppid_job(&p, &o);
}

static void case_torchrun(void)
{
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    ipcp__boot_origin_t o;
    set("RANK", "1");
    set("WORLD_SIZE", "2");
    set("TORCHELASTIC_RUN_ID", "run-abc");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_INT(p.rank, 1);
    T_EQ_INT(p.size, 2);
    T_EQ_STR(p.job, "run-abc");
    T_EQ_STR(o.rank_from, "RANK");
    T_EQ_STR(o.size_from, "WORLD_SIZE");
    T_EQ_STR(o.job_from, "TORCHELASTIC_RUN_ID");
    /* "none" is torchrun's default run id, shared by unrelated jobs. */
    set("TORCHELASTIC_RUN_ID", "none");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    expect_ppid_job(&p, &o);
}

/* Nested launchers: the innermost one names the rank. */
static void case_precedence(void)
{
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    ipcp__boot_origin_t o;
    set("SLURM_PROCID", "0");
    set("SLURM_NTASKS", "1");
    set("SLURM_JOB_ID", "1");
    set("RANK", "3");
    set("WORLD_SIZE", "4");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_STR(o.rank_from, "RANK");
    T_EQ_INT(p.rank, 3);
    set("PMI_RANK", "2");
    set("PMI_SIZE", "6");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_STR(o.rank_from, "PMI_RANK");
    T_EQ_INT(p.size, 6);
    set("OMPI_COMM_WORLD_RANK", "1");
    set("OMPI_COMM_WORLD_SIZE", "2");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_STR(o.rank_from, "OMPI_COMM_WORLD_RANK");
    T_EQ_INT(p.rank, 1);
    /* An empty variable counts as unset. */
    set("OMPI_COMM_WORLD_RANK", "");
    resolve_ok(&c, -1, -1, NULL, &p, &o);
    T_EQ_STR(o.rank_from, "PMI_RANK");
}

static void case_no_launcher(void)
{
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    T_STATUS(ipcp__boot_resolve(&c, -1, -1, NULL, 0, &p, NULL),
             IPCP_ERR_CONFIG);
    T_MSG_HAS("IPCPIPE_RANK");
    T_STATUS(ipcp__boot_resolve(&c, 0, -1, NULL, 0, &p, NULL), IPCP_ERR_CONFIG);
    T_MSG_HAS("IPCPIPE_SIZE");
    /* The job alone falls back to the parent pid. */
    ipcp__boot_origin_t o;
    resolve_ok(&c, 0, 2, NULL, &p, &o);
    expect_ppid_job(&p, &o);
}

static void case_bad_int(void)
{
    static const struct {
        const char *var, *other, *other_val, *value;
    } bad[] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "4", "1x"},
        {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "0", "0"},
        {"PMI_RANK", "PMI_SIZE", "4", "-1"},
        {"PMI_SIZE", "PMI_RANK", "0", "4 "},
        {"SLURM_NTASKS", "SLURM_PROCID", "0", "eight"},
        {"SLURM_PROCID", "SLURM_NTASKS", "4", " 1"},
        {"WORLD_SIZE", "RANK", "0", "99999999999999999999"},
        {"RANK", "WORLD_SIZE", "4", "0x1"},
    };
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[128];
        clear_env();
        set(bad[i].var, bad[i].value);
        set(bad[i].other, bad[i].other_val);
        T_STATUS(ipcp__boot_resolve(&c, -1, -1, NULL, 0, &p, NULL),
                 IPCP_ERR_CONFIG);
        snprintf(want, sizeof(want), "%s='%s'", bad[i].var, bad[i].value);
        T_MSG_HAS(want);
    }
}

static void case_missing_size(void)
{
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    set("PMI_RANK", "0");
    T_STATUS(ipcp__boot_resolve(&c, -1, -1, NULL, 0, &p, NULL),
             IPCP_ERR_CONFIG);
    T_MSG_HAS("PMI_SIZE");
    T_MSG_HAS("PMI_RANK");
}

static void case_rank_range(void)
{
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    set("RANK", "2");
    set("WORLD_SIZE", "2");
    T_STATUS(ipcp__boot_resolve(&c, -1, -1, NULL, 0, &p, NULL),
             IPCP_ERR_CONFIG);
    T_MSG_HAS("rank 2 (from RANK)");
    T_MSG_HAS("size 2 (from WORLD_SIZE)");
    /* Explicit arguments out of range. */
    T_STATUS(ipcp__boot_resolve(&c, 0, 0, "j", 0, &p, NULL), IPCP_ERR_INVALID);
    T_MSG_HAS("size 0");
    T_STATUS(ipcp__boot_resolve(&c, 3, 3, "j", 0, &p, NULL), IPCP_ERR_CONFIG);
    T_MSG_HAS("rank 3 (from argument)");
}

static void case_sanitize(void)
{
    static const char *const dirty[] = {
        "a/b",
        "a b",
        ".",
        "..",
        ".hidden",
        "x\xc3\xa9",
        "a_b/",
        "012345678901234567890123456789012345678901234567890123456789012345678"
        "9",
    };
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p, q;
    resolve_ok(&c, 0, 1, "Ok-job_1.2", &p, NULL);
    T_EQ_STR(p.job, "Ok-job_1.2");
    for (size_t i = 0; i < sizeof(dirty) / sizeof(dirty[0]); i++) {
        resolve_ok(&c, 0, 1, dirty[i], &p, NULL);
        check_job_chars(p.job);
        T_CHECK(strcmp(p.job, dirty[i]) != 0);
        /* Different names stay different. */
        for (size_t k = 0; k < i; k++) {
            resolve_ok(&c, 0, 1, dirty[k], &q, NULL);
            if (strcmp(p.job, q.job) == 0)
                T_FAIL("'%s' and '%s' both became '%s'", dirty[i], dirty[k],
                       p.job);
        }
    }
    /* "a_b" is clean and kept; "a/b" must not become the same name. */
    resolve_ok(&c, 0, 1, "a_b", &q, NULL);
    resolve_ok(&c, 0, 1, "a/b", &p, NULL);
    T_CHECK(strcmp(p.job, q.job) != 0);
    /* An empty job means "not given". */
    ipcp__boot_origin_t o;
    resolve_ok(&c, 0, 1, "", &p, &o);
    expect_ppid_job(&p, &o);
}

static void case_timeout(void)
{
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    resolve_ok(&c, 0, 1, "j", &p, NULL);
    T_CHECK(p.timeout_s == 5.0);
    c.timeout_s = 0;
    T_STATUS(ipcp__boot_resolve(&c, 0, 1, "j", 0, &p, NULL), IPCP_ERR_CONFIG);
    T_MSG_HAS("IPCPIPE_TIMEOUT");
    T_OK(ipcp__boot_resolve(&c, 0, 1, "j", 0.25, &p, NULL));
    T_CHECK(p.timeout_s == 0.25);
}

/* A job the launcher spreads over several nodes is refused at once with
 * the reason, not waited for; one node's ranks, or a size set by the
 * user, pass. */
static void case_nodes(void)
{
    static const struct {
        const char *rank, *size, *local, *local_v;
    } l[] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
         "OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
        {"PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS", "2"},
        {"RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "2"},
        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NUM_NODES", "2"},
    };
    ipcp__config_t c = cfg_unset();
    ipcp__boot_params_t p;
    ipcp__boot_origin_t o;
    for (size_t i = 0; i < sizeof(l) / sizeof(l[0]); i++) {
        clear_env();
        set(l[i].rank, "1");
        set(l[i].size, "4");
        set(l[i].local, l[i].local_v);
        T_STATUS(ipcp__boot_resolve(&c, -1, -1, NULL, 0, &p, &o),
                 IPCP_ERR_UNSUPPORTED);
        T_MSG_HAS("runs on several nodes");
        T_MSG_HAS(l[i].local);
        T_MSG_HAS("ipcp_init_mpi"); /* the way that serves such a job */
        /* The user's size is the user's word. */
        c.size = 2;
        resolve_ok(&c, -1, -1, NULL, &p, &o);
        T_EQ_INT(p.size, 2);
        c.size = -1;
        set(l[i].local, i == 3 ? "1" : "4");
        resolve_ok(&c, -1, -1, NULL, &p, &o);
        T_EQ_INT(p.size, 4);
    }
    clear_env();
}

static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"resolve_explicit", case_explicit},
    {"resolve_settings", case_settings},
    {"resolve_ompi", case_ompi},
    {"resolve_mpich", case_mpich},
    {"resolve_slurm", case_slurm},
    {"resolve_torchrun", case_torchrun},
    {"resolve_precedence", case_precedence},
    {"resolve_no_launcher", case_no_launcher},
    {"resolve_bad_int", case_bad_int},
    {"resolve_missing_size", case_missing_size},
    {"resolve_rank_range", case_rank_range},
    {"resolve_sanitize", case_sanitize},
    {"resolve_timeout", case_timeout},
    {"resolve_nodes", case_nodes},
};

int main(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    clear_env();
    cases[i].fn();
    return 0;
}
