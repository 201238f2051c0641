/* The GPU part of ipcpipe-info (the doctor): devices, the peer-access
 * matrix, which sharing mechanisms work, and for every pair of GPUs the
 * path ipcpipe would pick, with a reason code and one line on why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "info_gpu.h"
#include "json.h"

#ifdef IPCP_HAVE_CUDA
#include <time.h>

#include "ipcpipe_diag.h"
#include "tool_cuda.h"

typedef struct gpu_facts {
    ipcp_status_t st;
    char why[320];
    ipcp_diag_gpus_t p;
    int pool_fd[IPCP_DIAG_MAX_GPUS]; /* memory pools shareable by fd */
    /* Where each GPU sits on PCI (pci_ok 0: pci_why says why not), and
     * how many of the GPUs seen (itself among them) are behind its root
     * port, sharing that port's link to host memory. */
    ipcp_diag_pci_t pci[IPCP_DIAG_MAX_GPUS];
    int pci_ok[IPCP_DIAG_MAX_GPUS], host_link[IPCP_DIAG_MAX_GPUS];
    char pci_why[IPCP_DIAG_MAX_GPUS][160];
} gpu_facts_t;

/* Reason codes, each with the path it leads to and what it means. */
typedef struct gpu_verdict {
    const char *path; /* "direct", "staged", "none" */
    const char *code;
    char text[200];
    /* Buffers neither process can share (the default cudaMallocAsync
     * pool, VMM memory without handle types): "bounce" or "staged". */
    const char *unshared;
    char unshared_text[160];
    const char *stripe; /* yes, no, off, fixed, unmeasured, ignored */
    char stripe_text[512];
} gpu_verdict_t;

/* What a calibration found for the pair says, for ipcpipe-info. */
static void gpu_stripe_hit(const ipcp_diag_stripe_t *e, gpu_verdict_t *v)
{
    char when[32] = "?";
    time_t t = (time_t)e->measured;
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%d", &tm);
    v->stripe = e->share > 0 ? "yes" : "no";
#define ADAPT_TEXT                                                             \
    "; lowered, down to not striping, while the staged part ends late, "       \
    "raised up to a quarter past it while it ends well ahead "                 \
    "(IPCPIPE_STRIPE_ADAPT"
    const char *adapt = !e->adapt   ? ""
                        : e->driven ? ADAPT_TEXT "; one way only)"
                                    : ADAPT_TEXT ")";
#undef ADAPT_TEXT
    if (e->share > 0)
        snprintf(v->stripe_text, sizeof(v->stripe_text),
                 "%.0f%% staged at once at %llu MiB, %.0f%% at %llu MiB, "
                 "%.0f%% while both ways run; from %llu MiB up "
                 "(measured %s: direct %.1f, staged %.1f, striped %.1f "
                 "GB/s at %llu MiB)%s%s",
                 e->share * 100, (unsigned long long)(e->size >> 20),
                 e->share_large * 100,
                 (unsigned long long)(e->size_large >> 20),
                 e->share_bidir * 100, (unsigned long long)(e->from_size >> 20),
                 when, e->direct_gbs, e->staged_gbs, e->striped_gbs,
                 (unsigned long long)(e->size >> 20),
                 e->driven ? "; the receiver copies both parts itself "
                             "(IPCPIPE_DRIVE)"
                           : "",
                 adapt);
    else
        snprintf(v->stripe_text, sizeof(v->stripe_text),
                 "measured %s: no share beat the direct path (direct "
                 "%.1f, best striped %.1f GB/s; the links are shared)",
                 when, e->direct_gbs, e->striped_gbs);
}

/* Whether transfers from GPU a to GPU b stripe (IPCPIPE_STRIPE), as the
 * settings and the calibration file say. */
