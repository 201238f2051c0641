/* Striping calibration cache (see stripe.h).  The file is text, one line
 * per pair of GPUs, so that a person can read it:
 *
 *   ipcpipe stripe calibration 3
 *   host <machine id>
 *   pair <src uuid> <dst uuid> layout <ring|driven> driver <n>
 *        share <f> at <bytes> share <f> at <bytes> bidir <f> min <bytes>
 *        direct <GB/s> staged <GB/s> striped <GB/s> time <unix seconds>
 *                                                              (one line)
 *
 * (the staged share at two sizes, then both ways at once at the second).
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/status.h"
#include "common/util.h"
#include "engine/stripe.h"

#define IPCP_STRIPE_MAGIC      "ipcpipe stripe calibration 3"
#define IPCP_STRIPE_MAX_PAIRS  256
#define IPCP_STRIPE_LOCK_TRIES 1000 /* of 10 ms */

/* The file's entries as read, for loads and stores alike (too large for a
 * progress thread's stack), under one lock. */
static ipcp__stripe_entry_t ipcp__stripe_entries[IPCP_STRIPE_MAX_PAIRS];
static pthread_mutex_t ipcp__stripe_file_lock = PTHREAD_MUTEX_INITIALIZER;
/* The staged part is cut on this boundary (the ring's copies stay
 * aligned), except under a fixed share, which tests uneven splits. */
#define IPCP_STRIPE_ALIGN ((uint64_t)64 << 10)

/* The default file is named after the machine, so that machines sharing
 * a home directory (NFS) keep a file each instead of wiping each other's. */
void ipcp__stripe_cache_path(const ipcp__config_t *cfg, char *buf, size_t len)
{
    const char *base;
    char host[IPCP_STRIPE_HOST_MAX];
    buf[0] = '\0';
    if (strcmp(cfg->stripe_cache, "off") == 0)
        return;
    if (cfg->stripe_cache[0]) {
        snprintf(buf, len, "%s", cfg->stripe_cache);
        return;
    }
    ipcp__stripe_host_id(host, sizeof(host));
    if ((base = ipcp__env_foreign("XDG_CACHE_HOME")) && base[0] == '/')
        snprintf(buf, len, "%s/ipcpipe/stripe-%.40s.txt", base, host);
    else if ((base = ipcp__env_foreign("HOME")) && base[0] == '/')
        snprintf(buf, len, "%s/.cache/ipcpipe/stripe-%.40s.txt", base, host);
}

void ipcp__stripe_host_id(char *buf, size_t len)
{
    FILE *f = fopen("/etc/machine-id", "r");
    buf[0] = '\0';
    if (f) {
        if (!fgets(buf, (int)len, f))
            buf[0] = '\0';
        fclose(f);
        buf[strcspn(buf, " \t\r\n")] = '\0';
    }
    if (!buf[0] && gethostname(buf, len) != 0)
        snprintf(buf, len, "unknown");
    buf[len - 1] = '\0';
    buf[strcspn(buf, " \t\r\n")] = '\0';
    if (!buf[0])
        snprintf(buf, len, "unknown");
}

/* A token of the file: non-empty, no white space, shorter than len. */
static int ipcp__stripe_word_ok(const char *w, size_t len)
{
    return w[0] && strlen(w) < len && !strpbrk(w, " \t\r\n");
}

static int ipcp__stripe_parse_pair(const char *line, ipcp__stripe_entry_t *e)
{
    char src[IPCP_STRIPE_UUID_MAX], dst[IPCP_STRIPE_UUID_MAX], lay[8];
    unsigned long long min, at, at2;
    long long t;
    int n = -1;
    memset(e, 0, sizeof(*e));
    if (sscanf(line,
               "pair %47s %47s layout %7s driver %d share %lf at %llu share "
               "%lf at %llu bidir %lf min %llu direct %lf staged %lf "
               "striped %lf time %lld%n",
               src, dst, lay, &e->driver, &e->share, &at, &e->share_large, &at2,
               &e->share_bidir, &min, &e->direct_gbs, &e->staged_gbs,
               &e->striped_gbs, &t, &n) != 14 ||
        n < 0)
        return -1;
    if (strcmp(lay, "ring") == 0)
        e->layout = IPCP_STRIPE_RING;
    else if (strcmp(lay, "driven") == 0)
        e->layout = IPCP_STRIPE_DRIVEN;
    else
        return -1;
    if (line[n] != '\0' && line[n] != '\n')
        return -1;
    if (!(e->share >= 0 && e->share <= 0.9) || e->driver <= 0 ||
        !(e->share_large >= 0 && e->share_large <= 0.9) ||
        !(e->share_bidir >= 0 && e->share_bidir <= 0.9) ||
        !(e->direct_gbs >= 0) || !(e->staged_gbs >= 0) ||
        !(e->striped_gbs >= 0) || (e->share > 0 && (min == 0 || at == 0)) ||
        (e->share_large > 0 && at2 <= at))
        return -1;
    e->size = at;
    e->size_large = at2;
    memcpy(e->src, src, sizeof(src));
    memcpy(e->dst, dst, sizeof(dst));
    e->min_size = min;
    e->time = t;
    return 0;
}

