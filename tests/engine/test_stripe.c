/* The striping calibration file and the decision built on it
 * (engine/stripe.c), through a fake backend whose measurements are
 * counted: a trusted entry is used without measuring; a missing, corrupt,
 * foreign or stale one is measured again (the last three with a warning
 * that says why) and the file rewritten; the split is what the share and
 * the smallest size say. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "engine/engine.h"
#include "engine/stripe.h"
#include "testutil.h"

static char dir[64], file[128];
static int calibrations;

/* ---- A backend that measures nothing ----------------------------------- */

static int fake_ident(ipcp__backend_t *be, int device, char *uuid, size_t len,
                      int *driver)
{
    (void)be;
    if (device > 1)
        return -1;
    snprintf(uuid, len, "GPU-fake-%d", device);
    *driver = 13000;
    return 0;
}

static int cal_layout = -1; /* the layout of the last measurement */
static int tune_drive = IPCP_DRIVE_AUTO; /* IPCPIPE_DRIVE of tune_captured */

static ipcp_status_t fake_calibrate(ipcp__backend_t *be, int src, int dst,
                                    int layout, ipcp__stripe_cal_t *out)
{
    (void)be;
    (void)src;
    (void)dst;
    calibrations++;
    cal_layout = layout;
    memset(out, 0, sizeof(*out));
    out->share = 0.1;
    out->min_size = (uint64_t)64 << 20;
    out->size = (uint64_t)256 << 20;
    out->share_large = 0.12;
    out->size_large = (uint64_t)1 << 30;
    out->share_bidir = 0.07;
    out->direct_gbs = 396.0;
    out->staged_gbs = 55.0;
    out->striped_gbs = 436.5;
    return IPCP_OK;
}

static const ipcp__backend_ops_t fake_ops = {
    .name = "fake",
    .type = IPCP_MEM_CUDA,
    .device_ident = fake_ident,
    .stripe_calibrate = fake_calibrate,
};

/* ---- Helpers ------------------------------------------------------------- */

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/ipcpipe-stripe-test.XXXXXX");
    if (!mkdtemp(dir))
        T_FAIL("mkdtemp: %s", strerror(errno));
    /* A directory that does not exist yet: the library creates it. */
    snprintf(file, sizeof(file), "%s/cache/stripe.txt", dir);
}

static void teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static void write_file(const char *text)
{
    char sub[300];
    snprintf(sub, sizeof(sub), "%s/cache", dir);
    mkdir(sub, 0700);
    FILE *f = fopen(file, "w");
    T_CHECK(f != NULL);
    fputs(text, f);
    T_CHECK(fclose(f) == 0);
}

/* The text of path (at most len - 1 bytes) in buf. */
static char *slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    T_CHECK(f != NULL);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static char *read_file(void)
{
    static char buf[8192];
    return slurp(file, buf, sizeof(buf));
}

static ipcp__config_t cfg_with_file(void)
{
    ipcp__config_t c;
    memset(&c, 0, sizeof(c));
    c.log_level = IPCP_LOG_WARN;
    snprintf(c.stripe_cache, sizeof(c.stripe_cache), "%s", file);
    return c;
}

static ipcp__stripe_entry_t key(int src, int dst, int driver)
{
    ipcp__stripe_entry_t k;
    memset(&k, 0, sizeof(k));
    snprintf(k.src, sizeof(k.src), "GPU-fake-%d", src);
    snprintf(k.dst, sizeof(k.dst), "GPU-fake-%d", dst);
    k.layout = IPCP_STRIPE_DRIVEN; /* IPCPIPE_DRIVE's default */
    k.driver = driver;
    return k;
}

static ipcp__stripe_lookup_t load(const ipcp__stripe_entry_t *k,
                                  ipcp__stripe_entry_t *out, char *why)
{
    char host[IPCP_STRIPE_HOST_MAX];
    ipcp__stripe_host_id(host, sizeof(host));
    return ipcp__stripe_cache_load(file, host, k, out, why, 400);
}

/* Runs ipcp__stripe_tune(0 -> 1) in mode with stderr captured; *st gets
 * its status.  Returns what the library printed. */
