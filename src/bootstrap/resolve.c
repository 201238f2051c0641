/* Rank, size and job discovery: explicit arguments first, then the
 * IPCPIPE_* settings, then the variables that launchers give their ranks. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "common/status.h"
#include "common/util.h"

/* Largest job size accepted; each rank keeps one socket per peer, so the
 * real limit is RLIMIT_NOFILE, far below this. */
#define BOOT_SIZE_MAX (1 << 20)

/* Characters allowed in a job name: it becomes a directory name, so no '/'
 * and nothing a shell or log reader could misread. */
static const char boot_job_chars[] = "abcdefghijklmnopqrstuvwxyz"
                                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789._-";

typedef struct boot_launcher {
    const char *name; /* for the log */
    const char *rank_var;
    const char *size_var;
    const char *job_var; /* first choice for the job, NULL: none */
    const char *job_alt; /* second choice, or with job_join the suffix */
    int job_join;        /* 1: job is job_var "." job_alt (Slurm step) */
    /* How many of the job's ranks run on this node (local_nodes 0), or on
     * how many nodes the job runs (1); NULL: not said. */
    const char *local_var;
    int local_nodes;
} boot_launcher_t;

/* Order matters when several are set.  mpirun and mpiexec.hydra started
 * inside a Slurm allocation pass the batch script's SLURM_PROCID (0) to
 * every rank, and srun running one torchrun per node sets SLURM_PROCID to
 * the node index, so Slurm comes last: the innermost launcher wins. */
static const boot_launcher_t boot_launchers[] = {
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", 0,
     "OMPI_COMM_WORLD_LOCAL_SIZE", 0},
    {"MPICH/Hydra", "PMI_RANK", "PMI_SIZE", "PMI_KVSNAME", NULL, 0,
     "MPI_LOCALNRANKS", 0},
    {"torchrun", "RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", NULL, 0,
     "LOCAL_WORLD_SIZE", 0},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID",
     1, "SLURM_STEP_NUM_NODES", 1},
};

/* A launcher variable set to "" counts as unset. */
static const char *boot_env(const char *name)
{
    const char *v = name ? ipcp__env_foreign(name) : NULL;
    return (v != NULL && v[0] != '\0') ? v : NULL;
}

static const boot_launcher_t *boot_detect_launcher(void)
{
    for (size_t i = 0; i < ipcp__array_size(boot_launchers); i++)
        if (boot_env(boot_launchers[i].rank_var) != NULL)
            return &boot_launchers[i];
    return NULL;
}

/* A job size taken from the launcher must be the ranks of this node:
 * peers on other nodes would never come to the rendezvous, and every rank
 * would wait the whole timeout for them.  Said at once instead. */
static ipcp_status_t boot_check_one_node(const boot_launcher_t *l, int size,
                                         const char *size_from)
{
    long v;
    if (l == NULL || l->local_var == NULL || strcmp(size_from, l->size_var))
        return IPCP_OK;
    const char *s = boot_env(l->local_var);
    if (s == NULL || ipcp__parse_int(s, 1, BOOT_SIZE_MAX, &v) != 0 ||
        (l->local_nodes ? v == 1 : v >= size))
        return IPCP_OK;
    return ipcp__fail(
        IPCP_LOG_ERROR, IPCP_SUB_BOOT, IPCP_ERR_UNSUPPORTED,
        "the job runs on several nodes (%s=%s, %s=%d, %s): ipcp_init joins "
        "the ranks of one node; start from an MPI communicator instead "
        "(ipcp_init_mpi, libipcpipe_mpi), or give each node's ranks a job "
        "of their own (IPCPIPE_RANK and IPCPIPE_SIZE of the node, e.g. "
        "torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE)",
        l->local_var, s, l->size_var, size, l->name);
}

static void boot_set_from(char *dst, const char *src)
{
    snprintf(dst, sizeof(((ipcp__boot_origin_t *)0)->rank_from), "%s", src);
}

/* One of rank (is_size 0) or size (is_size 1): the argument, else the
 * setting, else the launcher's variable, parsed strictly. */
static ipcp_status_t boot_resolve_int(int is_size, int arg, int cfg_val,
                                      const boot_launcher_t *l, int *out,
                                      char *from)
{
    const char *what = is_size ? "size" : "rank";
    const char *ours = is_size ? "IPCPIPE_SIZE" : "IPCPIPE_RANK";
    long min = is_size ? 1 : 0,
         max = is_size ? BOOT_SIZE_MAX : BOOT_SIZE_MAX - 1;
    long v;

    if (arg >= 0) {
        if (arg < min || arg > max)
            return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_INVALID,
                              "%s %d given by the caller is outside [%ld, %ld]",
                              what, arg, min, max);
        *out = arg;
        boot_set_from(from, "argument");
        return IPCP_OK;
    }
    if (cfg_val >= min) {
        *out = cfg_val;
        boot_set_from(from, ours);
        return IPCP_OK;
    }
    if (l == NULL)
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_CONFIG,
                          "cannot tell this process's %s: set %s (or start it "
                          "with mpirun, mpiexec, srun or torchrun; none of "
                          "OMPI_COMM_WORLD_RANK, PMI_RANK, RANK, SLURM_PROCID "
                          "is set)",
                          what, ours);
    const char *var = is_size ? l->size_var : l->rank_var;
    const char *s = boot_env(var);
    if (s == NULL)
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_CONFIG,
                          "%s is set (%s) but %s is not: cannot tell the job "
                          "%s; set %s",
                          l->rank_var, l->name, var, what, ours);
    if (ipcp__parse_int(s, min, max, &v) != 0)
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_CONFIG,
                          "%s='%s' is not a valid %s (an integer in [%ld, "
                          "%ld])",
                          var, s, what, min, max);
    *out = (int)v;
    boot_set_from(from, var);
    return IPCP_OK;
}

