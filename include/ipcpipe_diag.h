/* ipcpipe's diagnostics: what its tools (ipcpipe-info, ipcpipe-bench) read
 * of the library beyond the API of ipcpipe.h.  The GPUs as the CUDA backend
 * sees them, the driver's entry points from the libcuda the library loaded
 * (so that a tool needs no driver at build or link time), the striping
 * calibration between pairs of GPUs, and sizes as the IPCPIPE_* settings
 * take them.  Applications need only ipcpipe.h.  The structs here are
 * those of this version of the library (IPCP_VERSION): a tool is built
 * with the library it calls, and they may change between versions. */
#ifndef IPCPIPE_DIAG_H
#define IPCPIPE_DIAG_H

#include <stddef.h>
#include <stdint.h>

#include "ipcpipe.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IPCP_DIAG_MAX_GPUS 32

/* One GPU as the CUDA backend sees it. */
typedef struct ipcp_diag_gpu {
    char name[96];
    char pci_bus_id[32]; /* "0000:19:00.0" */
    char uuid[48];       /* "GPU-xxxxxxxx-..." as the driver names it (the
                            calibration's key); "" when unreadable */
    int uva;             /* unified addressing */
    int vmm;             /* virtual memory management (cuMemCreate) */
    int vmm_fd;          /* VMM memory exported as a file descriptor */
    int memops64;        /* 64-bit stream memory operations */
    int host_va;         /* registered host memory at the host's address */
    int mps;             /* its contexts are MPS clients: 1, 0, -1 unknown */
} ipcp_diag_gpu_t;

typedef struct ipcp_diag_gpus {
    int driver_version; /* 13000 for CUDA 13.0; 0 when no driver said */
    int ndev;           /* visible GPUs, at most IPCP_DIAG_MAX_GPUS */
    ipcp_diag_gpu_t dev[IPCP_DIAG_MAX_GPUS];
    /* peer[a][b]: GPU a can reach GPU b's memory directly; 1 on the
     * diagonal. */
    unsigned char peer[IPCP_DIAG_MAX_GPUS][IPCP_DIAG_MAX_GPUS];
} ipcp_diag_gpus_t;

/* Where a PCI device sits (ipcp_diag_pci): its host bridge, then the
 * bridges from there down, the device last, as sysfs shows them. */
#define IPCP_DIAG_PCI_DEPTH 12
#define IPCP_DIAG_PCI_NAME  24 /* "ffffffff:ff:1f.7": 32-bit domains (VMD) */
typedef struct ipcp_diag_pci {
    char root[IPCP_DIAG_PCI_NAME]; /* the host bridge: "pci0000:17" */
    int depth; /* entries of chain, the device's own the last */
    char chain[IPCP_DIAG_PCI_DEPTH][IPCP_DIAG_PCI_NAME]; /* "0000:17:00.0" */
    int numa_node; /* -1 where the platform does not say (0 on a machine
                      of one node) */
} ipcp_diag_pci_t;

/* How one device reaches another, nearest first (the words of nvidia-smi
 * topo -m in its legend's order). */
typedef enum {
    IPCP_DIAG_LINK_SELF = 0, /* the same device */
    IPCP_DIAG_LINK_SWITCH,   /* below one root port: they share its link
                                to the host (PIX, PXB) */
    IPCP_DIAG_LINK_HOST,     /* through one host bridge (PHB) */
    IPCP_DIAG_LINK_NODE,     /* through host bridges of one NUMA node */
    IPCP_DIAG_LINK_SYSTEM,   /* across NUMA nodes (SYS) */
    IPCP_DIAG_LINK_UNKNOWN,  /* host bridges that do not say their node */
} ipcp_diag_link_t;

/* The device at bus_id ("0000:19:00.0", as ipcp_diag_gpu_t has it) from
 * sysfs.  IPCP_ERR_INVALID for a string that is no bus id,
 * IPCP_ERR_UNSUPPORTED where sysfs does not know it; the reason in
 * ipcp_last_error(). */
IPCP_API ipcp_status_t ipcp_diag_pci(const char *bus_id, ipcp_diag_pci_t *out);
IPCP_API ipcp_diag_link_t ipcp_diag_pci_link(const ipcp_diag_pci_t *a,
                                             const ipcp_diag_pci_t *b);
/* "self", "switch", "host-bridge", "node", "system", "unknown". */
IPCP_API const char *ipcp_diag_link_name(ipcp_diag_link_t link);