static const char *tune_run(ipcp__tune_t mode, ipcp__stripe_entry_t *e,
                            ipcp_status_t *st)
{
    static char log[4096];
    char logpath[300];
    ipcp__config_t c = cfg_with_file();
    c.drive = tune_drive;
    snprintf(logpath, sizeof(logpath), "%s/stderr.txt", dir);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    T_CHECK(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    *st = ipcp__stripe_tune(&c, &fake_ops, NULL, 0, 1, mode, e);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    return slurp(logpath, log, sizeof(log));
}

/* The same, which must succeed. */
static const char *tune_captured(ipcp__tune_t mode, ipcp__stripe_entry_t *e)
{
    ipcp_status_t st;
    const char *log = tune_run(mode, e, &st);
    T_OK(st);
    return log;
}

static void expect_entry(const ipcp__stripe_entry_t *e)
{
    T_EQ_STR(e->src, "GPU-fake-0");
    T_EQ_STR(e->dst, "GPU-fake-1");
    T_EQ_INT(e->driver, 13000);
    T_CHECK(e->share > 0.0999 && e->share < 0.1001);
    T_EQ_U64(e->min_size, (uint64_t)64 << 20);
    T_EQ_U64(e->size, (uint64_t)256 << 20);
    T_CHECK(e->share_large > 0.1199 && e->share_large < 0.1201);
    T_EQ_U64(e->size_large, (uint64_t)1 << 30);
    T_CHECK(e->share_bidir > 0.0699 && e->share_bidir < 0.0701);
    T_CHECK(e->striped_gbs > 436.4 && e->striped_gbs < 436.6);
}

/* ---- Cases --------------------------------------------------------------- */

/* No file: measured once, written; the second call reads it back. */
static void case_measure_then_hit(void)
{
    ipcp__stripe_entry_t e, k = key(0, 1, 13000), got;
    char why[400];
    T_EQ_INT(load(&k, &got, why), IPCP_STRIPE_MISS);
    const char *log = tune_captured(IPCP_TUNE_AUTO, &e);
    T_EQ_INT(calibrations, 1);
    T_CHECK(strstr(log, " warn ") == NULL);
    expect_entry(&e);
    T_EQ_INT(load(&k, &got, why), IPCP_STRIPE_HIT);
    expect_entry(&got);
    tune_captured(IPCP_TUNE_AUTO, &e);
    T_EQ_INT(calibrations, 1); /* trusted: not measured again */
    expect_entry(&e);
    tune_captured(IPCP_TUNE_FORCE, &e); /* --tune measures anyway */
    T_EQ_INT(calibrations, 2);
}

/* Read only (while a user's stream waits on a transfer): a missing entry
 * is IPCP_ERR_STATE with nothing measured or written, a damaged file is
 * warned about and left as it is, a trusted entry is used. */
static void case_cached_only(void)
{
    ipcp__stripe_entry_t e, k = key(0, 1, 13000);
    ipcp_status_t st;
    char why[400];
    int before = calibrations;
    const char *log = tune_run(IPCP_TUNE_CACHED, &e, &st);
    T_STATUS(st, IPCP_ERR_STATE);
    T_MSG_HAS("GPU 0 -> GPU 1 not measured yet");
    T_EQ_INT(calibrations, before);
    T_CHECK(strstr(log, " warn ") == NULL);
    T_EQ_INT(load(&k, &e, why), IPCP_STRIPE_MISS);
    T_CHECK(access(file, F_OK) != 0);

    write_file("garbage\n");
    log = tune_run(IPCP_TUNE_CACHED, &e, &st);
    T_STATUS(st, IPCP_ERR_STATE);
    T_EQ_INT(calibrations, before);
    if (!strstr(log, "calibration ignored") || !strstr(log, file))
        T_FAIL("no warning about the damaged file in \"%s\"", log);
    T_EQ_STR(read_file(), "garbage\n");

    unlink(file);
    tune_captured(IPCP_TUNE_AUTO, &e);
    T_EQ_INT(calibrations, before + 1);
    memset(&e, 0, sizeof(e));
    log = tune_run(IPCP_TUNE_CACHED, &e, &st);
    T_OK(st);
    T_EQ_INT(calibrations, before + 1);
    expect_entry(&e);
}

/* Every kind of damage: ignored with a warning naming the file, measured
 * again, and the file rewritten whole. */
static void case_corrupt(void)
{
#define V3                                                                     \
    "ipcpipe stripe calibration 3\nhost %s\npair GPU-fake-0 GPU-fake-1 "       \
    "layout driven "
    static const char *const bad[] = {
        "",
        "garbage\n",
        /* another version of the file, valid as that version */
        "ipcpipe stripe calibration 4\nhost %s\n",
        "ipcpipe stripe calibration 2\nhost %s\npair GPU-fake-0 GPU-fake-1 "
        "driver 13000 share 0.1 at 268435456 share 0.1 at 1073741824 "
        "bidir 0.07 min 67108864 direct 1 staged 1 striped 1 time 0\n",
        /* a layout the file does not know */
        "ipcpipe stripe calibration 3\nhost %s\npair GPU-fake-0 GPU-fake-1 "
        "layout sideways driver 13000 share 0.1 at 268435456 share 0.1 at "
        "1073741824 bidir 0.07 min 67108864 direct 1 staged 1 striped 1 "
        "time 0\n",
        "ipcpipe stripe calibration 1\nhost %s\npair GPU-fake-0 GPU-fake-1 "
        "driver 13000 share 0.1000 min 67108864 direct 1 staged 1 striped 1 "
        "time 0\n",
        "ipcpipe stripe calibration 3\n",
        V3 "driver 13000 share 0.1000 at 268435456 min 67108864\n",
        V3 "driver 13000 share 1.5 at 268435456 share 0.1 at 1073741824 "
           "bidir 0.07 min 67108864 direct 1 staged 1 striped 1 time 0\n",
        V3 "driver 13000 share nan at 268435456 share 0.1 at 1073741824 "
           "bidir 0.07 min 67108864 direct 1 staged 1 striped 1 time 0\n",
        V3 "driver 13000 share 0.1 at 268435456 share 1.5 at 1073741824 "
           "bidir 0.07 min 67108864 direct 1 staged 1 striped 1 time 0\n",
        V3 "driver 13000 share 0.1 at 268435456 share 0.1 at 1073741824 "
           "bidir nan min 67108864 direct 1 staged 1 striped 1 time 0\n",
        /* the larger share measured at a size not larger */
        V3 "driver 13000 share 0.1 at 268435456 share 0.1 at 268435456 "
           "bidir 0.07 min 67108864 direct 1 staged 1 striped 1 time 0\n",
        V3 "driver 13000 share 0.1 at 0 share 0 at 0 bidir 0 min 67108864 "
           "direct 1 staged 1 striped 1 time 0\n",
        V3 "driver 13000 share 0.1 at 268435456 share 0.1 at 1073741824 "
           "bidir 0.07 min 0 direct 1 staged 1 striped 1 time 0\n",
        V3 "driver 13000 share 0.1 at 268435456 share 0.1 at 1073741824 "
           "bidir 0.07 min 67108864 direct 1 staged 1 striped 1 time 0 extra\n",
        "ipcpipe stripe calibration 3\nhost %s\n\x01\x02\xff\n",
    };
    char host[IPCP_STRIPE_HOST_MAX], text[600], why[400];
    ipcp__stripe_host_id(host, sizeof(host));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ipcp__stripe_entry_t e, k = key(0, 1, 13000);
        snprintf(text, sizeof(text), bad[i], host);
        write_file(text);
        T_EQ_INT(load(&k, &e, why), IPCP_STRIPE_CORRUPT);
        if (!strstr(why, file) ||
            !strstr(why, "is not a striping calibration file"))
            T_FAIL("case %zu: reason \"%s\"", i, why);
        int before = calibrations;
        const char *log = tune_captured(IPCP_TUNE_AUTO, &e);
        T_EQ_INT(calibrations, before + 1);
        if (!strstr(log, " warn ") || !strstr(log, "calibration ignored") ||
            !strstr(log, "is not a striping calibration file"))
            T_FAIL("case %zu: no warning in \"%s\"", i, log);
        expect_entry(&e);
        T_EQ_INT(load(&k, &e, why), IPCP_STRIPE_HIT);
        /* Only trusted content survives the rewrite. */
        const char *now = read_file();
        T_CHECK(strncmp(now, "ipcpipe stripe calibration 3\nhost ", 34) == 0);
        T_CHECK(strstr(now, "extra") == NULL && strstr(now, "garbage") == NULL);
    }
}