static void gpu_stripe(const gpu_facts_t *g, int a, int b, gpu_verdict_t *v)
{
    ipcp_diag_stripe_t e;

    if (strcmp(v->path, "direct") != 0 || a == b) {
        v->stripe = "no";
        snprintf(v->stripe_text, sizeof(v->stripe_text), "%s",
                 a == b ? "one GPU: its memory would carry both parts"
                        : "no direct path to share the transfer with");
        return;
    }
    const char *ua = g->p.dev[a].uuid, *ub = g->p.dev[b].uuid;
    int uuids = ua[0] && ub[0];
    if (ipcp_diag_stripe_lookup(uuids ? ua : NULL, uuids ? ub : NULL,
                                g->p.driver_version, &e) != IPCP_OK) {
        v->stripe = "no";
        snprintf(v->stripe_text, sizeof(v->stripe_text), "%s",
                 ipcp_last_error());
        return;
    }
    switch (e.state) {
    case IPCP_DIAG_STRIPE_OFF:
        v->stripe = "off";
        snprintf(v->stripe_text, sizeof(v->stripe_text), "IPCPIPE_STRIPE=off");
        return;
    case IPCP_DIAG_STRIPE_FIXED:
        v->stripe = "fixed";
        snprintf(v->stripe_text, sizeof(v->stripe_text),
                 "%.1f%% of every direct transfer staged at the same time "
                 "(IPCPIPE_STRIPE)",
                 e.fixed_share * 100);
        return;
    case IPCP_DIAG_STRIPE_MEASURED:
        gpu_stripe_hit(&e, v);
        return;
    case IPCP_DIAG_STRIPE_UNMEASURED:
        if (!uuids) {
            v->stripe = "no";
            snprintf(v->stripe_text, sizeof(v->stripe_text),
                     "cannot read the GPUs' UUIDs");
            return;
        }
        v->stripe = "unmeasured";
        snprintf(v->stripe_text, sizeof(v->stripe_text),
                 "not measured yet: measured at the first large transfer, or "
                 "now with ipcpipe-bench --tune (%s)",
                 e.why);
        return;
    default:
        v->stripe = "ignored";
        snprintf(v->stripe_text, sizeof(v->stripe_text),
                 "calibration ignored, measured again at first use: %s", e.why);
        return;
    }
}

/* MPS on a GPU, as the driver reports it for contexts this process would
 * make there (ranks started the same way see the same), and what it means
 * for several ranks on that GPU.  The figures are one H200's: two
 * processes on it, an 8 B direct transfer's half round trip. */
static const char *gpu_mps_word(int mps)
{
    return mps > 0 ? "yes" : mps == 0 ? "no" : "unknown";
}

static const char *gpu_mps_note(int mps)
{
    if (mps > 0)
        return "ranks that share this GPU run their work on it at once "
               "(8 B half round trip between two ranks on one H200: ~22 us "
               "with MPS, ~170 us without)";
    if (mps == 0)
        return "ranks that share this GPU take turns on it in time slices, "
               "so small transfers between them wait (8 B half round trip "
               "between two ranks on one H200: ~170 us; ~22 us with the MPS "
               "daemon: nvidia-cuda-mps-control -d)";
    return "the driver does not report it; without MPS, ranks that share "
           "a GPU take turns on it in time slices (8 B half round trip "
           "between two ranks on one H200: ~170 us without MPS, ~22 us "
           "with it)";
}

/* Each GPU's place on PCI, and the GPUs behind each one's root port. */
static void gpu_topology(gpu_facts_t *g)
{
    for (int d = 0; d < g->p.ndev; d++) {
        g->pci_ok[d] =
            ipcp_diag_pci(g->p.dev[d].pci_bus_id, &g->pci[d]) == IPCP_OK;
        if (!g->pci_ok[d])
            snprintf(g->pci_why[d], sizeof(g->pci_why[d]), "%s",
                     ipcp_last_error());
    }
    for (int a = 0; a < g->p.ndev; a++)
        for (int b = 0; b < g->p.ndev; b++)
            g->host_link[a] += g->pci_ok[a] && g->pci_ok[b] &&
                               ipcp_diag_pci_link(&g->pci[a], &g->pci[b]) <=
                                   IPCP_DIAG_LINK_SWITCH;
}

/* The short form of a link in the topology matrix. */
static const char *gpu_link_abbr(ipcp_diag_link_t l)
{
    static const char *const abbr[] = {"-", "SW", "HB", "NODE", "SYS", "?"};
    return (unsigned)l < sizeof(abbr) / sizeof(abbr[0]) ? abbr[l] : "?";
}

