/* ipcpipe-info: the library's version, every IPCPIPE_* setting with its
 * value, default and doc, and the host facts that decide which paths can
 * run (shared memory, memlock limit, ptrace rules, the CUDA driver). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "info_gpu.h"
#include "json.h"
#include "ipcpipe.h"

extern char **environ;

typedef struct host_facts {
    char hostname[256];
    char kernel[256];
    int shm_ok;
    unsigned long long shm_size, shm_free;
    struct rlimit memlock;
    long cpus_online;
    int cpus_allowed;
    int ptrace_scope; /* -1: no Yama */
    int pvm_plain;    /* errno of a peer writing into us (0: works) */
    int pvm_named;    /* the same after PR_SET_PTRACER names the peer */
    const char *cuda_visible;
    int cuda_driver;  /* libcuda.so.1 could be opened */
    int cuda_version; /* cuDriverGetVersion, 0 unknown */
    char cuda_error[256];
} host_facts_t;

/* ---- probes ----------------------------------------------------------- */

static int read_ptrace_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static const char *ptrace_scope_doc(int scope)
{
    switch (scope) {
    case -1:
        return "no Yama: same-user processes may attach";
    case 0:
        return "classic: same-user processes may attach";
    case 1:
        return "restricted: only ancestors, or processes named with "
               "PR_SET_PTRACER";
    case 2:
        return "admin only: needs CAP_SYS_PTRACE";
    case 3:
        return "no attach at all";
    default:
        return "unknown";
    }
}

/* Ranks are siblings, not ancestors of one another, so the question is
 * whether a process that is not our ancestor may write into us: a child
 * plays that peer (Yama treats a child exactly like a sibling here), first
 * as it is, then after we name it with PR_SET_PTRACER.  Returns 0 when the
 * write landed, else the errno it met. */
static int probe_pvm(int name_peer)
{
    static volatile unsigned char target[64];
    int go[2];
    memset((void *)target, 0, sizeof(target));
    if (pipe2(go, O_CLOEXEC) != 0)
        return errno;
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        int e = errno;
        close(go[0]);
        close(go[1]);
        return e;
    }
    if (pid == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1)
            _exit(EIO);
        unsigned char src[sizeof(target)];
        memset(src, 0x5a, sizeof(src));
        struct iovec l = {src, sizeof(src)};
        struct iovec r = {(void *)target, sizeof(target)};
        _exit(process_vm_writev(parent, &l, 1, &r, 1, 0) == (ssize_t)sizeof(src)
                  ? 0
                  : errno);
    }
    close(go[0]);
    if (name_peer)
        prctl(PR_SET_PTRACER, (unsigned long)pid, 0, 0, 0);
    int st = 0;
    if (write(go[1], "g", 1) != 1)
        kill(pid, SIGKILL);
    close(go[1]);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (name_peer)
        prctl(PR_SET_PTRACER, 0, 0, 0, 0);
    if (!WIFEXITED(st))
        return EINTR;
    if (WEXITSTATUS(st) != 0)
        return WEXITSTATUS(st);
    return target[0] == 0x5a ? 0 : EFAULT;
}

/* Opens the driver the way the library does (at run time) and asks only
 * for its version, which needs no cuInit and no GPU. */
static void probe_cuda(host_facts_t *h)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(h->cuda_error, sizeof(h->cuda_error), "%s", e ? e : "");
        return;
    }
    h->cuda_driver = 1;
    int (*get_version)(int *) =
        (int (*)(int *))dlsym(lib, "cuDriverGetVersion");
    int v = 0;
    if (get_version && get_version(&v) == 0)
        h->cuda_version = v;
    dlclose(lib);
}

static void gather(host_facts_t *h)
{
    memset(h, 0, sizeof(*h));
    gethostname(h->hostname, sizeof(h->hostname) - 1);
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(h->kernel, sizeof(h->kernel), "%s %s %s", u.sysname, u.release,
                 u.machine);
    struct statvfs sv;
    if (statvfs("/dev/shm", &sv) == 0) {
        h->shm_ok = 1;
        h->shm_size = (unsigned long long)sv.f_blocks * sv.f_frsize;
        h->shm_free = (unsigned long long)sv.f_bavail * sv.f_frsize;
    }
    if (getrlimit(RLIMIT_MEMLOCK, &h->memlock) != 0)
        h->memlock.rlim_cur = h->memlock.rlim_max = 0;
    h->cpus_online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    h->cpus_allowed =
        sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : -1;
    h->ptrace_scope = read_ptrace_scope();
    h->pvm_plain = probe_pvm(0);
    h->pvm_named = h->pvm_plain == 0 ? 0 : probe_pvm(1);
    h->cuda_visible = getenv("CUDA_VISIBLE_DEVICES");
    probe_cuda(h);
}