/* Written on another machine: never trusted, and its entries dropped. */
static void case_foreign(void)
{
    ipcp__stripe_entry_t e, k = key(0, 1, 13000);
    char why[400];
    write_file("ipcpipe stripe calibration 3\nhost some-other-machine\n"
               "pair GPU-fake-0 GPU-fake-1 layout driven driver 13000 share "
               "0.5000 at 4096 "
               "share 0 at 0 bidir 0 min 4096 direct 1.0 staged 1.0 "
               "striped 9.0 time 1\n"
               "pair GPU-x GPU-y layout ring driver 13000 share 0.2000 at 4096 "
               "share 0 "
               "at 0 bidir 0 min 4096 direct 1.0 staged 1.0 striped 9.0 "
               "time 1\n");
    T_EQ_INT(load(&k, &e, why), IPCP_STRIPE_FOREIGN);
    T_CHECK(strstr(why, "another machine") &&
            strstr(why, "some-other-machine"));
    const char *log = tune_captured(IPCP_TUNE_AUTO, &e);
    T_EQ_INT(calibrations, 1);
    T_CHECK(strstr(log, " warn ") && strstr(log, "another machine"));
    expect_entry(&e); /* the measured share, not the file's 0.5 */
    T_CHECK(strstr(read_file(), "GPU-x") == NULL);
    T_CHECK(strstr(read_file(), "some-other-machine") == NULL);
}