static int ipcp__stripe_same_pair(const ipcp__stripe_entry_t *a,
                                  const ipcp__stripe_entry_t *b)
{
    return strcmp(a->src, b->src) == 0 && strcmp(a->dst, b->dst) == 0 &&
           a->layout == b->layout;
}

const char *ipcp__stripe_layout_name(int layout)
{
    return layout == IPCP_STRIPE_DRIVEN ? "driven" : "ring";
}

/* One `pair` line, as ipcp__stripe_parse_pair reads it. */
static void ipcp__stripe_write_pair(FILE *f, const ipcp__stripe_entry_t *e)
{
    fprintf(f,
            "pair %s %s layout %s driver %d share %.4f at %llu share %.4f "
            "at %llu bidir %.4f min %llu direct %.1f staged %.1f striped "
            "%.1f time %lld\n",
            e->src, e->dst, ipcp__stripe_layout_name(e->layout), e->driver,
            e->share, (unsigned long long)e->size, e->share_large,
            (unsigned long long)e->size_large, e->share_bidir,
            (unsigned long long)e->min_size, e->direct_gbs, e->staged_gbs,
            e->striped_gbs, (long long)e->time);
}

/* Reads the whole file: 0 and the entries, or -1 with why (the file
 * missing: -1 with *missing = 1). */
