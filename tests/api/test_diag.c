/* ipcpipe_diag.h: sizes as the settings take them, every bad one refused
 * with a reason; the striping calibration as the settings and a file
 * written here say (measured, missing, stale, corrupt, off, fixed); the
 * GPUs and the driver's entry points where a driver is (this process can
 * open libcuda.so.1), and on a machine without one a refusal that says
 * why, not a crash or an empty success. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/stripe.h"
#include "ipcpipe_diag.h"
#ifdef IPCP_HAVE_CUDA
#include "backend/cuda/cuda_driver.h"
#endif
#include "testutil.h"

#define UUID_A "GPU-00000000-0000-0000-0000-00000000000a"
#define UUID_B "GPU-00000000-0000-0000-0000-00000000000b"

static void check_sizes(void)
{
    static const struct {
        const char *text;
        size_t value;
    } good[] = {{"0", 0},
                {"4096", 4096},
                {"64K", 64u << 10},
                {"1M", 1u << 20},
                {"2G", (size_t)2 << 30}};
    static const char *const bad[] = {"", "K", "12Q", "-1", "1.5M", "0x10"};
    size_t v;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        T_OK(ipcp_diag_parse_size(good[i].text, &v));
        T_CHECK(v == good[i].value);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        T_EQ_INT(ipcp_diag_parse_size(bad[i], &v), IPCP_ERR_INVALID);
        T_CHECK(strstr(ipcp_last_error(), "is no size") != NULL);
    }
    T_EQ_INT(ipcp_diag_parse_size(NULL, &v), IPCP_ERR_INVALID);
    T_EQ_INT(ipcp_diag_parse_size("1K", NULL), IPCP_ERR_INVALID);
}

/* In a child, before the settings are read: IPCPIPE_STRIPE=value gives
 * state, with fixed the share it should report. */
static void check_stripe_setting(const char *value, int state, double fixed)
{
    pid_t pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        ipcp_diag_stripe_t e;
        setenv("IPCPIPE_STRIPE", value, 1);
        T_OK(ipcp_diag_stripe_lookup(UUID_A, UUID_B, 13000, &e));
        T_EQ_INT((int)e.state, state);
        T_CHECK(e.fixed_share > fixed - 1e-9 && e.fixed_share < fixed + 1e-9);
        _exit(0);
    }
    int st;
    T_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
            WEXITSTATUS(st) == 0);
}

/* The calibration file in a directory of this test's own; the settings
 * are read once per process, so IPCPIPE_STRIPE_CACHE is set first. */