/* Measured under another driver: ignored, measured again, replaced. */
static void case_stale(void)
{
    ipcp__stripe_entry_t e, k = key(0, 1, 13000);
    char host[IPCP_STRIPE_HOST_MAX], text[600], why[400];
    ipcp__stripe_host_id(host, sizeof(host));
    snprintf(text, sizeof(text),
             "ipcpipe stripe calibration 3\nhost %s\n"
             "pair GPU-fake-0 GPU-fake-1 layout driven driver 12080 share "
             "0.3000 at 4096 "
             "share 0 at 0 bidir 0 min 4096 direct 1.0 staged 1.0 "
             "striped 9.0 time 1\n",
             host);
    write_file(text);
    T_EQ_INT(load(&k, &e, why), IPCP_STRIPE_STALE);
    T_CHECK(strstr(why, "driver 12080") && strstr(why, "13000"));
    const char *log = tune_captured(IPCP_TUNE_AUTO, &e);
    T_EQ_INT(calibrations, 1);
    T_CHECK(strstr(log, " warn ") && strstr(log, "driver 12080"));
    expect_entry(&e);
    T_CHECK(strstr(read_file(), "driver 12080") == NULL);
}

/* The layout is part of an entry: IPCPIPE_DRIVE=auto measures the driven
 * layout and IPCPIPE_DRIVE=off the ring, each kept beside the other, and
 * neither stands in for the other. */
static void case_layout(void)
{
    ipcp__stripe_entry_t e, got, k = key(0, 1, 13000);
    char why[400];
    tune_captured(IPCP_TUNE_AUTO, &e);
    T_EQ_INT(calibrations, 1);
    T_EQ_INT(cal_layout, IPCP_STRIPE_DRIVEN);
    T_EQ_INT(e.layout, IPCP_STRIPE_DRIVEN);
    T_CHECK(strstr(read_file(), "layout driven") != NULL);
    k.layout = IPCP_STRIPE_RING;
    T_EQ_INT(load(&k, &got, why), IPCP_STRIPE_MISS);
    T_CHECK(strstr(why, "no entry") && strstr(why, "ring layout"));
    tune_drive = IPCP_DRIVE_OFF;
    const char *log = tune_captured(IPCP_TUNE_AUTO, &e);
    T_EQ_INT(calibrations, 2);
    T_EQ_INT(cal_layout, IPCP_STRIPE_RING);
    T_EQ_INT(e.layout, IPCP_STRIPE_RING);
    T_CHECK(strstr(log, " warn ") == NULL); /* a miss, not damage */
    tune_captured(IPCP_TUNE_AUTO, &e);      /* now kept */
    T_EQ_INT(calibrations, 2);
    tune_drive = IPCP_DRIVE_ON;
    tune_captured(IPCP_TUNE_AUTO, &e); /* the driven entry is still there */
    T_EQ_INT(calibrations, 2);
    T_EQ_INT(e.layout, IPCP_STRIPE_DRIVEN);
    T_EQ_INT(load(&k, &got, why), IPCP_STRIPE_HIT);
    T_EQ_INT(got.layout, IPCP_STRIPE_RING);
    /* Where transfers start to stripe: the calibration's smallest gaining
     * size for the driven layout, twice it through the ring. */
    T_EQ_U64(ipcp__stripe_engine_min(64 << 20, IPCP_STRIPE_DRIVEN),
             (uint64_t)64 << 20);
    T_EQ_U64(ipcp__stripe_engine_min(64 << 20, IPCP_STRIPE_RING),
             (uint64_t)128 << 20);
}

/* Entries of other pairs stay when one pair is rewritten. */
static void case_keeps_others(void)
{
    ipcp__stripe_entry_t a = key(0, 1, 13000), b = key(1, 0, 13000), got;
    char host[IPCP_STRIPE_HOST_MAX], why[400];
    ipcp__stripe_host_id(host, sizeof(host));
    a.share = 0.08;
    a.size = 4 << 20;
    a.min_size = 1 << 20;
    b.share = 0;
    T_EQ_INT(ipcp__stripe_cache_store(file, host, &a, why, sizeof(why)), 0);
    T_EQ_INT(ipcp__stripe_cache_store(file, host, &b, why, sizeof(why)), 0);
    a.share = 0.12;
    T_EQ_INT(ipcp__stripe_cache_store(file, host, &a, why, sizeof(why)), 0);
    T_EQ_INT(load(&a, &got, why), IPCP_STRIPE_HIT);
    T_CHECK(got.share > 0.1199 && got.share < 0.1201);
    T_EQ_INT(load(&b, &got, why), IPCP_STRIPE_HIT);
    T_CHECK(got.share == 0);
    ipcp__stripe_entry_t c = key(0, 0, 13000);
    T_EQ_INT(load(&c, &got, why), IPCP_STRIPE_MISS);
    T_CHECK(strstr(why, "no entry"));
}

/* The split: nothing below the smallest size or without a share; a fixed
 * share splits any size unevenly; a measured one on 64 KiB. */
