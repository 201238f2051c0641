/* Loading the CUDA driver, naming its errors, and describing the devices
 * (see cuda_driver.h). */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "backend/cuda/cuda_driver.h"
#include "common/time.h"
#include "common/util.h"

/* The type of each table entry is the ABI of the version it is fetched
 * with (see cuda_driver.h). */
#define IPCP_CU_ABI_CHECK_(name, abi)                                          \
    _Static_assert(                                                            \
        __builtin_types_compatible_p(__typeof__(&name), PFN_##name##_v##abi),  \
        #name " does not have the ABI of CUDA version " #abi);
IPCP_CU_FUNCS(IPCP_CU_ABI_CHECK_)
#undef IPCP_CU_ABI_CHECK_

/* cuGetProcAddress_v2, which the loader needs, came with CUDA 12.0. */
#define IPCP_CU_MIN_DRIVER 12000

ipcp__cu_table_t ipcp__cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static ipcp_status_t cu_load_status = IPCP_ERR_UNSUPPORTED;
static char cu_load_error[IPCP_ERRMSG_MAX];

typedef struct cu_entry {
    const char *name;
    int abi;
    void **slot;
} cu_entry_t;

static const cu_entry_t cu_entries[] = {
#define IPCP_CU_ENTRY_(name, abi) {#name, abi, (void **)&ipcp__cu.pfn_##name},
    IPCP_CU_FUNCS(IPCP_CU_ENTRY_)
#undef IPCP_CU_ENTRY_
};

/* An old driver is named here, with its version, rather than as a missing
 * symbol. */
static int cu_check_version(void *lib)
{
    __typeof__(&cuDriverGetVersion) get_version =
        (__typeof__(&cuDriverGetVersion))dlsym(lib, "cuDriverGetVersion");
    int v = 0;
    if (!get_version || get_version(&v) != CUDA_SUCCESS) {
        snprintf(cu_load_error, sizeof(cu_load_error),
                 "libcuda.so.1 does not report its version "
                 "(cuDriverGetVersion missing or failing)");
        return -1;
    }
    if (v < IPCP_CU_MIN_DRIVER) {
        snprintf(cu_load_error, sizeof(cu_load_error),
                 "the GPU driver supports CUDA %d.%d; ipcpipe needs %d.%d or "
                 "newer",
                 v / 1000, v % 1000 / 10, IPCP_CU_MIN_DRIVER / 1000,
                 IPCP_CU_MIN_DRIVER % 1000 / 10);
        return -1;
    }
    return 0;
}

static int cu_fetch_all(__typeof__(&cuGetProcAddress) get_proc)
{
    for (size_t i = 0; i < sizeof(cu_entries) / sizeof(cu_entries[0]); i++) {
        CUdriverProcAddressQueryResult qr = CU_GET_PROC_ADDRESS_SUCCESS;
        void *fn = NULL;
        CUresult r = get_proc(cu_entries[i].name, &fn, cu_entries[i].abi,
                              CU_GET_PROC_ADDRESS_LEGACY_STREAM, &qr);
        if (r != CUDA_SUCCESS || !fn) {
            snprintf(cu_load_error, sizeof(cu_load_error),
                     "the GPU driver lacks %s of CUDA %d.%d "
                     "(cuGetProcAddress: CUresult %d, query result %d)",
                     cu_entries[i].name, cu_entries[i].abi / 1000,
                     cu_entries[i].abi % 1000 / 10, (int)r, (int)qr);
            return -1;
        }
        *cu_entries[i].slot = fn;
    }
    return 0;
}

/* cuGetProcAddress_v2 of the loaded driver (ipcp__cu_proc). */
static __typeof__(&cuGetProcAddress) cu_get_proc;

/* libcuda stays loaded for the life of the process: the driver keeps
 * threads and state that do not survive dlclose. */
static void cu_load_once(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(cu_load_error, sizeof(cu_load_error),
                 "no GPU driver: libcuda.so.1 not found (%s)",
                 e ? e : "dlopen failed");
        return;
    }
    __typeof__(&cuGetProcAddress) get_proc =
        (__typeof__(&cuGetProcAddress))dlsym(lib, "cuGetProcAddress_v2");
    if (!get_proc) {
        snprintf(cu_load_error, sizeof(cu_load_error),
                 "libcuda.so.1 has no cuGetProcAddress_v2 (driver older "
                 "than CUDA 12.0)");
        return;
    }
    if (cu_check_version(lib) != 0 || cu_fetch_all(get_proc) != 0) {
        memset(&ipcp__cu, 0, sizeof(ipcp__cu));
        return;
    }
    cu_get_proc = get_proc;
    cu_load_status = IPCP_OK;
}

void *ipcp__cu_proc(const char *name, int abi)
{
    CUdriverProcAddressQueryResult qr = CU_GET_PROC_ADDRESS_SUCCESS;
    void *fn = NULL;
    if (ipcp__cu_load() != IPCP_OK ||
        cu_get_proc(name, &fn, abi, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &qr) !=
            CUDA_SUCCESS)
        return NULL;
    return fn;
}

/* The loader's count of objects loaded and unloaded so far, shifted left
 * once, with whether libcuda was among them in bit 0; all ones: not yet
 * looked.  dlopen(RTLD_NOLOAD) would answer too, but it searches the
 * library path when the library is absent (about 0.6 ms a call), so the
 * list of loaded objects is read instead, and only when it changed. */
static _Atomic uint64_t cu_seen = UINT64_MAX;

typedef struct cu_scan {
    uint64_t gen;  /* the count this scan saw */
    int first;     /* no object looked at yet */
    int unchanged; /* the count is the one cu_seen holds */
    int found;
} cu_scan_t;

static int cu_scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    cu_scan_t *s = arg;
    (void)size;
    if (s->first) {
        s->first = 0;
        s->gen = (uint64_t)(info->dlpi_adds + info->dlpi_subs);
        uint64_t seen = atomic_load_explicit(&cu_seen, memory_order_acquire);
        if (seen != UINT64_MAX && seen >> 1 == s->gen) {
            s->unchanged = 1;
            s->found = (int)(seen & 1);
            return 1;
        }
    }
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    s->found = strncmp(base, "libcuda.so", 10) == 0;
    return s->found;
}