/* Loads the driver, initialises it and describes the visible GPUs without
 * creating a context.  IPCP_ERR_UNSUPPORTED, the reason in
 * ipcp_last_error(), when there is no driver, no GPU, or the library was
 * built without its CUDA backend; out->ndev is then 0. */
IPCP_API ipcp_status_t ipcp_diag_gpus(ipcp_diag_gpus_t *out);

/* The driver's entry point name (a base name, as cuGetProcAddress takes
 * it: "cuMemAlloc") with the ABI of CUDA version cuda_version, on the
 * legacy default stream; NULL when there is no driver or no such entry. */
IPCP_API void *ipcp_diag_cuda_proc(const char *name, int cuda_version);

/* Striping (IPCPIPE_STRIPE) between two GPUs: a transfer split between the
 * direct link and the staged path, the share measured once per ordered
 * pair and kept in a file. */
typedef enum {
    IPCP_DIAG_STRIPE_OFF = 0,    /* IPCPIPE_STRIPE=off */
    IPCP_DIAG_STRIPE_FIXED,      /* a fixed share for every transfer */
    IPCP_DIAG_STRIPE_MEASURED,   /* the file has the pair */
    IPCP_DIAG_STRIPE_UNMEASURED, /* not yet: measured at first use */
    IPCP_DIAG_STRIPE_IGNORED,    /* the file's entry is not trusted (why) */
} ipcp_diag_stripe_state_t;

typedef struct ipcp_diag_stripe {
    ipcp_diag_stripe_state_t state;
    int driven;         /* the receiver copies both parts (IPCPIPE_DRIVE);
                           0: through the two-sided ring */
    int adapt;          /* IPCPIPE_STRIPE_ADAPT on */
    double fixed_share; /* FIXED: the staged share */
    /* MEASURED: the staged share at size and at size_large, and both ways
     * at once (0: striping does not gain); the smallest size transfers
     * stripe from; the copies measured at size; when (Unix seconds). */
    double share, share_large, share_bidir;
    uint64_t size, size_large;
    uint64_t min_size;  /* the smallest size that gained, as measured */
    uint64_t from_size; /* where the engine stripes from: min_size, or
                           twice it through the two-sided ring */
    double direct_gbs, staged_gbs, striped_gbs;
    int64_t measured;
    char file[256]; /* the calibration file; "" when it is off */
    char why[400];  /* UNMEASURED, IGNORED: a sentence on why */
} ipcp_diag_stripe_t;

/* What the settings and the calibration file say of transfers from the GPU
 * of UUID src_uuid to that of dst_uuid ("GPU-xxxxxxxx-...", as the driver
 * names them) under driver_version, without measuring or opening a GPU.
 * With src_uuid or dst_uuid NULL only the settings' part is filled (state
 * OFF, FIXED or UNMEASURED, driven, adapt, file). */
IPCP_API ipcp_status_t ipcp_diag_stripe_lookup(const char *src_uuid,
                                               const char *dst_uuid,
                                               int driver_version,
                                               ipcp_diag_stripe_t *out);

/* Measures striping from visible GPU src to visible GPU dst now (copies in
 * this process, a few seconds), writes the calibration file and fills out
 * (state MEASURED).  IPCP_ERR_UNSUPPORTED when the pair cannot be measured
 * (no driver, no such GPU, no direct path between them), with the reason
 * in ipcp_last_error().  The GPUs stay open for further calls until
 * ipcp_diag_release(). */
IPCP_API ipcp_status_t ipcp_diag_stripe_tune(int src, int dst,
                                             ipcp_diag_stripe_t *out);

/* Opens the GPUs ipcp_diag_stripe_tune measures on, once (later calls
 * give the first outcome): IPCP_OK, or why not (ipcp_last_error()). */
IPCP_API ipcp_status_t ipcp_diag_stripe_open(void);

/* Closes what the diagnostics opened (the GPUs of ipcp_diag_stripe_tune);
 * a later ipcp_diag_stripe_open opens them again. */
IPCP_API void ipcp_diag_release(void);

/* A size as the IPCPIPE_* settings take it ("4096", "64K", "1M", "2G"):
 * IPCP_OK, or IPCP_ERR_INVALID with the reason in ipcp_last_error(). */
IPCP_API ipcp_status_t ipcp_diag_parse_size(const char *text, size_t *out);

#ifdef __cplusplus
}
#endif

#endif