static void case_bytes(void)
{
    T_EQ_U64(ipcp__stripe_bytes(1 << 30, 0, 0), 0);
    T_EQ_U64(ipcp__stripe_bytes(1, 0.1, 0), 0);
    T_EQ_U64(ipcp__stripe_bytes(4095, 0.1, 0), 409);
    T_EQ_U64(ipcp__stripe_bytes(1048579, 0.1, 0), 104857);
    T_EQ_U64(ipcp__stripe_bytes(((uint64_t)64 << 20) - 1, 0.1, 64 << 20), 0);
    uint64_t s = ipcp__stripe_bytes((uint64_t)256 << 20, 0.1, 64 << 20);
    T_EQ_U64(s % (64 << 10), 0);
    T_CHECK(s > ((uint64_t)25 << 20) && s < ((uint64_t)26 << 20));
    T_CHECK(ipcp__stripe_bytes(3, 0.9, 0) < 3);
}

/* The share by size: on the line through the two measured points in
 * 1 / size, within 0 and the larger of them; both ways scaled by what was
 * found both ways. */
static void case_share(void)
{
    ipcp__stripe_entry_t e = key(0, 1, 13000);
    const uint64_t M = 1 << 20;
    e.share = 0.08;
    e.size = 256 * M;
    e.share_large = 0.10;
    e.size_large = 1024 * M;
    e.share_bidir = 0.07;
#define NEAR(x, want) T_CHECK((x) > (want)-1e-6 && (x) < (want) + 1e-6)
    NEAR(ipcp__stripe_share(&e, 256 * M, 0), 0.08);
    NEAR(ipcp__stripe_share(&e, 1024 * M, 0), 0.10);
    NEAR(ipcp__stripe_share(&e, 512 * M, 0), 0.10 - 0.02 / 3);
    NEAR(ipcp__stripe_share(&e, 128 * M, 0), 0.10 - 0.07 / 1.5);
    NEAR(ipcp__stripe_share(&e, 64 * M, 0), 0);
    NEAR(ipcp__stripe_share(&e, 8 * M, 0), 0);
    NEAR(ipcp__stripe_share(&e, 4096 * M, 0), 0.10);
    NEAR(ipcp__stripe_share(&e, 1024 * M, 1), 0.07);
    NEAR(ipcp__stripe_share(&e, 512 * M, 1), (0.10 - 0.02 / 3) * 0.7);
    /* a smaller share at the larger size: between the two, never above */
    e.share_large = 0.06;
    NEAR(ipcp__stripe_share(&e, 4096 * M, 0), 0.055);
    NEAR(ipcp__stripe_share(&e, 64 * M, 0), 0.08);
    /* measured at one size only: that share everywhere, never both ways */
    e.share_large = 0;
    e.size_large = 0;
    NEAR(ipcp__stripe_share(&e, 64 * M, 0), 0.08);
    NEAR(ipcp__stripe_share(&e, 4096 * M, 0), 0.08);
    NEAR(ipcp__stripe_share(&e, 4096 * M, 1), 0);
    e.share = 0;
    NEAR(ipcp__stripe_share(&e, 1024 * M, 0), 0);
#undef NEAR
}

/* x within 1e-9 of want, for the case_adapt helpers below. */
#define NEAR(x, want)                                                          \
    do {                                                                       \
        double got_ = (x); /* once: the calls change the state */              \
        T_CHECK(got_ > (want)-1e-9 && got_ < (want) + 1e-9);                   \
    } while (0)

/* The factor's steps around and past the calibration, from a fresh state;
 * it ends at IPCP_ADAPT_MAX less two 3% steps. */
static void adapt_steps(ipcp__adapt_t *a)
{
    ipcp__adapt_init(a);
    NEAR(ipcp__adapt_next(a), 1.0);
    NEAR(ipcp__adapt_learn(a, 600, 2000), 1.0); /* the first: first uses */
    NEAR(ipcp__adapt_learn(a, 600, 654), 1.0);  /* 9% late: the wide band */
    NEAR(ipcp__adapt_learn(a, 600, 585), 1.0);  /* 2.5% early, once: waits */
    NEAR(ipcp__adapt_learn(a, 600, 582), 1.0);  /* twice, but < 5% early */
    NEAR(ipcp__adapt_learn(a, 600, 720), 1.0 / 1.2);
    NEAR(ipcp__adapt_learn(a, 600, 630), 1.0 / 1.2 / 1.05 / 1.05);
    double f = a->f;
    NEAR(ipcp__adapt_learn(a, 600, 606), f); /* 1% late: noise */
    NEAR(ipcp__adapt_learn(a, 600, 600), f);
    NEAR(ipcp__adapt_learn(a, 600, 591), f); /* 1.5% early: noise */
    NEAR(ipcp__adapt_learn(a, 600, 0), f);   /* a time missing */
    NEAR(ipcp__adapt_learn(a, 0, 500), f);
    NEAR(ipcp__adapt_learn(a, 600, 540), f); /* early, the first in a row */
    NEAR(ipcp__adapt_learn(a, 600, 540), f / 0.9);
    f = a->f;
    NEAR(ipcp__adapt_learn(a, 600, 540), f); /* the streak starts again */
    NEAR(ipcp__adapt_learn(a, 600, 606), f);
    NEAR(ipcp__adapt_learn(a, 600, 540), f); /* a late or even end breaks it */
    NEAR(ipcp__adapt_learn(a, 600, 720), f / 1.44);
    f = a->f;
    NEAR(ipcp__adapt_learn(a, 600, 300), f);
    NEAR(ipcp__adapt_learn(a, 600, 300), f * IPCP_ADAPT_GROW);
    for (int i = 0; i < 8 && a->f < 1; i++)
        ipcp__adapt_learn(a, 600, 300);
    NEAR(a->f, 1.0); /* to the calibration first, not past it at once */
    NEAR(ipcp__adapt_learn(a, 600, 564), 1.0);
    NEAR(ipcp__adapt_learn(a, 600, 564), 1.0 / 0.94);
    NEAR(ipcp__adapt_learn(a, 600, 300), 1.0 / 0.94);
    NEAR(ipcp__adapt_learn(a, 600, 300), 1.0 / 0.94 * IPCP_ADAPT_GROW_ABOVE);
    for (int i = 0; i < 10; i++)
        ipcp__adapt_learn(a, 600, 300);
    NEAR(a->f, IPCP_ADAPT_MAX); /* never far past the calibration */
    NEAR(ipcp__adapt_next(a), IPCP_ADAPT_MAX);
    /* Past the calibration, 3% late is past the balance: twice the step. */
    NEAR(ipcp__adapt_learn(a, 600, 618), IPCP_ADAPT_MAX / 1.03 / 1.03);
}