static void check_stripe_file(void)
{
    char dir[] = "/tmp/ipcp-diag-XXXXXX", file[128], host[128], why[256];
    ipcp_diag_stripe_t e;
    T_CHECK(mkdtemp(dir) != NULL);
    snprintf(file, sizeof(file), "%s/stripe.txt", dir);
    setenv("IPCPIPE_STRIPE_CACHE", file, 1);

    T_OK(ipcp_diag_stripe_lookup(NULL, NULL, 0, &e));
    T_EQ_INT((int)e.state, IPCP_DIAG_STRIPE_UNMEASURED);
    T_CHECK(strcmp(e.file, file) == 0 && e.driven == 1 && e.adapt == 1);
    T_OK(ipcp_diag_stripe_lookup(UUID_A, UUID_B, 13000, &e));
    T_EQ_INT((int)e.state, IPCP_DIAG_STRIPE_UNMEASURED); /* no file yet */
    T_CHECK(e.why[0] != '\0');

    ipcp__stripe_entry_t w;
    memset(&w, 0, sizeof(w));
    snprintf(w.src, sizeof(w.src), "%s", UUID_A);
    snprintf(w.dst, sizeof(w.dst), "%s", UUID_B);
    w.layout = IPCP_STRIPE_DRIVEN;
    w.driver = 13000;
    w.share = 0.09;
    w.size = (uint64_t)256 << 20;
    w.share_large = 0.11;
    w.size_large = (uint64_t)1 << 30;
    w.share_bidir = 0.06;
    w.min_size = (uint64_t)64 << 20;
    w.direct_gbs = 396.5;
    w.staged_gbs = 54.25;
    w.striped_gbs = 431.0;
    w.time = 1796000000;
    ipcp__stripe_host_id(host, sizeof(host));
    T_EQ_INT(ipcp__stripe_cache_store(file, host, &w, why, sizeof(why)), 0);

    T_OK(ipcp_diag_stripe_lookup(UUID_A, UUID_B, 13000, &e));
    T_EQ_INT((int)e.state, IPCP_DIAG_STRIPE_MEASURED);
    T_CHECK(e.share > 0.0899 && e.share < 0.0901 && e.share_large > 0.1099 &&
            e.share_large < 0.1101 && e.share_bidir > 0.0599 &&
            e.share_bidir < 0.0601);
    T_CHECK(e.size == w.size && e.size_large == w.size_large &&
            e.min_size == w.min_size && e.from_size == w.min_size &&
            e.measured == w.time);
    T_CHECK(e.direct_gbs > 396.4 && e.direct_gbs < 396.6 &&
            e.striped_gbs > 430.9 && e.striped_gbs < 431.1);
    /* The other direction is another pair; another driver is stale. */
    T_OK(ipcp_diag_stripe_lookup(UUID_B, UUID_A, 13000, &e));
    T_EQ_INT((int)e.state, IPCP_DIAG_STRIPE_UNMEASURED);
    T_OK(ipcp_diag_stripe_lookup(UUID_A, UUID_B, 12080, &e));
    T_EQ_INT((int)e.state, IPCP_DIAG_STRIPE_IGNORED);
    T_CHECK(e.why[0] != '\0');
    /* A file that does not parse is ignored, saying why. */
    FILE *f = fopen(file, "w");
    T_CHECK(f != NULL);
    fputs("not a calibration file\n", f);
    fclose(f);
    T_OK(ipcp_diag_stripe_lookup(UUID_A, UUID_B, 13000, &e));
    T_EQ_INT((int)e.state, IPCP_DIAG_STRIPE_IGNORED);
    T_CHECK(e.why[0] != '\0');
    T_EQ_INT(ipcp_diag_stripe_lookup(UUID_A, UUID_B, 13000, NULL),
             IPCP_ERR_INVALID);
    unlink(file);
    rmdir(dir);
}

/* Leaves a last error that no call below writes: a check that a failure
 * said why then sees the failure's own message. */
static void mark_error(void)
{
    size_t v;
    T_EQ_INT(ipcp_diag_parse_size("marker", &v), IPCP_ERR_INVALID);
    T_CHECK(strstr(ipcp_last_error(), "marker") != NULL);
}

static int said_new(void)
{
    return ipcp_last_error()[0] != '\0' &&
           strstr(ipcp_last_error(), "marker") == NULL;
}

/* Through the two-sided ring (IPCPIPE_DRIVE=off) transfers stripe from
 * twice the size that gained: a child, before the settings are read. */
static void check_ring_layout(void)
{
    pid_t pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        char dir[] = "/tmp/ipcp-diag-XXXXXX", file[128], host[128], why[256];
        ipcp_diag_stripe_t e;
        ipcp__stripe_entry_t w;
        T_CHECK(mkdtemp(dir) != NULL);
        snprintf(file, sizeof(file), "%s/stripe.txt", dir);
        setenv("IPCPIPE_STRIPE_CACHE", file, 1);
        setenv("IPCPIPE_DRIVE", "off", 1);
        memset(&w, 0, sizeof(w));
        snprintf(w.src, sizeof(w.src), "%s", UUID_A);
        snprintf(w.dst, sizeof(w.dst), "%s", UUID_B);
        w.layout = IPCP_STRIPE_RING;
        w.driver = 13000;
        w.share = 0.1;
        w.size = (uint64_t)256 << 20;
        w.min_size = (uint64_t)32 << 20;
        w.direct_gbs = 390;
        w.staged_gbs = 50;
        w.striped_gbs = 420;
        w.time = 1796000000;
        ipcp__stripe_host_id(host, sizeof(host));
        T_EQ_INT(ipcp__stripe_cache_store(file, host, &w, why, sizeof(why)), 0);
        T_OK(ipcp_diag_stripe_lookup(UUID_A, UUID_B, 13000, &e));
        T_EQ_INT((int)e.state, IPCP_DIAG_STRIPE_MEASURED);
        T_CHECK(e.driven == 0 && e.min_size == w.min_size &&
                e.from_size == 2 * w.min_size);
        unlink(file);
        rmdir(dir);
        _exit(0);
    }
    int st;
    T_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
            WEXITSTATUS(st) == 0);
}