static int ipcp__stripe_read(const char *path, char *host, size_t hostlen,
                             ipcp__stripe_entry_t *es, int *n, int *missing,
                             char *why, size_t whylen)
{
    char line[512];
    int lineno = 0;
    struct stat sb;
    /* Not blocking: a FIFO put there would hold the open until a writer
     * came; only a regular file is read. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    FILE *f = NULL;
    *n = 0;
    *missing = 0;
    if (fd < 0) {
        *missing = errno == ENOENT;
        snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || !(f = fdopen(fd, "r"))) {
        snprintf(why, whylen, "%s is not a regular file", path);
        close(fd);
        return -1;
    }
    while (fgets(line, sizeof(line), f)) {
        size_t l = strlen(line);
        lineno++;
        if (l == sizeof(line) - 1 && line[l - 1] != '\n')
            goto bad;
        if (lineno == 1) {
            if (strcmp(line, IPCP_STRIPE_MAGIC "\n") != 0)
                goto bad;
        } else if (lineno == 2) {
            if (strncmp(line, "host ", 5) != 0)
                goto bad;
            line[strcspn(line, "\n")] = '\0';
            if (!ipcp__stripe_word_ok(line + 5, hostlen))
                goto bad;
            snprintf(host, hostlen, "%s", line + 5);
        } else {
            if (*n == IPCP_STRIPE_MAX_PAIRS ||
                ipcp__stripe_parse_pair(line, &es[*n]) != 0)
                goto bad;
            (*n)++;
        }
    }
    if (ferror(f) || lineno < 2) {
        fclose(f);
        snprintf(why, whylen,
                 "%s is not a striping calibration file of this "
                 "version (it ends after %d line%s)",
                 path, lineno, lineno == 1 ? "" : "s");
        return -1;
    }
    fclose(f);
    return 0;
bad:
    fclose(f);
    snprintf(why, whylen,
             "%s is not a striping calibration file of this "
             "version (line %d does not parse)",
             path, lineno);
    return -1;
}

ipcp__stripe_lookup_t ipcp__stripe_cache_load(const char *path,
                                              const char *host,
                                              const ipcp__stripe_entry_t *key,
                                              ipcp__stripe_entry_t *out,
                                              char *why, size_t whylen)
{
    char fhost[IPCP_STRIPE_HOST_MAX];
    int n, missing;
    ipcp__stripe_lookup_t r = IPCP_STRIPE_MISS;

    if (!path[0]) {
        snprintf(why, whylen,
                 "no calibration file (IPCPIPE_STRIPE_CACHE=off "
                 "or no home directory)");
        return IPCP_STRIPE_MISS;
    }
    const ipcp__stripe_entry_t *es = ipcp__stripe_entries;
    pthread_mutex_lock(&ipcp__stripe_file_lock);
    if (ipcp__stripe_read(path, fhost, sizeof(fhost), ipcp__stripe_entries, &n,
                          &missing, why, whylen) != 0) {
        pthread_mutex_unlock(&ipcp__stripe_file_lock);
        return missing ? IPCP_STRIPE_MISS : IPCP_STRIPE_CORRUPT;
    }
    if (strcmp(fhost, host) != 0) {
        snprintf(why, whylen,
                 "%s was written on another machine (host %s, "
                 "this is %s)",
                 path, fhost, host);
        r = IPCP_STRIPE_FOREIGN;
    } else {
        snprintf(why, whylen,
                 "%s has no entry for GPU %s -> GPU %s (%s "
                 "layout)",
                 path, key->src, key->dst,
                 ipcp__stripe_layout_name(key->layout));
        for (int i = 0; i < n; i++) {
            if (!ipcp__stripe_same_pair(&es[i], key))
                continue;
            if (es[i].driver != key->driver) {
                snprintf(why, whylen,
                         "%s was measured under driver %d, this "
                         "is %d",
                         path, es[i].driver, key->driver);
                r = IPCP_STRIPE_STALE;
                continue;
            }
            *out = es[i];
            r = IPCP_STRIPE_HIT;
            break;
        }
    }
    pthread_mutex_unlock(&ipcp__stripe_file_lock);
    return r;
}

static int ipcp__stripe_mkdirs(const char *path)
{
    char dir[IPCP_DIR_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(dir, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

int ipcp__stripe_cache_store(const char *path, const char *host,
                             const ipcp__stripe_entry_t *e, char *why,
                             size_t whylen)
{
    char fhost[IPCP_STRIPE_HOST_MAX], tmp[IPCP_DIR_MAX + 32], err[256];
    int n = 0, missing, rc = -1;

    if (!path[0]) {
        snprintf(why, whylen, "no calibration file to write");
        return -1;
    }
    if (ipcp__stripe_mkdirs(path) != 0) {
        snprintf(why, whylen, "cannot create the directory of %s: %s", path,
                 strerror(errno));
        return -1;
    }
    const ipcp__stripe_entry_t *es = ipcp__stripe_entries;
    pthread_mutex_lock(&ipcp__stripe_file_lock);
    /* Entries of other pairs survive only from a file we trust. */
    if (ipcp__stripe_read(path, fhost, sizeof(fhost), ipcp__stripe_entries, &n,
                          &missing, err, sizeof(err)) != 0 ||
        strcmp(fhost, host) != 0)
        n = 0;
    snprintf(tmp, sizeof(tmp), "%s.%.40s.%d.tmp", path, host, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(why, whylen, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    fprintf(f, "%s\nhost %s\n", IPCP_STRIPE_MAGIC, host);
    for (int i = 0; i < n; i++)
        if (!ipcp__stripe_same_pair(&es[i], e))
            ipcp__stripe_write_pair(f, &es[i]);
    ipcp__stripe_write_pair(f, e);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        snprintf(why, whylen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    pthread_mutex_unlock(&ipcp__stripe_file_lock);
    return rc;
}

uint64_t ipcp__stripe_bytes(uint64_t len, double share, uint64_t min_size)
{
    /* A share from a calibration file is as good as the file: its points
     * may put the fit at NaN or scale a both-ways share past 1, and
     * converting such a product to an integer is undefined. */
    if (!(share > 0 && share < 1) || len < min_size || len < 2)
        return 0;
    uint64_t s = (uint64_t)((double)len * share);
    if (min_size) /* measured: keep the ring's copies aligned */
        s -= s % IPCP_STRIPE_ALIGN;
    return s < len ? s : 0;
}

void ipcp__adapt_init(ipcp__adapt_t *a)
{
    *a = (ipcp__adapt_t){.f = 1};
}

unsigned ipcp__adapt_class(uint64_t len)
{
    unsigned c = 0;
    for (uint64_t l = IPCP_ADAPT_CLASS0;
         l * 2 <= len && c + 1 < IPCP_ADAPT_CLASSES; l *= 2)
        c++;
    return c;
}

double ipcp__adapt_next(ipcp__adapt_t *a)
{
    if (a->f > 0 || a->probing)
        return a->f;
    if (a->wait > 1) {
        a->wait--;
        return 0;
    }
    a->probing = 1;
    return IPCP_ADAPT_MIN;
}

double ipcp__adapt_learn(ipcp__adapt_t *a, double td, double ts)
{
    double r = td > 0 && ts > 0 ? ts / td : 1,
           f = a->probing ? IPCP_ADAPT_MIN : a->f;
    if (!a->learned++) /* the class's first transfer pays first uses */
        return a->f;
    a->probing = 0;
    int early = r < 1 - IPCP_ADAPT_SLACK;
    a->early = early ? a->early + 1 : 0;
    if (f == 1 && r > 1 + IPCP_ADAPT_LATE)
        f /= r > 1 + IPCP_ADAPT_FAR ? r * r : r;
    else if (f != 1 && r > 1 + IPCP_ADAPT_SLACK)
        f /= r * r; /* twice the step: a late end costs, an early one not */
    else if (early && a->early >= IPCP_ADAPT_STREAK) {
        /* Up to the calibration by at most a quarter; past it only while
         * the staged part ends well ahead, in small steps (the staged
         * part's cost climbs steeply past the best share). */
        double up = f < 1                      ? IPCP_ADAPT_GROW
                    : r < 1 - IPCP_ADAPT_AHEAD ? IPCP_ADAPT_GROW_ABOVE
                                               : 1;
        double g = 1 / r < up ? 1 / r : up;
        f = f < 1 && f * g > 1 ? 1 : f * g;
        a->early = 0;
    }
    if (f > IPCP_ADAPT_MAX)
        f = IPCP_ADAPT_MAX;
    if (f >= IPCP_ADAPT_MIN) {
        a->f = f;
        a->backoff = 0;
    } else { /* off; the next probe after twice the last wait */
        uint32_t b = a->backoff ? a->backoff * 2 : IPCP_ADAPT_PROBE;
        a->backoff = b < IPCP_ADAPT_PROBE_MAX ? b : IPCP_ADAPT_PROBE_MAX;
        a->wait = a->backoff;
        a->f = 0;
        a->early = 0;
    }
    return a->f;
}

void ipcp__adapt_forget(ipcp__adapt_t *a)
{
    if (!a->probing)
        return;
    a->probing = 0;
    a->wait = a->backoff ? a->backoff : IPCP_ADAPT_PROBE;
}

double ipcp__stripe_share(const ipcp__stripe_entry_t *e, uint64_t len,
                          int bidir)
{
    double s2 = e->share_large;
    double s = ipcp__stripe_fit(e->share, e->size, s2, e->size_large, len);
    if (bidir)
        s = s2 > 0 ? s * e->share_bidir / s2 : 0;
    return s;
}

/* A lock on the file's neighbour, so that two processes do not measure at
 * once (each would see the other's copies); -1 when there is no file. */
static int ipcp__stripe_lock(const char *path)
{
    char lk[IPCP_DIR_MAX + 8];
    if (!path[0] || ipcp__stripe_mkdirs(path) != 0)
        return -1;
    snprintf(lk, sizeof(lk), "%s.lock", path);
    int fd = open(lk, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    /* A measurement takes about a second; a holder stuck far longer (a
     * stopped process) is not waited for: measure without the lock. */
    for (int i = 0; i < IPCP_STRIPE_LOCK_TRIES; i++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        if (errno != EWOULDBLOCK && errno != EINTR)
            break;
        usleep(10000);
    }
    IPCP_WARN(IPCP_SUB_ENGINE, "%s stayed locked; measuring without it", lk);
    close(fd);
    return -1;
}

ipcp_status_t ipcp__stripe_tune(const ipcp__config_t *cfg,
                                const ipcp__backend_ops_t *ops,
                                ipcp__backend_t *be, int src, int dst,
                                ipcp__tune_t mode, ipcp__stripe_entry_t *out)
{
    char path[IPCP_DIR_MAX], host[IPCP_STRIPE_HOST_MAX], why[400];
    ipcp__stripe_entry_t key;
    ipcp__stripe_cal_t cal;

    if (!ops->device_ident || !ops->stripe_calibrate)
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_ENGINE, IPCP_ERR_UNSUPPORTED,
                          "the %s backend cannot measure striping", ops->name);
    memset(&key, 0, sizeof(key));
    key.layout = ipcp__stripe_layout(cfg);
    if (ops->device_ident(be, src, key.src, sizeof(key.src), &key.driver) ||
        ops->device_ident(be, dst, key.dst, sizeof(key.dst), &key.driver))
        return ipcp__fail(IPCP_LOG_INFO, IPCP_SUB_ENGINE, IPCP_ERR_UNSUPPORTED,
                          "cannot identify GPU %d or %d", src, dst);
    ipcp__stripe_cache_path(cfg, path, sizeof(path));
    ipcp__stripe_host_id(host, sizeof(host));
    /* Reading needs no lock: the file is replaced whole (a rename). */
    int lock = mode == IPCP_TUNE_CACHED ? -1 : ipcp__stripe_lock(path);
    ipcp__stripe_lookup_t r =
        ipcp__stripe_cache_load(path, host, &key, out, why, sizeof(why));
    if (r == IPCP_STRIPE_HIT && mode != IPCP_TUNE_FORCE) {
        if (lock >= 0)
            close(lock);
        return IPCP_OK;
    }
    if (r != IPCP_STRIPE_HIT && r != IPCP_STRIPE_MISS)
        IPCP_WARN(IPCP_SUB_ENGINE, "striping calibration ignored: %s", why);
    if (mode == IPCP_TUNE_CACHED)
        return ipcp__fail(IPCP_LOG_DEBUG, IPCP_SUB_ENGINE, IPCP_ERR_STATE,
                          "GPU %d -> GPU %d not measured yet", src, dst);
    IPCP_INFO(IPCP_SUB_ENGINE,
              "measuring striping from GPU %d to GPU %d, "
              "%s layout (once per pair of GPUs%s%s)",
              src, dst, ipcp__stripe_layout_name(key.layout),
              path[0] ? "; kept in " : "", path);
    ipcp_status_t st = ops->stripe_calibrate(be, src, dst, key.layout, &cal);
    if (st != IPCP_OK) {
        if (lock >= 0)
            close(lock);
        return st;
    }
    *out = key;
    out->share = cal.share;
    out->size = cal.size;
    out->share_large = cal.share > 0 ? cal.share_large : 0;
    out->size_large = cal.size_large;
    out->share_bidir = cal.share > 0 ? cal.share_bidir : 0;
    out->min_size = cal.share > 0 ? cal.min_size : 0;
    out->direct_gbs = cal.direct_gbs;
    out->staged_gbs = cal.staged_gbs;
    out->striped_gbs = cal.striped_gbs;
    out->time = (int64_t)time(NULL);
    IPCP_INFO(IPCP_SUB_ENGINE,
              "striping GPU %d -> GPU %d: %s (at %llu MiB: "
              "direct %.1f, staged %.1f, striped %.1f GB/s at %.0f%%; at "
              "%llu MiB: direct %.1f, striped %.1f at %.0f%%; both ways: "
              "direct %.1f, striped %.1f at %.0f%%)",
              src, dst, cal.share > 0 ? "on" : "off",
              (unsigned long long)(cal.size >> 20), cal.direct_gbs,
              cal.staged_gbs, cal.striped_gbs, cal.share * 100,
              (unsigned long long)(cal.size_large >> 20), cal.direct_large_gbs,
              cal.striped_large_gbs, cal.share_large * 100,
              cal.bidir_direct_gbs, cal.bidir_gbs, cal.share_bidir * 100);
    if (path[0] &&
        ipcp__stripe_cache_store(path, host, out, why, sizeof(why)) != 0)
        IPCP_WARN(IPCP_SUB_ENGINE, "striping calibration not kept: %s", why);
    if (lock >= 0)
        close(lock);
    return IPCP_OK;
}