/* The coarse clock's reading (ns) when the last look found libcuda
 * absent; 0: not absent, or not looked.  Within the same tick (4 ms here)
 * the answer stands without a look: a device pointer needs the driver
 * loaded, initialized (cuInit took 120 ms on an H200 machine) and an
 * allocation made, far longer than a tick.  The look takes the loader's
 * lock, two atomic writes a host buffer's classification paid on every
 * message (~20 ns with a second thread in the process, on a 2-CPU VM);
 * the clock costs 4 ns. */
static _Atomic uint64_t cu_absent_at;

int ipcp__cu_present(void)
{
    uint64_t now = ipcp__coarse_ns();
    if (now && atomic_load_explicit(&cu_absent_at, memory_order_relaxed) == now)
        return 0;
    cu_scan_t s = {0, 1, 0, 0};
    dl_iterate_phdr(cu_scan_one, &s);
    if (!s.unchanged)
        atomic_store_explicit(&cu_seen, s.gen << 1 | (uint64_t)s.found,
                              memory_order_release);
    /* Written only when it changes: a process with libcuda loaded looks on
     * every classification, from every thread. */
    uint64_t absent_at = s.found ? 0 : now;
    if (atomic_load_explicit(&cu_absent_at, memory_order_relaxed) != absent_at)
        atomic_store_explicit(&cu_absent_at, absent_at, memory_order_relaxed);
    return s.found;
}

ipcp_status_t ipcp__cu_load(void)
{
    pthread_once(&cu_once, cu_load_once);
    if (cu_load_status == IPCP_OK)
        return IPCP_OK;
    return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, cu_load_status, "%s",
                      cu_load_error);
}