/* ---- output ----------------------------------------------------------- */

static void fmt_bytes(char *buf, size_t len, unsigned long long v)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double d = (double)v;
    int u = 0;
    while (d >= 1024 && u < 4) {
        d /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", d, units[u]);
}

static void fmt_rlim(char *buf, size_t len, rlim_t v)
{
    if (v == RLIM_INFINITY)
        snprintf(buf, len, "unlimited");
    else
        fmt_bytes(buf, len, (unsigned long long)v);
}

static const char *pvm_verdict(const host_facts_t *h)
{
    if (h->pvm_plain == 0)
        return "usable between ranks";
    if (h->pvm_named == 0)
        return "usable only toward a peer named with PR_SET_PTRACER";
    return "not usable";
}

/* Variables that look like ours but are not in the table: most often a
 * misspelling, which would otherwise be ignored without a word. */
static void print_unknown_vars(FILE *f)
{
    int n = ipcp_settings_count();
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "IPCPIPE_", 8) != 0)
            continue;
        size_t len = strcspn(*e, "=");
        int known = 0;
        for (int i = 0; i < n && !known; i++) {
            ipcp_setting_info_t si;
            known = ipcp_setting_get(i, &si) == IPCP_OK &&
                    strlen(si.name) == len && strncmp(si.name, *e, len) == 0;
        }
        if (!known)
            fprintf(f, "warning: %.*s is not an ipcpipe setting (ignored)\n",
                    (int)len, *e);
    }
}

static const char *cuda_text(const host_facts_t *h, char *buf, size_t len)
{
    if (h->cuda_driver && h->cuda_version > 0)
        snprintf(buf, len, "driver found (libcuda.so.1, CUDA %d.%d)",
                 h->cuda_version / 1000, h->cuda_version % 1000 / 10);
    else if (h->cuda_driver)
        snprintf(buf, len, "driver found (libcuda.so.1)");
    else if (strstr(h->cuda_error, "No such file") || !h->cuda_error[0])
        snprintf(buf, len,
                 "not available (no GPU driver: libcuda.so.1 not "
                 "found)");
    else
        snprintf(buf, len, "not available (libcuda.so.1 did not load: %s)",
                 h->cuda_error);
    return buf;
}

static void print_text(const host_facts_t *h)
{
    char a[512], b[64];
    printf("ipcpipe %s (header %d.%d.%d)\n\n", ipcp_version_string(),
           IPCP_VERSION_MAJOR, IPCP_VERSION_MINOR, IPCP_VERSION_PATCH);
    printf("Settings:\n");
    int w = 0; /* the longest name sets the column */
    for (int i = 0; i < ipcp_settings_count(); i++) {
        ipcp_setting_info_t si;
        if (ipcp_setting_get(i, &si) == IPCP_OK && (int)strlen(si.name) > w)
            w = (int)strlen(si.name);
    }
    for (int i = 0; i < ipcp_settings_count(); i++) {
        ipcp_setting_info_t si;
        if (ipcp_setting_get(i, &si) != IPCP_OK)
            continue;
        if (si.is_set)
            printf("  %-*s = %-12s (set; default %s)\n", w, si.name, si.value,
                   si.deflt);
        else
            printf("  %-*s = %-12s (default)\n", w, si.name, si.value);
        printf("  %*s   %s\n", w, "", si.doc);
    }
    print_unknown_vars(stdout);
    printf("\nHost:\n");
    printf("  host: %s (%s)\n", h->hostname, h->kernel);
    printf("  cpus: %ld online, %d usable by this process\n", h->cpus_online,
           h->cpus_allowed);
    if (h->shm_ok) {
        fmt_bytes(a, sizeof(a), h->shm_size);
        fmt_bytes(b, sizeof(b), h->shm_free);
        printf("  /dev/shm: %s, %s free\n", a, b);
    } else {
        printf("  /dev/shm: not available\n");
    }
    fmt_rlim(a, sizeof(a), h->memlock.rlim_cur);
    fmt_rlim(b, sizeof(b), h->memlock.rlim_max);
    printf("  memlock limit: %s (hard %s)\n", a, b);
    if (h->ptrace_scope >= 0)
        printf("  ptrace_scope: %d (%s)\n", h->ptrace_scope,
               ptrace_scope_doc(h->ptrace_scope));
    else
        printf("  ptrace_scope: absent (%s)\n", ptrace_scope_doc(-1));
    printf("  process_vm_writev: %s", pvm_verdict(h));
    if (h->pvm_plain != 0)
        printf(" (%s)",
               strerror(h->pvm_named != 0 ? h->pvm_named : h->pvm_plain));
    printf("\n  CUDA_VISIBLE_DEVICES: %s\n",
           h->cuda_visible ? h->cuda_visible : "(unset)");
    printf("  CUDA: %s\n", cuda_text(h, a, sizeof(a)));
    info_gpu_text(h->cuda_visible);
}