/* From the calibration: the class stops striping, probes with backoff, and
 * comes back after a probe on time, up to the calibration again. */
static void adapt_probes(ipcp__adapt_t *a)
{
    /* 256 MiB next to another process's copies on the PCIe link: the
     * staged part waits for them whatever its size, so the class stops
     * striping... */
    NEAR(ipcp__adapt_learn(a, 600, 780), 1.0 / 1.69); /* 30%: no noise */
    NEAR(ipcp__adapt_learn(a, 600, 1400), 0.0);       /* / (7/3)^2 */
    T_CHECK(a->f == 0 && a->backoff == IPCP_ADAPT_PROBE);
    /* ...and after IPCP_ADAPT_PROBE - 1 unstriped transfers probes at the
     * floor; nothing else stripes while the probe is out. */
    for (int i = 1; i < IPCP_ADAPT_PROBE; i++)
        NEAR(ipcp__adapt_next(a), 0.0);
    NEAR(ipcp__adapt_next(a), IPCP_ADAPT_MIN);
    NEAR(ipcp__adapt_next(a), 0.0);
    /* A late probe doubles the wait, up to IPCP_ADAPT_PROBE_MAX. */
    NEAR(ipcp__adapt_learn(a, 600, 1200), 0.0);
    T_CHECK(a->backoff == 2 * IPCP_ADAPT_PROBE);
    unsigned waited = 0;
    for (int k = 0; k < 8; k++) {
        waited = 0;
        while (ipcp__adapt_next(a) == 0)
            waited++;
        ipcp__adapt_learn(a, 600, 1200);
    }
    T_CHECK(waited == IPCP_ADAPT_PROBE_MAX - 1);
    T_CHECK(a->backoff == IPCP_ADAPT_PROBE_MAX);
    /* A probe that taught nothing (failed, or neither end seen) is made
     * again after the same wait. */
    while (ipcp__adapt_next(a) == 0)
        ;
    ipcp__adapt_forget(a);
    waited = 0;
    while (ipcp__adapt_next(a) == 0)
        waited++;
    T_CHECK(waited == IPCP_ADAPT_PROBE_MAX - 1);
    /* A probe on time brings the class back at the floor; the staged path
     * free again, early ends raise the factor back to 1. */
    NEAR(ipcp__adapt_learn(a, 600, 600), IPCP_ADAPT_MIN);
    T_CHECK(a->backoff == 0);
    int n = 0;
    while (ipcp__adapt_next(a) < 1 && n < 20) {
        ipcp__adapt_learn(a, 600, 300 * a->f); /* half the time it had */
        n++;
    }
    T_CHECK(n > 0 && n < 20);
    NEAR(a->f, 1.0);
}

/* A staged path at 60% of its calibrated rate, with a fixed cost of a
 * tenth of the direct part's time: the factor settles where both parts end
 * within 2% of each other, and stays there. */
static void adapt_settles(void)
{
    ipcp__adapt_t a;
    ipcp__adapt_init(&a);
    double td = 600, ts = 0;
    for (int i = 0; i < 20; i++) { /* the first one teaches nothing */
        ts = 60 + td * ipcp__adapt_next(&a) / 0.6;
        ipcp__adapt_learn(&a, td, ts);
    }
    ts = 60 + td * a.f / 0.6;
    T_CHECK(a.f >= IPCP_ADAPT_MIN && a.f < 1 &&
            ts / td > 1 - IPCP_ADAPT_SLACK && ts / td < 1 + IPCP_ADAPT_SLACK);
    double f = a.f;
    NEAR(ipcp__adapt_learn(&a, td, ts), f);
}