/* The launcher's name for this job, or NULL when it gives none.  torchrun's
 * TORCHELASTIC_RUN_ID is "none" unless --rdzv-id was given, a value every
 * such job shares, so it does not name the job. */
static const char *boot_launcher_job(const boot_launcher_t *l, char *buf,
                                     size_t len, char *from)
{
    const char *a = boot_env(l->job_var), *b = boot_env(l->job_alt);
    if (l->job_join) {
        if (a == NULL)
            return NULL;
        if (b == NULL) {
            boot_set_from(from, l->job_var);
            return a;
        }
        snprintf(buf, len, "%s.%s", a, b);
        snprintf(from, sizeof(((ipcp__boot_origin_t *)0)->job_from), "%s.%s",
                 l->job_var, l->job_alt);
        return buf;
    }
    if (a != NULL && strcmp(a, "none") != 0) {
        boot_set_from(from, l->job_var);
        return a;
    }
    if (b != NULL) {
        boot_set_from(from, l->job_alt);
        return b;
    }
    return NULL;
}

/* Copies a clean job name as it is.  Anything else (characters outside
 * boot_job_chars, a leading '.', which would make "." or ".." directory
 * names, or too long) becomes its legal characters, cut short, plus a hash
 * of the whole name, so every rank derives the same directory. */
static void boot_job_sanitize(const char *in, char *out)
{
    size_t n = strlen(in);
    if (n > 0 && n < IPCP_JOB_MAX && in[0] != '.' &&
        strspn(in, boot_job_chars) == n) {
        memcpy(out, in, n + 1);
        return;
    }
    uint64_t h = ipcp__fnv1a(in, n, IPCP_FNV_SEED);
    size_t k = 0;
    for (size_t i = 0; i < n && k < 32; i++)
        out[k++] = strchr(boot_job_chars, in[i]) ? in[i] : '_';
    if (k > 0 && out[0] == '.')
        out[0] = '_';
    snprintf(out + k, IPCP_JOB_MAX - k, "%s%016" PRIx64, k ? "-" : "j", h);
}

static void boot_resolve_job(const ipcp__config_t *cfg, const char *job,
                             const boot_launcher_t *l, char *out, char *from)
{
    char buf[2 * IPCP_JOB_MAX + 256];
    const char *name = NULL;

    /* An empty explicit job means "not given", like NULL. */
    if (job != NULL && job[0] != '\0') {
        name = job;
        boot_set_from(from, "argument");
    } else if (cfg != NULL && cfg->job[0] != '\0') {
        name = cfg->job;
        boot_set_from(from, "IPCPIPE_JOB");
    } else if (l != NULL) {
        name = boot_launcher_job(l, buf, sizeof(buf), from);
    }
    if (name == NULL) {
        /* Launchers start all their ranks on a node as children of one
         * process (mpirun's daemon, slurmstepd, the torchrun agent, or
         * ipcp_launch), so the parent pid is shared by exactly the ranks of
         * one job. */
        snprintf(buf, sizeof(buf), "ppid-%ld", (long)getppid());
        name = buf;
        boot_set_from(from, "parent pid");
    }
    boot_job_sanitize(name, out);
}

ipcp_status_t ipcp__boot_resolve(const ipcp__config_t *cfg, int rank, int size,
                                 const char *job, double timeout_s,
                                 ipcp__boot_params_t *out,
                                 ipcp__boot_origin_t *origin)
{
    ipcp__boot_params_t p;
    ipcp__boot_origin_t o;
    ipcp_status_t st;

    memset(&p, 0, sizeof(p));
    memset(&o, 0, sizeof(o));
    const boot_launcher_t *l = boot_detect_launcher();

    st = boot_resolve_int(0, rank, cfg ? cfg->rank : -1, l, &p.rank,
                          o.rank_from);
    if (st != IPCP_OK)
        return st;
    st = boot_resolve_int(1, size, cfg ? cfg->size : -1, l, &p.size,
                          o.size_from);
    if (st != IPCP_OK)
        return st;
    if (p.rank >= p.size)
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_CONFIG,
                          "rank %d (from %s) is not below size %d (from %s)",
                          p.rank, o.rank_from, p.size, o.size_from);
    if ((st = boot_check_one_node(l, p.size, o.size_from)) != IPCP_OK)
        return st;
    boot_resolve_job(cfg, job, l, p.job, o.job_from);

    p.timeout_s = timeout_s > 0 ? timeout_s : cfg ? cfg->timeout_s : 0;
    if (!(p.timeout_s > 0))
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_CONFIG,
                          "bootstrap timeout %g s: must be positive (set "
                          "IPCPIPE_TIMEOUT)",
                          p.timeout_s);
    if (cfg != NULL)
        snprintf(p.dir, sizeof(p.dir), "%s", cfg->dir);
    const char *node = cfg ? cfg->node : "";
    p.node_hash = ipcp__fnv1a(node, strlen(node), IPCP_FNV_SEED);
    /* Its start: the hash tells nodes apart (p is zeroed). */
    memcpy(p.node, node, strnlen(node, sizeof(p.node) - 1));

    IPCP_DEBUG(IPCP_SUB_BOOT,
               "rank %d (from %s) of %d (from %s), job '%s' (from %s)%s%s",
               p.rank, o.rank_from, p.size, o.size_from, p.job, o.job_from,
               l ? ", launcher " : "", l ? l->name : "");
    *out = p;
    if (origin != NULL)
        *origin = o;
    return IPCP_OK;
}
