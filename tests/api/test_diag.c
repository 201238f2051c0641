/* ipcpipe_diag.h: sizes as the settings take them, every bad one refused
 * with a reason; the GPUs and the driver's entry points where a driver is
 * (this process can open libcuda.so.1), and on a machine without one a
 * refusal that says why, not a crash or an empty success. */
#include <dlfcn.h>
#include <string.h>

#include "ipcpipe_diag.h"
#include "testutil.h"

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

int main(void)
{
    check_sizes();
    T_EQ_INT(ipcp_diag_gpus(NULL), IPCP_ERR_INVALID);
    static ipcp_diag_gpus_t g;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ipcp_status_t st = ipcp_diag_gpus(&g);
    if (!lib) { /* the CI's machines: no driver */
        T_EQ_INT(st, IPCP_ERR_UNSUPPORTED);
        T_CHECK(ipcp_last_error()[0] != '\0');
        T_EQ_INT(g.ndev, 0);
        T_CHECK(ipcp_diag_cuda_proc("cuInit", 2000) == NULL);
        T_CHECK(ipcp_last_error()[0] != '\0');
        return 0;
    }
    /* A driver: either it describes its GPUs, or it says why not (a
     * driver without a GPU). */
    if (st != IPCP_OK) {
        T_EQ_INT(st, IPCP_ERR_UNSUPPORTED);
        T_CHECK(ipcp_last_error()[0] != '\0');
        return 0;
    }
    T_CHECK(g.ndev >= 1 && g.driver_version >= 12000);
    for (int d = 0; d < g.ndev; d++) {
        T_CHECK(g.dev[d].name[0] && g.dev[d].pci_bus_id[0]);
        T_EQ_INT(g.peer[d][d], 1);
    }
    T_CHECK(ipcp_diag_cuda_proc("cuInit", 2000) != NULL);
    T_CHECK(ipcp_diag_cuda_proc("cuNoSuchEntryPoint", 2000) == NULL);
    T_CHECK(strstr(ipcp_last_error(), "cuNoSuchEntryPoint") != NULL);
    T_CHECK(ipcp_diag_cuda_proc(NULL, 2000) == NULL);
    dlclose(lib);
    return 0;
}