/* IPCPIPE_STRIPE_ADAPT, one size class: its first transfer teaches
 * nothing; at the calibrated share only a staged part more than 10% late
 * lowers the factor, in proportion, and one more than 25% late twice as
 * much; off it, one more than 2% late lowers it twice as much; only the
 * second early end in a row raises it, in proportion: up to 1 by at most a
 * quarter, past 1 only when more than 5% early, by at most a tenth and up
 * to 1.25; with a time missing it stays; below the floor the class stops
 * striping and probes now and then, less often after each late probe, and
 * comes back after a probe on time. */
static void case_adapt(void)
{
    ipcp__adapt_t a;
    adapt_steps(&a);
    /* Back at the calibration. */
    ipcp__adapt_init(&a);
    ipcp__adapt_learn(&a, 600, 600);
    NEAR(a.f, 1.0);
    adapt_probes(&a);
    adapt_settles();

    /* Size classes: powers of two from 8 MiB, the last one open-ended. */
    T_CHECK(ipcp__adapt_class(0) == 0);
    T_CHECK(ipcp__adapt_class((uint64_t)16 << 20) == 1);
    T_CHECK(ipcp__adapt_class(((uint64_t)16 << 20) - 1) == 0);
    T_CHECK(ipcp__adapt_class((uint64_t)256 << 20) == 5);
    T_CHECK(ipcp__adapt_class(((uint64_t)1 << 30) + 7) == 7);
    T_CHECK(ipcp__adapt_class((uint64_t)1 << 50) == IPCP_ADAPT_CLASSES - 1);
}
#undef NEAR

/* Where the file goes: the setting, "off", else under the cache home. */
static void case_path(void)
{
    ipcp__config_t c;
    char p[IPCP_DIR_MAX];
    memset(&c, 0, sizeof(c));
    snprintf(c.stripe_cache, sizeof(c.stripe_cache), "off");
    ipcp__stripe_cache_path(&c, p, sizeof(p));
    T_EQ_STR(p, "");
    snprintf(c.stripe_cache, sizeof(c.stripe_cache), "/x/y.txt");
    ipcp__stripe_cache_path(&c, p, sizeof(p));
    T_EQ_STR(p, "/x/y.txt");
    c.stripe_cache[0] = '\0';
    /* Named after the machine: homes shared between machines keep a file
     * each. */
    char host[IPCP_STRIPE_HOST_MAX], want[IPCP_DIR_MAX + 64];
    ipcp__stripe_host_id(host, sizeof(host));
    setenv("XDG_CACHE_HOME", "/c", 1);
    ipcp__stripe_cache_path(&c, p, sizeof(p));
    snprintf(want, sizeof(want), "/c/ipcpipe/stripe-%.40s.txt", host);
    T_EQ_STR(p, want);
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/h", 1);
    ipcp__stripe_cache_path(&c, p, sizeof(p));
    snprintf(want, sizeof(want), "/h/.cache/ipcpipe/stripe-%.40s.txt", host);
    T_EQ_STR(p, want);
    /* No file: measured in every process, nothing written. */
    ipcp__stripe_entry_t e, k = key(0, 1, 13000);
    char why[400];
    T_EQ_INT(ipcp__stripe_cache_load("", "h", &k, &e, why, sizeof(why)),
             IPCP_STRIPE_MISS);
    T_CHECK(strstr(why, "IPCPIPE_STRIPE_CACHE=off"));
}

/* The settings: off, auto, a share, and bad values named. */
static const char *env_val;
static const char *get_stripe(const char *name, void *arg)
{
    (void)arg;
    return strcmp(name, "IPCPIPE_STRIPE") == 0 ? env_val : NULL;
}

static void case_setting(void)
{
    ipcp__config_t c;
    char err[300];
    env_val = "off";
    T_OK(ipcp__config_parse(&c, get_stripe, NULL, err, sizeof(err)));
    T_CHECK(c.stripe < 0);
    env_val = "auto";
    T_OK(ipcp__config_parse(&c, get_stripe, NULL, err, sizeof(err)));
    T_CHECK(c.stripe == 0);
    env_val = NULL;
    T_OK(ipcp__config_parse(&c, get_stripe, NULL, err, sizeof(err)));
    T_CHECK(c.stripe == 0);
    env_val = "0.1";
    T_OK(ipcp__config_parse(&c, get_stripe, NULL, err, sizeof(err)));
    T_CHECK(c.stripe > 0.0999 && c.stripe < 0.1001);
    static const char *const bad[] = {"0",  "1",   "-0.1", "0.95",
                                      "on", "10%", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        env_val = bad[i];
        T_STATUS(ipcp__config_parse(&c, get_stripe, NULL, err, sizeof(err)),
                 IPCP_ERR_CONFIG);
        if (!strstr(err, "IPCPIPE_STRIPE") || !strstr(err, "off, auto"))
            T_FAIL("'%s': message \"%s\"", bad[i], err);
    }
}

