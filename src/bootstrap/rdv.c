/* The rendezvous directory <base>/ipcpipe-<uid>/<job>, ours alone, and the
 * sockets in it: one file per rank. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bootstrap/boot_int.h"
#include "common/status.h"
#include "common/time.h"
#include "common/util.h"

/* ------------------------------------------------------------------------ */
/* The rendezvous directory                                                  */

static int boot_dir_usable(const char *path)
{
    struct stat st;
    return path != NULL && path[0] == '/' && stat(path, &st) == 0 &&
           S_ISDIR(st.st_mode) && access(path, W_OK | X_OK) == 0;
}

/* Picks the base directory and builds the job directory's path.  Every
 * rank of a job must pick the same base, so the choice depends only on
 * settings and the environment, which launchers pass on unchanged. */
ipcp_status_t boot_build_path(boot_ctx_t *ctx)
{
    const ipcp__boot_params_t *params = ctx->params;
    const char *base = "/tmp", *from = "default";
    const char *xdg = ipcp__env_foreign("XDG_RUNTIME_DIR");
    const char *tmp = ipcp__env_foreign("TMPDIR");

    if (params->dir[0] != '\0') {
        base = params->dir;
        from = "IPCPIPE_DIR";
    } else if (boot_dir_usable(xdg)) {
        base = xdg;
        from = "XDG_RUNTIME_DIR";
    } else if (boot_dir_usable(tmp)) {
        base = tmp;
        from = "TMPDIR";
    }
    size_t bl = strnlen(base, sizeof(ctx->base) - 1);
    while (bl > 1 && base[bl - 1] == '/')
        bl--;
    memcpy(ctx->base, base, bl);
    ctx->base[bl] = '\0';
    int n =
        snprintf(ctx->boot->path, sizeof(ctx->boot->path), "%s%sipcpipe-%u/%s",
                 ctx->base, strcmp(ctx->base, "/") ? "/" : "",
                 (unsigned)getuid(), params->job);
    if (n < 0 || (size_t)n >= sizeof(ctx->boot->path) ||
        strlen(base) >= sizeof(ctx->base))
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_CONFIG,
                          "rendezvous directory under '%s' (from %s) has a "
                          "path too long; choose a shorter IPCPIPE_DIR",
                          base, from);
    IPCP_DEBUG(IPCP_SUB_BOOT, "rendezvous directory %s (base from %s)",
               ctx->boot->path, from);
    return IPCP_OK;
}

/* A directory we use must be ours alone: another user who could write
 * there could put a socket of theirs in place of a rank's and receive its
 * messages and file descriptors. */
static ipcp_status_t boot_check_private(const struct stat *st, const char *path)
{
    unsigned mode = (unsigned)st->st_mode & 07777, me = (unsigned)getuid();
    unsigned owner = (unsigned)st->st_uid;
    if (S_ISLNK(st->st_mode))
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_PERMISSION,
                          "rendezvous directory %s is a symbolic link (owner "
                          "uid %u, mode %04o); refusing to follow it",
                          path, owner, mode);
    if (!S_ISDIR(st->st_mode))
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_PERMISSION,
                          "rendezvous directory %s is not a directory (owner "
                          "uid %u, mode %04o)",
                          path, owner, mode);
    if (owner != me)
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_PERMISSION,
                          "rendezvous directory %s belongs to uid %u (mode "
                          "%04o), not to us (uid %u); refusing to use it",
                          path, owner, mode, me);
    if (mode & 077)
        return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_PERMISSION,
                          "rendezvous directory %s (owner uid %u) has mode "
                          "%04o: group or others can enter it; expected 0700 "
                          "(chmod 700 or remove it)",
                          path, owner, mode);
    return IPCP_OK;
}

/* Creates name under pfd with mode 0700, or accepts the one there if it is
 * private to us, and opens it.  Several ranks do this at once, so EEXIST
 * is normal. */
static ipcp_status_t boot_private_dir(int pfd, const char *name,
                                      const char *path, int *out)
{
    struct stat st;
    ipcp_status_t status;
    for (int attempt = 0;; attempt++) {
        if (mkdirat(pfd, name, 0700) == 0) {
            /* The umask may have removed owner bits from the new mode. */
            if (fchmodat(pfd, name, 0700, 0) != 0)
                return boot_errno_fail(IPCP_ERR_SYSTEM, errno,
                                       "cannot set mode 0700 on", path);
            IPCP_DEBUG(IPCP_SUB_BOOT, "created %s", path);
        } else if (errno != EEXIST) {
            return boot_errno_fail(IPCP_ERR_SYSTEM, errno,
                                   "cannot create rendezvous directory", path);
        }
        if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            break;
        /* An earlier run of the same job may have removed the directory
         * between our mkdir and here: make it again. */
        if (errno != ENOENT || attempt >= 3)
            return boot_errno_fail(IPCP_ERR_SYSTEM, errno, "cannot stat", path);
    }
    status = boot_check_private(&st, path);
    if (status != IPCP_OK)
        return status;
    /* O_NOFOLLOW and a second check on what was opened close the window
     * in which the entry could be replaced after fstatat. */
    int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return boot_errno_fail(IPCP_ERR_SYSTEM, errno,
                               "cannot open rendezvous directory", path);
    if (fstat(fd, &st) != 0) {
        status = boot_errno_fail(IPCP_ERR_SYSTEM, errno, "cannot stat", path);
        goto close_fd;
    }
    status = boot_check_private(&st, path);
    if (status != IPCP_OK)
        goto close_fd;
    *out = fd;
    return IPCP_OK;
close_fd:
    close(fd);
    return status;
}

