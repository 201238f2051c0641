/* Sealed memfds (common/shm.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/shm.h"
#include "common/status.h"

int ipcp__fsize_ok(uint64_t len)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        len > (uint64_t)rl.rlim_cur) {
        errno = EFBIG;
        return -1;
    }
    return 0;
}

int ipcp__memfd_sealed(const char *name, size_t len)
{
    /* ftruncate past RLIMIT_FSIZE raises SIGXFSZ, whose default action
     * ends the process: the limit is checked first. */
    if (ipcp__fsize_ok(len) != 0)
        return -1;
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)len) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) !=
            0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

ipcp_status_t ipcp__memfd_check(int fd, uint64_t need, int level, int subsys,
                                const char *what)
{
    struct stat sb;
    if (fd < 0)
        return ipcp__fail(level, subsys, IPCP_ERR_BAD_DESCRIPTOR,
                          "no file descriptor came with %s", what);
    if (fstat(fd, &sb) != 0)
        return ipcp__fail(level, subsys, IPCP_ERR_BAD_DESCRIPTOR,
                          "fstat of the fd of %s failed: %s", what,
                          strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return ipcp__fail(level, subsys, IPCP_ERR_BAD_DESCRIPTOR,
                          "the fd of %s is not a memfd", what);
    /* F_GET_SEALS fails on files that cannot carry seals (anything but
     * shmem and hugetlbfs), so a plain file is refused here too. */
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
        return ipcp__fail(level, subsys, IPCP_ERR_BAD_DESCRIPTOR,
                          "the fd of %s is not a sealed memfd (sealed "
                          "against shrinking)",
                          what);
    if ((uint64_t)sb.st_size < need)
        return ipcp__fail(level, subsys, IPCP_ERR_BAD_DESCRIPTOR,
                          "the memfd of %s holds %lld bytes, the export "
                          "needs %llu",
                          what, (long long)sb.st_size,
                          (unsigned long long)need);
    return IPCP_OK;
}

ipcp_status_t ipcp__eventfd_check(int fd, int level, int subsys,
                                  const char *what)
{
    char path[64], target[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = fd >= 0 ? readlink(path, target, sizeof(target) - 1) : -1;
    if (n < 0)
        return ipcp__fail(level, subsys, IPCP_ERR_BAD_DESCRIPTOR,
                          "the wake fd of %s cannot be inspected: %s", what,
                          fd < 0 ? "none came" : strerror(errno));
    target[n] = '\0';
    if (strcmp(target, "anon_inode:[eventfd]") != 0)
        return ipcp__fail(level, subsys, IPCP_ERR_BAD_DESCRIPTOR,
                          "the wake fd of %s is %s, not an eventfd", what,
                          target);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK)))
        return ipcp__fail(level, subsys, IPCP_ERR_BAD_DESCRIPTOR,
                          "cannot make the wake fd of %s non-blocking: %s",
                          what, strerror(errno));
    return IPCP_OK;
}
