/* Helpers shared by the CUDA tests: checked driver calls, options, the
 * machine check done before any rank starts, and launching two ranks one
 * of which is killed on purpose. */
#ifndef IPCP_CUDATEST_H
#define IPCP_CUDATEST_H

#include <signal.h>
#include <sys/wait.h>

#include "backend/cuda/cuda_backend.h"
#include "testutil.h"

/* A driver call that must succeed; prints the driver's error name. */
#define CU_OK(call)                                                            \
    do {                                                                       \
        CUresult cu_r_ = (call);                                               \
        if (cu_r_ != CUDA_SUCCESS) {                                           \
            char cu_b_[200];                                                   \
            T_FAIL("%s: %s", #call,                                            \
                   ipcp__cu_strerror(cu_r_, cu_b_, sizeof cu_b_));             \
        }                                                                      \
    } while (0)

/* Loads the driver and makes device's primary context current on this
 * thread (the test's own driver calls need one); returns it retained. */
static inline CUcontext ct_use_device(int device)
{
    CUdevice dev;
    CUcontext ctx;
    T_OK(ipcp__cu_load());
    CU_OK(IPCP_CU(cuInit)(0));
    CU_OK(IPCP_CU(cuDeviceGet)(&dev, device));
    CU_OK(IPCP_CU(cuDevicePrimaryCtxRetain)(&ctx, dev));
    CU_OK(IPCP_CU(cuCtxSetCurrent)(ctx));
    return ctx;
}

/* The value after `key` on the command line, or dflt. */
static inline const char *ct_opt(int argc, char **argv, const char *key,
                                 const char *dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], key) == 0)
            return argv[i + 1];
    return dflt;
}

/* In the launching process, so that both ranks agree (a rank that exits
 * 77 alone would be taken for a failure): 77 when the CUDA backend cannot
 * open here or fewer than min_devices are visible, else 0. */
static inline int ct_check_machine(int min_devices)
{
    ipcp__backend_t *be = NULL;
    ipcp_status_t st = ipcp__cuda_backend_ops.open(NULL, &be);
    if (st == IPCP_ERR_UNSUPPORTED) {
        printf("SKIP: CUDA backend unavailable: %s\n", ipcp_last_error());
        return T_SKIP;
    }
    T_OK(st);
    int ndev = be->ndev;
    ipcp__cuda_backend_ops.close(be);
    if (ndev < min_devices) {
        printf("SKIP: needs %d CUDA devices, %d visible\n", min_devices,
               ndev);
        return T_SKIP;
    }
    return 0;
}

/* The path a transfer of size bytes the receiver sends direct reports:
 * striped when IPCPIPE_STRIPE is a fixed share that leaves bytes for both
 * parts and the ranks use two GPUs (the stripe variants of the tests). */
static inline ipcp_path_t ct_direct_path(size_t size, int two_gpus)
{
    const char *s = getenv("IPCPIPE_STRIPE");
    double share = s ? atof(s) : 0;
    size_t staged = (size_t)((double)size * share);
    return two_gpus && share > 0 && staged > 0 && staged < size
               ? IPCP_PATH_STRIPED
               : IPCP_PATH_DIRECT;
}

/* Starts two ranks of this program with IPCPIPE_TIMEOUT=10 (child_env, if
 * not NULL, adjusts each rank's environment, given arg).  victim < 0:
 * returns their folded exit code.  Else that rank must die by SIGKILL and
 * the other exit 0. */
static inline int ct_launch(char **argv, int victim,
                            void (*child_env)(int rank, void *arg), void *arg)
{
    ipcp_launch_opts_t o;
    ipcp_launch_result_t res;
    char *env[] = {"IPCPIPE_TIMEOUT=10", NULL};
    memset(&o, 0, sizeof o);
    o.nranks = 2;
    o.timeout_s = 240;
    o.argv_self = argv;
    o.extra_env = env;
    o.keep_going = victim >= 0;
    o.child_env = child_env;
    o.child_env_arg = arg;
    if (ipcp_launch(&o, &res) != 0)
        T_FAIL("launch failed");
    if (victim < 0)
        return ipcp_launch_exit_code(&res);
    int vs = res.wait_status[victim], ss = res.wait_status[1 - victim];
    if (!WIFSIGNALED(vs) || WTERMSIG(vs) != SIGKILL)
        T_FAIL("rank %d should have died by SIGKILL (wait status 0x%x)", victim,
               vs);
    if (!WIFEXITED(ss) || WEXITSTATUS(ss) != 0)
        T_FAIL("surviving rank %d failed (wait status 0x%x)", 1 - victim, ss);
    return 0;
}

#endif