static void json_str(const char *s)
{
    ipcp_json_str(stdout, s);
}

static void json_rlim(rlim_t v)
{
    if (v == RLIM_INFINITY)
        printf("null");
    else
        printf("%llu", (unsigned long long)v);
}

static void json_settings(void)
{
    printf("  \"settings\": [");
    for (int i = 0; i < ipcp_settings_count(); i++) {
        ipcp_setting_info_t si;
        if (ipcp_setting_get(i, &si) != IPCP_OK)
            continue;
        printf("%s\n    {\"name\": ", i ? "," : "");
        json_str(si.name);
        printf(", \"value\": ");
        json_str(si.value);
        printf(", \"default\": ");
        json_str(si.deflt);
        printf(", \"set\": %s, \"doc\": ", si.is_set ? "true" : "false");
        json_str(si.doc);
        printf("}");
    }
    printf("\n  ],\n");
}

static void print_json(const host_facts_t *h)
{
    char buf[512];
    printf("{\n  \"version\": ");
    json_str(ipcp_version_string());
    printf(",\n");
    json_settings();
    printf("  \"host\": {\"hostname\": ");
    json_str(h->hostname);
    printf(", \"kernel\": ");
    json_str(h->kernel);
    printf(", \"cpus_online\": %ld, \"cpus_usable\": %d", h->cpus_online,
           h->cpus_allowed);
    if (h->shm_ok)
        printf(", \"shm_bytes\": %llu, \"shm_free_bytes\": %llu", h->shm_size,
               h->shm_free);
    else
        printf(", \"shm_bytes\": null, \"shm_free_bytes\": null");
    printf(", \"memlock_bytes\": ");
    json_rlim(h->memlock.rlim_cur);
    printf(", \"memlock_max_bytes\": ");
    json_rlim(h->memlock.rlim_max);
    printf(", \"ptrace_scope\": ");
    if (h->ptrace_scope >= 0)
        printf("%d", h->ptrace_scope);
    else
        printf("null");
    printf(", \"process_vm_writev\": ");
    json_str(h->pvm_plain == 0   ? "usable"
             : h->pvm_named == 0 ? "needs_ptracer"
                                 : "unusable");
    printf("},\n  \"cuda\": {\"visible_devices\": ");
    if (h->cuda_visible)
        json_str(h->cuda_visible);
    else
        printf("null");
    printf(", \"driver\": %s, \"driver_version\": ",
           h->cuda_driver ? "true" : "false");
    if (h->cuda_version > 0)
        printf("%d", h->cuda_version);
    else
        printf("null");
    printf(", \"text\": ");
    json_str(cuda_text(h, buf, sizeof(buf)));
    printf("},\n  \"gpus\": ");
    info_gpu_json();
    printf("\n}\n");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ipcpipe-info [--json] [--help] [--version]\n"
               "Prints the ipcpipe version, every IPCPIPE_* setting (value, "
               "default, whether\nthe environment set it, what it does) and "
               "the host facts that decide which\npaths can run.  Exit "
               "status 2 when a setting holds an invalid value.\n");
}

int main(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--help") == 0 ||
                   strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("ipcpipe-info %s\n", ipcp_version_string());
            return 0;
        } else {
            fprintf(stderr, "ipcpipe-info: unknown argument %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    ipcp_status_t st = ipcp_settings_check();
    if (st != IPCP_OK) {
        fprintf(stderr, "ipcpipe-info: %s: %s\n", ipcp_strerror(st),
                ipcp_last_error());
        return 2;
    }
    host_facts_t h;
    gather(&h);
    if (json) {
        print_unknown_vars(stderr);
        print_json(&h);
    } else {
        print_text(&h);
    }
    return 0;
}