ipcp_status_t boot_make_dirs(boot_ctx_t *ctx)
{
    char upath[IPCP_DIR_MAX + 32], uname[32];
    ipcp_status_t st;

    /* Only a base that the settings name may be missing; it is created
     * (one level) with the same private mode. */
    if (ctx->params->dir[0] != '\0' && mkdir(ctx->base, 0700) == 0)
        IPCP_DEBUG(IPCP_SUB_BOOT, "created %s", ctx->base);
    ctx->basefd = open(ctx->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ctx->basefd < 0)
        return boot_errno_fail(IPCP_ERR_SYSTEM, errno,
                               "cannot open rendezvous base directory",
                               ctx->base);
    snprintf(uname, sizeof(uname), "ipcpipe-%u", (unsigned)getuid());
    snprintf(upath, sizeof(upath), "%s%s%s", ctx->base,
             strcmp(ctx->base, "/") ? "/" : "", uname);
    st = boot_private_dir(ctx->basefd, uname, upath, &ctx->udirfd);
    if (st != IPCP_OK)
        return st;
    return boot_private_dir(ctx->udirfd, ctx->boot->job, ctx->boot->path,
                            &ctx->dirfd);
}

/* ------------------------------------------------------------------------ */
/* Sockets                                                                   */

void boot_sock_name(int rank, char *buf, size_t len)
{
    snprintf(buf, len, "r%d.sock", rank);
}

socklen_t boot_sock_addr(const boot_ctx_t *ctx, int rank,
                         struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/r%d.sock",
                     ctx->boot->path, rank);
    if (n < 0 || (size_t)n >= sizeof(sa->sun_path))
        /* sun_path holds 108 bytes.  A longer path is reached through our
         * descriptor of the directory: /proc/self/fd/N resolves to the
         * directory itself, for bind and connect alike. */
        n = snprintf(sa->sun_path, sizeof(sa->sun_path),
                     "/proc/self/fd/%d/r%d.sock", ctx->dirfd, rank);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
}

int boot_peer_cred(int fd, struct ucred *cr)
{
    socklen_t len = sizeof(*cr);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cr, &len);
}

/* 1 when a process accepts connections on the socket of `rank`. */
static int boot_sock_live(const boot_ctx_t *ctx, int rank)
{
    struct sockaddr_un sa;
    socklen_t len = boot_sock_addr(ctx, rank, &sa);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return 0;
    int live = connect(fd, (struct sockaddr *)&sa, len) == 0 || errno == EAGAIN;
    close(fd);
    return live;
}

ipcp_status_t boot_listen(boot_ctx_t *ctx)
{
    const ipcp__boot_t *boot = ctx->boot;
    struct sockaddr_un sa;
    struct stat st;
    char name[32];

    boot_sock_name(boot->rank, name, sizeof(name));
    if (fstatat(ctx->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_BOOTSTRAP,
                              "%s/%s is not a socket; remove it", boot->path,
                              name);
        if (boot_sock_live(ctx, boot->rank))
            return ipcp__fail(IPCP_LOG_WARN, IPCP_SUB_BOOT, IPCP_ERR_BOOTSTRAP,
                              "another process is already rank %d of job "
                              "'%s' (%s/%s accepts connections)",
                              boot->rank, boot->job, boot->path, name);
        /* The kernel leaves a socket's file behind when the socket closes,
         * so a crashed run of the same job leaves stale ones: replace. */
        if (unlinkat(ctx->dirfd, name, 0) != 0 && errno != ENOENT)
            return boot_errno_fail(IPCP_ERR_SYSTEM, errno,
                                   "cannot remove stale socket in", boot->path);
        IPCP_DEBUG(IPCP_SUB_BOOT, "removed stale %s/%s", boot->path, name);
    }
    /* Non-blocking so that accept never waits past the deadline; accepted
     * sockets do not inherit O_NONBLOCK on Linux. */
    ctx->lfd =
        socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (ctx->lfd < 0)
        return boot_errno_fail(IPCP_ERR_SYSTEM, errno, "socket() for",
                               boot->path);
    socklen_t len = boot_sock_addr(ctx, boot->rank, &sa);
    if (bind(ctx->lfd, (struct sockaddr *)&sa, len) != 0)
        return boot_errno_fail(IPCP_ERR_SYSTEM, errno, "cannot bind socket in",
                               boot->path);
    ctx->bound = 1;
    if (listen(ctx->lfd, ipcp__min(boot->size, SOMAXCONN)) != 0)
        return boot_errno_fail(IPCP_ERR_SYSTEM, errno, "cannot listen in",
                               boot->path);
    return IPCP_OK;
}