const char *ipcp__cu_strerror(CUresult r, char *buf, size_t len)
{
    const char *name = NULL, *text = NULL;
    if (cu_load_status == IPCP_OK) {
        if (IPCP_CU(cuGetErrorName)(r, &name) != CUDA_SUCCESS)
            name = NULL;
        if (IPCP_CU(cuGetErrorString)(r, &text) != CUDA_SUCCESS)
            text = NULL;
    }
    if (!name)
        name = ipcp__cu_errname_nocall(r);
    if (name)
        snprintf(buf, len, "%s: %s", name, text ? text : "no description");
    else
        snprintf(buf, len, "CUresult %d (unknown to this driver)", (int)r);
    return buf;
}

/* The errors a stream reports asynchronously, and a few common others. */
const char *ipcp__cu_errname_nocall(CUresult r)
{
    switch (r) {
#define IPCP_CU_NAME_(e)                                                       \
    case e:                                                                    \
        return #e;
        IPCP_CU_NAME_(CUDA_SUCCESS)
        IPCP_CU_NAME_(CUDA_ERROR_INVALID_VALUE)
        IPCP_CU_NAME_(CUDA_ERROR_OUT_OF_MEMORY)
        IPCP_CU_NAME_(CUDA_ERROR_DEINITIALIZED)
        IPCP_CU_NAME_(CUDA_ERROR_NO_DEVICE)
        IPCP_CU_NAME_(CUDA_ERROR_ECC_UNCORRECTABLE)
        IPCP_CU_NAME_(CUDA_ERROR_INVALID_CONTEXT)
        IPCP_CU_NAME_(CUDA_ERROR_INVALID_HANDLE)
        IPCP_CU_NAME_(CUDA_ERROR_ILLEGAL_ADDRESS)
        IPCP_CU_NAME_(CUDA_ERROR_LAUNCH_FAILED)
        IPCP_CU_NAME_(CUDA_ERROR_HARDWARE_STACK_ERROR)
        IPCP_CU_NAME_(CUDA_ERROR_ILLEGAL_INSTRUCTION)
        IPCP_CU_NAME_(CUDA_ERROR_MISALIGNED_ADDRESS)
        IPCP_CU_NAME_(CUDA_ERROR_INVALID_ADDRESS_SPACE)
        IPCP_CU_NAME_(CUDA_ERROR_INVALID_PC)
        IPCP_CU_NAME_(CUDA_ERROR_NOT_PERMITTED)
        IPCP_CU_NAME_(CUDA_ERROR_NOT_SUPPORTED)
        IPCP_CU_NAME_(CUDA_ERROR_SYSTEM_NOT_READY)
        IPCP_CU_NAME_(CUDA_ERROR_UNKNOWN)
#undef IPCP_CU_NAME_
    default:
        return NULL;
    }
}

ipcp_status_t ipcp__cu_result(CUresult r, int level, ipcp_status_t st,
                              const char *fmt, ...)
{
    char what[IPCP_ERRMSG_MAX / 2], err[IPCP_ERRMSG_MAX / 2];
    va_list ap;
    if (ipcp__likely(r == CUDA_SUCCESS))
        return IPCP_OK;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return ipcp__fail(level, IPCP_SUB_CUDA, st, "%s: %s", what,
                      ipcp__cu_strerror(r, err, sizeof(err)));
}

/* ---- Probe --------------------------------------------------------------- */

static int cu_attr(CUdevice dev, CUdevice_attribute a)
{
    int v = 0;
    if (IPCP_CU(cuDeviceGetAttribute)(&v, a, dev) != CUDA_SUCCESS)
        return 0;
    return v;
}

/* CU_DEVICE_ATTRIBUTE_MPS_ENABLED, by number: the headers of older CUDA
 * 12 toolkits do not name it, and a driver older than the attribute
 * refuses the number (CUDA_ERROR_INVALID_VALUE), which reads as unknown. */