static ipcp_diag_link_t gpu_link(const gpu_facts_t *g, int a, int b)
{
    return g->pci_ok[a] && g->pci_ok[b]
               ? ipcp_diag_pci_link(&g->pci[a], &g->pci[b])
               : IPCP_DIAG_LINK_UNKNOWN;
}

static void gpu_gather(gpu_facts_t *g)
{
    memset(g, 0, sizeof(*g));
    g->st = ipcp_diag_gpus(&g->p);
    if (g->st == IPCP_OK && tool_cu_load(g->why, sizeof(g->why)) < 0) {
        g->st = IPCP_ERR_UNSUPPORTED;
        return;
    }
    if (g->st != IPCP_OK) {
        snprintf(g->why, sizeof(g->why), "%s", ipcp_last_error());
        return;
    }
    for (int d = 0; d < g->p.ndev; d++) {
        CUdevice dev;
        int types = 0;
        if (TOOL_CU(cuDeviceGet)(&dev, d) == CUDA_SUCCESS &&
            TOOL_CU(cuDeviceGetAttribute)(
                &types, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
                dev) == CUDA_SUCCESS)
            g->pool_fd[d] =
                (types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0;
    }
    gpu_topology(g);
}

/* What a transfer from a process on GPU a to one on GPU b would do. */
static void gpu_verdict(const gpu_facts_t *g, int a, int b, gpu_verdict_t *v)
{
    const ipcp_diag_gpu_t *da = &g->p.dev[a], *db = &g->p.dev[b];
    if (!da->memops64 || !db->memops64) {
        v->path = "none";
        v->code = "NO_STREAM_MEMOPS";
        snprintf(v->text, sizeof(v->text),
                 "GPU %d cannot run 64-bit stream memory operations, which "
                 "order every chunk",
                 da->memops64 ? b : a);
    } else if (a == b) {
        v->path = "direct";
        v->code = "SAME_DEVICE";
        snprintf(v->text, sizeof(v->text),
                 "two processes on one GPU: copies within its memory");
    } else if (g->p.peer[a][b]) {
        v->path = "direct";
        v->code = "PEER_ACCESS";
        snprintf(v->text, sizeof(v->text),
                 "GPU %d can write GPU %d's memory (cuDeviceCanAccessPeer = "
                 "1): one copy over NVLink or PCIe",
                 a, b);
    } else {
        v->path = "staged";
        v->code = "NO_PEER_ACCESS";
        snprintf(v->text, sizeof(v->text),
                 "cuDeviceCanAccessPeer(%d, %d) = 0 (no NVLink or PCIe peer "
                 "path, common in VMs and containers): through the pinned "
                 "host ring",
                 a, b);
    }
    int ring = strcmp(v->path, "direct") == 0 && db->vmm_fd;
    v->unshared = ring ? "bounce" : v->path;
    if (ring)
        snprintf(v->unshared_text, sizeof(v->unshared_text),
                 "through a ring in GPU %d's memory, GPU %d writing it", b, a);
    else
        snprintf(v->unshared_text, sizeof(v->unshared_text), "%s",
                 strcmp(v->path, "direct") == 0
                     ? "through the pinned host ring: GPU's memory cannot be "
                       "shared for a ring (no VMM fd)"
                     : "as above");
}

/* One GPU's place on PCI and who shares its link to the host. */
static void gpu_text_pci(const gpu_facts_t *g, int d)
{
    const ipcp_diag_pci_t *p = &g->pci[d];
    if (!g->pci_ok[d]) {
        printf("         PCI: not found (%s)\n", g->pci_why[d]);
        return;
    }
    printf("         PCI: host bridge %s, root port %s, NUMA node ", p->root,
           p->depth > 1 ? p->chain[0] : "(none: on the host bridge)");
    if (p->numa_node >= 0)
        printf("%d", p->numa_node);
    else
        printf("unknown");
    printf(", %d bridge%s above it; its link to the host shared by %d GPU%s\n",
           p->depth - 1, p->depth == 2 ? "" : "s", g->host_link[d],
           g->host_link[d] == 1 ? " (itself)" : "s seen here");
}

/* How each GPU reaches each other one on PCI, in nvidia-smi topo -m's
 * words. */
static void gpu_text_topology(const gpu_facts_t *g)
{
    printf("  PCI topology (SW: behind one root port, sharing its link to "
           "the host; HB: one host bridge; NODE: one NUMA node; SYS: across "
           "NUMA nodes):\n       ");
    for (int b = 0; b < g->p.ndev; b++)
        printf(" %4d", b);
    printf("\n");
    for (int a = 0; a < g->p.ndev; a++) {
        printf("  %4d ", a);
        for (int b = 0; b < g->p.ndev; b++)
            printf(" %4s", gpu_link_abbr(gpu_link(g, a, b)));
        printf("\n");
    }
    printf("  with every pair moving data at once, the staged parts of "
           "transfers from GPUs behind one root port share its link\n");
}

static void gpu_text(const gpu_facts_t *g, const char *visible)
{
    printf("\nGPUs:\n");
    if (g->st != IPCP_OK) {
        printf("  none usable: %s\n", g->why);
        return;
    }
    printf("  driver: CUDA %d.%d, %d device%s visible\n",
           g->p.driver_version / 1000, g->p.driver_version % 1000 / 10,
           g->p.ndev, g->p.ndev == 1 ? "" : "s");
    for (int d = 0; d < g->p.ndev; d++) {
        const ipcp_diag_gpu_t *x = &g->p.dev[d];
        printf("  GPU %d: %s, PCI %s\n", d, x->name, x->pci_bus_id);
        printf("         legacy IPC %s, VMM fd %s, pools by fd %s, 64-bit "
               "stream memops %s\n",
               x->uva ? "yes" : "no (no unified addressing)",
               x->vmm_fd ? "yes" : "no (ipcp_mem_alloc of its memory fails)",
               g->pool_fd[d] ? "yes" : "no", x->memops64 ? "yes" : "NO");
        printf("         MPS: %s; %s\n", gpu_mps_word(x->mps),
               gpu_mps_note(x->mps));
        gpu_text_pci(g, d);
    }
    gpu_text_topology(g);
    printf("  peer access (row can write column):\n       ");
    for (int b = 0; b < g->p.ndev; b++)
        printf(" %3d", b);
    printf("\n");
    for (int a = 0; a < g->p.ndev; a++) {
        printf("  %4d ", a);
        for (int b = 0; b < g->p.ndev; b++)
            printf(" %3s", a == b ? "-" : g->p.peer[a][b] ? "yes" : "no");
        printf("\n");
    }
    printf("  paths between processes (sender GPU -> receiver GPU):\n");
    for (int a = 0; a < g->p.ndev; a++) {
        for (int b = 0; b < g->p.ndev; b++) {
            gpu_verdict_t v;
            gpu_verdict(g, a, b, &v);
            gpu_stripe(g, a, b, &v);
            printf("    %d -> %d: %-6s %-16s %s\n", a, b, v.path, v.code,
                   v.text);
            printf("              stripe: %s, %s\n", v.stripe, v.stripe_text);
            printf("              buffers neither side can share: %s, %s\n",
                   v.unshared, v.unshared_text);
        }
    }
    if (visible && *visible)
        printf("  note: CUDA_VISIBLE_DEVICES is set; ranks that each see a "
               "different GPU cannot map each other's memory (reason "
               "ISOLATED): their transfers go staged\n");
}

/* ", \"pci\": {...}" of GPU d: its place, or why it is unknown. */
static void gpu_json_pci(const gpu_facts_t *g, int d)
{
    const ipcp_diag_pci_t *p = &g->pci[d];
    printf(", \"pci\": {");
    if (!g->pci_ok[d]) {
        printf("\"reason\": ");
        ipcp_json_str(stdout, g->pci_why[d]);
        printf("}");
        return;
    }
    printf("\"root\": ");
    ipcp_json_str(stdout, p->root);
    printf(", \"chain\": [");
    for (int i = 0; i < p->depth; i++) {
        printf("%s", i ? ", " : "");
        ipcp_json_str(stdout, p->chain[i]);
    }
    printf("], \"numa_node\": %d, \"host_link_shared_by\": %d}", p->numa_node,
           g->host_link[d]);
}

static void gpu_json(const gpu_facts_t *g)
{
    printf("{\"usable\": %s", g->st == IPCP_OK ? "true" : "false");
    if (g->st != IPCP_OK) {
        printf(", \"reason\": ");
        ipcp_json_str(stdout, g->why);
        printf("}");
        return;
    }
    printf(", \"driver_version\": %d, \"devices\": [", g->p.driver_version);
    for (int d = 0; d < g->p.ndev; d++) {
        const ipcp_diag_gpu_t *x = &g->p.dev[d];
        printf("%s{\"index\": %d, \"name\": ", d ? ", " : "", d);
        ipcp_json_str(stdout, x->name);
        printf(", \"pci_bus_id\": ");
        ipcp_json_str(stdout, x->pci_bus_id);
        printf(", \"legacy_ipc\": %s, \"vmm_fd\": %s, \"pool_fd\": %s, "
               "\"memops64\": %s, \"mps\": \"%s\", \"mps_note\": ",
               x->uva ? "true" : "false", x->vmm_fd ? "true" : "false",
               g->pool_fd[d] ? "true" : "false", x->memops64 ? "true" : "false",
               gpu_mps_word(x->mps));
        ipcp_json_str(stdout, gpu_mps_note(x->mps));
        gpu_json_pci(g, d);
        printf("}");
    }
    printf("], \"topology\": [");
    for (int a = 0; a < g->p.ndev; a++) {
        printf("%s[", a ? ", " : "");
        for (int b = 0; b < g->p.ndev; b++)
            printf("%s\"%s\"", b ? ", " : "",
                   ipcp_diag_link_name(gpu_link(g, a, b)));
        printf("]");
    }
    printf("], \"peer\": [");
    for (int a = 0; a < g->p.ndev; a++) {
        printf("%s[", a ? ", " : "");
        for (int b = 0; b < g->p.ndev; b++)
            printf("%s%s", b ? ", " : "", g->p.peer[a][b] ? "true" : "false");
        printf("]");
    }
    printf("], \"pairs\": [");
    int first = 1;
    for (int a = 0; a < g->p.ndev; a++) {
        for (int b = 0; b < g->p.ndev; b++) {
            gpu_verdict_t v;
            gpu_verdict(g, a, b, &v);
            gpu_stripe(g, a, b, &v);
            printf("%s{\"from\": %d, \"to\": %d, \"path\": \"%s\", "
                   "\"reason\": \"%s\", \"text\": ",
                   first ? "" : ", ", a, b, v.path, v.code);
            ipcp_json_str(stdout, v.text);
            printf(", \"stripe\": \"%s\", \"stripe_text\": ", v.stripe);
            ipcp_json_str(stdout, v.stripe_text);
            printf(", \"unshared\": \"%s\", \"unshared_text\": ", v.unshared);
            ipcp_json_str(stdout, v.unshared_text);
            printf("}");
            first = 0;
        }
    }
    printf("]}");
}

void info_gpu_text(const char *visible)
{
    gpu_facts_t *g = calloc(1, sizeof(*g));
    if (!g)
        return;
    gpu_gather(g);
    gpu_text(g, visible);
    free(g);
}

void info_gpu_json(void)
{
    gpu_facts_t *g = calloc(1, sizeof(*g));
    if (!g) {
        printf("null");
        return;
    }
    gpu_gather(g);
    gpu_json(g);
    free(g);
}

#else /* !IPCP_HAVE_CUDA */

void info_gpu_text(const char *visible)
{
    (void)visible;
    printf("\nGPUs:\n  none usable: ipcpipe was built without the CUDA "
           "backend (no CUDA toolkit at build time)\n");
}

void info_gpu_json(void)
{
    printf("{\"usable\": false, \"reason\": \"built without the CUDA "
           "backend\"}");
}

#endif