/* Whether the pair moves data the other way too (both-ways shares, and no
 * striping below IPCP_STRIPE_BIDIR_MIN): only transfers large enough to
 * stripe count, posted or waiting for a CTS (any memory, by buffer size) or
 * in queues (device memory, by the bytes they move).  A small control
 * receive posted ahead used to count, and left one-way transfers beside it
 * unstriped. */
static void case_busy(void)
{
    ipcp__peer_t peer;
    ipcp_request_t ctl, small, host, big;
    ipcp__xfer_t x;
    memset(&peer, 0, sizeof(peer));
    memset(&x, 0, sizeof(x));
    ipcp__list_init(&peer.posted);
    ipcp__list_init(&peer.wait_cts);
    ipcp__list_init(&peer.active);
    memset(&ctl, 0, sizeof(ctl));
    ctl.attr.type = IPCP_MEM_HOST;
    ctl.len = ctl.nbytes = 4;
    small = ctl;
    small.attr.type = IPCP_MEM_CUDA;
    small.len = small.nbytes = IPCP_STRIPE_MIN_SIZE - 1;
    host = ctl;
    host.len = host.nbytes = (size_t)1 << 30;
    big = small;
    big.len = big.nbytes = IPCP_STRIPE_MIN_SIZE;
    /* Each kind both ways: a request sits in one list at a time. */
    ipcp_request_t quiet[2][2] = {{ctl, small}, {ctl, small}};
    for (int i = 0; i < 2; i++) {
        ipcp__list_push_back(&peer.posted, &quiet[0][i].link);
        ipcp__list_push_back(&peer.wait_cts, &quiet[1][i].link);
    }
    T_EQ_INT(ipcp__peer_busy(&peer, 1), 0);
    T_EQ_INT(ipcp__peer_busy(&peer, 0), 0);
    ipcp__list_push_back(&peer.posted, &host.link);
    T_EQ_INT(ipcp__peer_busy(&peer, 1), 1);
    T_EQ_INT(ipcp__peer_busy(&peer, 0), 0);
    ipcp__list_del(&host.link);
    ipcp__list_push_back(&peer.wait_cts, &big.link);
    T_EQ_INT(ipcp__peer_busy(&peer, 0), 1);
    T_EQ_INT(ipcp__peer_busy(&peer, 1), 0);
    ipcp__list_del(&big.link);
    /* In queues: a device transfer of this side's direction, by what it
     * moves (a small message into a large buffer does not count). */
    x.rx = 1;
    x.dev = 1;
    x.req = &small;
    ipcp__list_push_back(&peer.active, &x.link);
    T_EQ_INT(ipcp__peer_busy(&peer, 1), 0);
    x.req = &big;
    T_EQ_INT(ipcp__peer_busy(&peer, 1), 1);
    T_EQ_INT(ipcp__peer_busy(&peer, 0), 0);
    big.len = (size_t)1 << 30;
    big.nbytes = 8192;
    T_EQ_INT(ipcp__peer_busy(&peer, 1), 0);
    big.nbytes = IPCP_STRIPE_MIN_SIZE;
    x.dev = 0;
    T_EQ_INT(ipcp__peer_busy(&peer, 1), 0);
}

/* A FIFO where the file should be is refused at once: opening it for
 * reading would wait for a writer that never comes. */
static void case_fifo(void)
{
    char sub[300], why[400];
    ipcp__stripe_entry_t e, k = key(0, 1, 13000);
    snprintf(sub, sizeof(sub), "%s/cache", dir);
    T_CHECK(mkdir(sub, 0700) == 0);
    T_CHECK(mkfifo(file, 0600) == 0);
    T_EQ_INT(load(&k, &e, why), IPCP_STRIPE_CORRUPT);
    if (!strstr(why, file) || !strstr(why, "is not a regular file"))
        T_FAIL("reason \"%s\"", why);
}

typedef struct {
    const char *name;
    void (*fn)(void);
} stripe_case_t;

int main(int argc, char **argv)
{
    static const stripe_case_t cases[] = {
        {"measure_then_hit", case_measure_then_hit},
        {"cached_only", case_cached_only},
        {"corrupt", case_corrupt},
        {"foreign", case_foreign},
        {"stale", case_stale},
        {"keeps_others", case_keeps_others},
        {"layout", case_layout},
        {"bytes", case_bytes},
        {"share", case_share},
        {"adapt", case_adapt},
        {"path", case_path},
        {"setting", case_setting},
        {"busy", case_busy},
        {"fifo", case_fifo},
    };
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    setup();
    cases[i].fn();
    teardown();
    return 0;
}