#define IPCP_CU_ATTR_MPS_ENABLED ((CUdevice_attribute)133)
#if CUDA_VERSION >= 13000
_Static_assert(IPCP_CU_ATTR_MPS_ENABLED == CU_DEVICE_ATTRIBUTE_MPS_ENABLED,
               "CU_DEVICE_ATTRIBUTE_MPS_ENABLED");
#endif

int ipcp__cu_device_mps(CUdevice dev)
{
    int v = 0;
    if (IPCP_CU(cuDeviceGetAttribute)(&v, IPCP_CU_ATTR_MPS_ENABLED, dev) !=
        CUDA_SUCCESS)
        return -1;
    return v != 0;
}

static void cu_probe_device(ipcp__cu_dev_info_t *d, CUdevice dev)
{
    if (IPCP_CU(cuDeviceGetName)(d->name, (int)sizeof(d->name), dev) !=
        CUDA_SUCCESS)
        snprintf(d->name, sizeof(d->name), "(unknown)");
    if (IPCP_CU(cuDeviceGetPCIBusId)(d->pci_bus_id, (int)sizeof(d->pci_bus_id),
                                     dev) != CUDA_SUCCESS)
        snprintf(d->pci_bus_id, sizeof(d->pci_bus_id), "(unknown)");
    d->uva = cu_attr(dev, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
    d->vmm =
        cu_attr(dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
    d->vmm_fd = cu_attr(
        dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
    d->memops64 =
        cu_attr(dev, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS);
    d->host_va = cu_attr(
        dev, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
    d->mps = ipcp__cu_device_mps(dev);
}

int ipcp__cu_uuid(CUdevice dev, char *buf, size_t len)
{
    CUuuid u;
    if (IPCP_CU(cuDeviceGetUuid)(&u, dev) != CUDA_SUCCESS)
        return -1;
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(buf, len,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
    return 0;
}

ipcp_status_t ipcp__cu_probe(ipcp__cu_probe_t *p)
{
    CUdevice devs[IPCP_CU_MAX_DEVICES];
    ipcp_status_t st;
    int n = 0;

    memset(p, 0, sizeof(*p));
    if ((st = ipcp__cu_load()) != IPCP_OK)
        return st;
    IPCP_CU(cuDriverGetVersion)(&p->driver_version);
    st = ipcp__cu_result(IPCP_CU(cuInit)(0), IPCP_LOG_DEBUG,
                         IPCP_ERR_UNSUPPORTED, "cuInit(0)");
    if (st != IPCP_OK)
        return st;
    st = ipcp__cu_result(IPCP_CU(cuDeviceGetCount)(&n), IPCP_LOG_DEBUG,
                         IPCP_ERR_UNSUPPORTED, "cuDeviceGetCount");
    if (st != IPCP_OK)
        return st;
    if (n <= 0)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_CUDA, IPCP_ERR_UNSUPPORTED,
                          "no CUDA device visible");
    p->ndev = n < IPCP_CU_MAX_DEVICES ? n : IPCP_CU_MAX_DEVICES;
    for (int i = 0; i < p->ndev; i++) {
        st = ipcp__cu_check(IPCP_CU(cuDeviceGet)(&devs[i], i), IPCP_LOG_DEBUG,
                            "cuDeviceGet(%d)", i);
        if (st != IPCP_OK)
            return st;
        cu_probe_device(&p->dev[i], devs[i]);
        if (ipcp__cu_uuid(devs[i], p->dev[i].uuid, sizeof(p->dev[i].uuid)) < 0)
            p->dev[i].uuid[0] = '\0';
    }
    for (int a = 0; a < p->ndev; a++) {
        for (int b = 0; b < p->ndev; b++) {
            int can = a == b;
            if (a != b && IPCP_CU(cuDeviceCanAccessPeer)(
                              &can, devs[a], devs[b]) != CUDA_SUCCESS)
                can = 0;
            p->peer[a][b] = (unsigned char)(can != 0);
        }
    }
    return IPCP_OK;
}