int main(void)
{
    check_sizes();
    check_ring_layout();
    check_stripe_setting("off", IPCP_DIAG_STRIPE_OFF, 0);
    check_stripe_setting("0.25", IPCP_DIAG_STRIPE_FIXED, 0.25);
    check_stripe_file();
    T_EQ_INT(ipcp_diag_gpus(NULL), IPCP_ERR_INVALID);
    static ipcp_diag_gpus_t g;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ipcp_status_t st = ipcp_diag_gpus(&g);
    ipcp_diag_stripe_t e;
    mark_error();
    T_EQ_INT(ipcp_diag_stripe_tune(0, 0, &e), IPCP_ERR_UNSUPPORTED);
    T_CHECK(said_new());
    T_EQ_INT(ipcp_diag_stripe_tune(0, IPCP_DIAG_MAX_GPUS, &e),
             IPCP_ERR_UNSUPPORTED);
    T_EQ_INT(ipcp_diag_stripe_tune(0, 1, NULL), IPCP_ERR_INVALID);
    ipcp_diag_release();
    if (!lib) { /* the CI's machines: no driver */
        T_EQ_INT(st, IPCP_ERR_UNSUPPORTED);
        T_EQ_INT(g.ndev, 0);
        mark_error();
        T_CHECK(ipcp_diag_gpus(&g) == IPCP_ERR_UNSUPPORTED && said_new());
        mark_error();
        T_CHECK(ipcp_diag_cuda_proc("cuInit", 2000) == NULL && said_new());
        mark_error();
        T_CHECK(ipcp_diag_stripe_open() != IPCP_OK && said_new());
        return 0;
    }
    /* A driver: either it describes its GPUs, or it says why not (a
     * driver without a GPU). */
    if (st != IPCP_OK) {
        T_EQ_INT(st, IPCP_ERR_UNSUPPORTED);
        mark_error();
        T_CHECK(ipcp_diag_gpus(&g) == IPCP_ERR_UNSUPPORTED && said_new());
        return 0;
    }
    T_CHECK(g.ndev >= 1 && g.driver_version >= 12000);
#ifdef IPCP_HAVE_CUDA
    /* Field by field what the backend's own probe says. */
    static ipcp__cu_probe_t p;
    T_OK(ipcp__cu_probe(&p));
    T_EQ_INT(g.ndev, p.ndev);
    T_EQ_INT(g.driver_version, p.driver_version);
    for (int d = 0; d < g.ndev; d++) {
        const ipcp_diag_gpu_t *x = &g.dev[d];
        const ipcp__cu_dev_info_t *y = &p.dev[d];
        T_CHECK(x->name[0] && strcmp(x->name, y->name) == 0 &&
                strcmp(x->pci_bus_id, y->pci_bus_id) == 0);
        T_CHECK(x->uva == y->uva && x->vmm == y->vmm &&
                x->vmm_fd == y->vmm_fd && x->memops64 == y->memops64 &&
                x->host_va == y->host_va && x->mps == y->mps);
        for (int f = 0; f < g.ndev; f++)
            T_EQ_INT(g.peer[d][f], p.peer[d][f]);
        T_EQ_INT(g.peer[d][d], 1);
    }
#endif
    T_CHECK(ipcp_diag_cuda_proc("cuInit", 2000) != NULL);
    T_CHECK(ipcp_diag_cuda_proc("cuNoSuchEntryPoint", 2000) == NULL);
    T_CHECK(strstr(ipcp_last_error(), "cuNoSuchEntryPoint") != NULL);
    mark_error();
    T_CHECK(ipcp_diag_cuda_proc(NULL, 2000) == NULL && said_new());
    dlclose(lib);
    return 0;
}
