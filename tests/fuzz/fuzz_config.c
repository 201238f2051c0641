/* Fuzzes the settings strings: the parsers of the one table in
 * common/config.c (ipcp__config_parse with every variable, and the size,
 * integer and number parsers on their own), and the launcher variables
 * the bootstrap resolves rank, size and job from (ipcp__boot_resolve).
 * Input: lines NAME=VALUE; a NAME the table knows is a setting, one of the
 * launchers' names goes into the environment for the resolve. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "common/config.h"
#include "common/util.h"
#include "fuzz_common.h"

#define FUZZ_MAX_LINES 64

static const char *const fuzz_launcher_vars[] = {
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
};

typedef struct fuzz_env {
    int n;
    char *name[FUZZ_MAX_LINES];
    char *val[FUZZ_MAX_LINES];
} fuzz_env_t;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet();
    for (size_t i = 0; i < ipcp__array_size(fuzz_launcher_vars); i++)
        unsetenv(fuzz_launcher_vars[i]);
    unsetenv("IPCPIPE_RANK");
    unsetenv("IPCPIPE_SIZE");
    unsetenv("IPCPIPE_JOB");
    return 0;
}

/* The last value given for name, as getenv would see it. */
static const char *fuzz_get(const char *name, void *arg)
{
    const fuzz_env_t *env = arg;
    for (int i = env->n - 1; i >= 0; i--)
        if (strcmp(env->name[i], name) == 0)
            return env->val[i];
    return NULL;
}

static void fuzz_parsers(const char *v)
{
    size_t z;
    long l;
    double d;
    if (ipcp__parse_int(v, -100, 1 << 20, &l) == 0 && (l < -100 || l > 1 << 20))
        abort();
    if (ipcp__parse_double(v, 0.001, 1e7, &d) == 0 && !(d >= 0.001 && d <= 1e7))
        abort();
    (void)ipcp__parse_size(v, &z);
}

static void fuzz_resolve(const fuzz_env_t *env, const ipcp__config_t *cfg)
{
    ipcp__boot_params_t bp;
    ipcp__boot_origin_t origin;
    size_t nvars = ipcp__array_size(fuzz_launcher_vars);
    for (size_t i = 0; i < nvars; i++) {
        const char *v = fuzz_get(fuzz_launcher_vars[i], (void *)env);
        if (v)
            setenv(fuzz_launcher_vars[i], v, 1);
    }
    if (ipcp__boot_resolve(cfg, -1, -1, NULL, 0, &bp, &origin) == IPCP_OK &&
        (bp.rank < 0 || bp.rank >= bp.size || !bp.job[0] ||
         !(bp.timeout_s > 0) || !memchr(bp.job, '\0', sizeof(bp.job)))) {
        fprintf(stderr, "fuzz_config: resolved rank %d size %d\n", bp.rank,
                bp.size);
        abort();
    }
    for (size_t i = 0; i < nvars; i++)
        unsetenv(fuzz_launcher_vars[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_env_t env;
    ipcp__config_t cfg;
    char err[512];
    if (size > 8192)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    env.n = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save);
         line && env.n < FUZZ_MAX_LINES; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        env.name[env.n] = line;
        env.val[env.n++] = eq + 1;
        fuzz_parsers(eq + 1);
    }
    err[0] = '\0';
    if (ipcp__config_parse(&cfg, fuzz_get, &env, err, sizeof(err)) == IPCP_OK)
        fuzz_resolve(&env, &cfg);
    else if (!err[0] || !memchr(err, '\0', sizeof(err)))
        abort(); /* a refusal names the variable */
    free(text);
    return 0;
}
