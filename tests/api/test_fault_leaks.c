/* test_fault's accounting of what a survivor leaves behind (descriptors,
 * mappings, /dev/shm entries, the rendezvous directory), and the files it
 * shares with the victim beside the job (test_fault_int.h). */
#include "apitest.h"
#include "test_fault_int.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- What a survivor leaves behind ----------------------------------------
 */

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        T_FAIL("opendir /proc/self/fd: %s", strerror(errno));
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* Lines of /proc/self/maps that name a memfd of the library. */
static int count_lib_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;
    if (!f)
        T_FAIL("fopen /proc/self/maps: %s", strerror(errno));
    while (fgets(line, sizeof line, f))
        n += strstr(line, "memfd:ipcpipe") != NULL;
    fclose(f);
    return n;
}

static void shm_snapshot(shm_list_t *l)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    l->n = 0;
    if (!d)
        return; /* no /dev/shm: nothing can be left there */
    while ((e = readdir(d)) && l->n < SHM_MAX)
        snprintf(l->names[l->n++], sizeof l->names[0], "%s", e->d_name);
    closedir(d);
}

/* Entries of /dev/shm now that were not there before and are ours. */
static void shm_check(const shm_list_t *before, const char *when)
{
    static shm_list_t now;
    shm_snapshot(&now);
    for (int i = 0; i < now.n; i++) {
        int old = 0;
        for (int j = 0; j < before->n && !old; j++)
            old = strcmp(now.names[i], before->names[j]) == 0;
        char path[300];
        struct stat st;
        snprintf(path, sizeof path, "/dev/shm/%s", now.names[i]);
        if (!old && stat(path, &st) == 0 && st.st_uid == getuid())
            T_FAIL("%s: /dev/shm/%s was left behind", when, now.names[i]);
    }
}

/* The job's rendezvous directory (IPCPIPE_DIR/ipcpipe-<uid>/<job>) must be
 * gone, and the per-user directory empty. */
static void rendezvous_check(const cfg_t *c, const char *job, const char *when)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/ipcpipe-%u/%s", c->dir, (unsigned)getuid(),
             job);
    if (stat(path, &st) == 0)
        T_FAIL("%s: the rendezvous directory %s was left behind", when, path);
    snprintf(path, sizeof path, "%s/ipcpipe-%u", c->dir, (unsigned)getuid());
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            T_FAIL("%s: %s/%s was left behind", when, path, e->d_name);
    if (d)
        closedir(d);
}

/* A GPU driver, once initialised, keeps its device files open for the
 * life of the process (13 descriptors on an H200 machine): a job of one
 * rank first, so that they are there before the count. */
static void warm_up_devices(void)
{
    ipcp_comm_params_t p;
    ipcp_comm_t *comm = NULL;
    char job[64];
    void *dev = NULL;
    ipcp_alloc_params_t a;
    ipcp_comm_params_init(&p);
    p.rank = 0;
    p.size = 1;
    snprintf(job, sizeof job, "fault-warm-%d", (int)getpid());
    p.job_id = job;
    T_OK(ipcp_init(&p, &comm));
    ipcp_alloc_params_init(&a);
    a.type = IPCP_MEM_CUDA;
    if (ipcp_mem_alloc(comm, 4096, &a, &dev) == IPCP_OK)
        T_OK(ipcp_mem_free(comm, dev));
    T_OK(ipcp_finalize(comm));
}

void leaks_before(leaks_t *l)
{
    warm_up_devices();
    l->fds = count_fds();
    l->maps = count_lib_maps();
    shm_snapshot(&l->shm);
}

void leaks_check(const cfg_t *c, const leaks_t *l, const char *job,
                 const char *when)
{
    int fds = count_fds(), maps = count_lib_maps();
    if (fds != l->fds)
        T_FAIL("%s: %d descriptors open, %d before ipcp_init", when, fds,
               l->fds);
    if (maps != l->maps)
        T_FAIL("%s: %d mappings of the library's memfds, %d before", when, maps,
               l->maps);
    shm_check(&l->shm, when);
    rendezvous_check(c, job, when);
}

/* ---- Files beside the job: pids and the region's descriptor ------------- */

void file_write(const cfg_t *c, const char *name, const void *p, size_t len)
{
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(p, 1, len, f) != len || fclose(f) != 0 ||
        rename(tmp, path) != 0)
        T_FAIL("cannot write %s: %s", path, strerror(errno));
}

size_t file_read(const cfg_t *c, const char *name, void *p, size_t cap)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        T_FAIL("cannot read %s: %s", path, strerror(errno));
    size_t n = fread(p, 1, cap, f);
    fclose(f);
    return n;
}
