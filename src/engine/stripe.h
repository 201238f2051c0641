/* Striping: one transfer between two GPUs split between the direct path
 * (NVLink) and the staged path (each GPU's own PCIe link), both at once.
 *
 * How much goes staged, and from which size on, is measured once per pair
 * of GPUs (backend stripe_calibrate, single-process copies) and kept in a
 * small text file, so that later runs start tuned.  The file is trusted
 * only when it parses completely, was written on this machine, and its
 * entry names the same two GPUs (UUIDs) under the same driver version;
 * anything else is ignored with a warning and measured again.  An entry
 * is also for one layout of the staged part (IPCP_STRIPE_*, backend.h):
 * IPCPIPE_DRIVE=off stripes through the two-sided ring, else the receiver
 * copies by itself, and each has its own best shares. */
#ifndef IPCP_ENGINE_STRIPE_H
#define IPCP_ENGINE_STRIPE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "common/config.h"

#define IPCP_STRIPE_UUID_MAX 48
#define IPCP_STRIPE_HOST_MAX 128

/* One pair of GPUs, as measured. */
typedef struct ipcp__stripe_entry {
    char src[IPCP_STRIPE_UUID_MAX]; /* sending GPU's UUID */
    char dst[IPCP_STRIPE_UUID_MAX]; /* receiving GPU's UUID */
    int layout;                     /* IPCP_STRIPE_RING or _DRIVEN */
    int driver;                     /* cuDriverGetVersion */
    double share;       /* staged share; 0: striping does not gain here */
    uint64_t size;      /* where share was measured */
    double share_large; /* the same at size_large (0: not measured) */
    uint64_t size_large;
    double share_bidir; /* both ways at once at size_large; 0: off */
    uint64_t min_size;  /* smallest transfer striped */
    double direct_gbs, staged_gbs, striped_gbs; /* at size */
    int64_t time; /* when measured (Unix seconds) */
} ipcp__stripe_entry_t;

typedef enum {
    IPCP_STRIPE_HIT = 0, /* entry found and trusted */
    IPCP_STRIPE_MISS,    /* no file, or no entry for the pair */
    IPCP_STRIPE_CORRUPT, /* the file does not parse */
    IPCP_STRIPE_FOREIGN, /* written on another machine */
    IPCP_STRIPE_STALE,   /* the pair's entry is for another driver */
} ipcp__stripe_lookup_t;

/* "ring" or "driven", as the file writes a layout. */
const char *ipcp__stripe_layout_name(int layout);

/* The cache file's path from the settings: "" when caching is off. */
void ipcp__stripe_cache_path(const ipcp__config_t *cfg, char *buf, size_t len);

/* This machine's identity as written in the file. */
void ipcp__stripe_host_id(char *buf, size_t len);

/* Looks the pair (key->src, key->dst, key->layout, key->driver) up in the
 * file at path for the machine host.  why gets a sentence for everything
 * but HIT. */
ipcp__stripe_lookup_t ipcp__stripe_cache_load(const char *path,
                                              const char *host,
                                              const ipcp__stripe_entry_t *key,
                                              ipcp__stripe_entry_t *out,
                                              char *why, size_t whylen);

/* Writes e into the file (replacing the pair's entry; entries of other
 * pairs are kept only when the file was trusted), atomically (a new file
 * renamed over the old).  Creates the directory.  0, or -1 with why. */
int ipcp__stripe_cache_store(const char *path, const char *host,
                             const ipcp__stripe_entry_t *e, char *why,
                             size_t whylen);

/* What ipcp__stripe_tune may do. */
typedef enum {
    IPCP_TUNE_CACHED = -1, /* read the file only; never measure */
    IPCP_TUNE_AUTO = 0,    /* read the file, measure what it lacks */
    IPCP_TUNE_FORCE = 1,   /* measure even when the file has it */
} ipcp__tune_t;

/* Finds or measures the entry of GPUs src -> dst (ordinals of be), for the
 * layout cfg's IPCPIPE_DRIVE makes the engine use (ipcp__stripe_layout),
 * and stores a new measurement.  Logs what it did.  IPCP_ERR_UNSUPPORTED
 * when the backend cannot measure (no calibration, a device missing);
 * IPCP_ERR_STATE when mode is IPCP_TUNE_CACHED and the file has no
 * trusted entry. */
ipcp_status_t ipcp__stripe_tune(const ipcp__config_t *cfg,
                                const ipcp__backend_ops_t *ops,
                                ipcp__backend_t *be, int src, int dst,
                                ipcp__tune_t mode, ipcp__stripe_entry_t *out);

/* The staged bytes (at the end of the buffer) of a transfer of len bytes
 * under the given entry or fixed share: 0 for no striping. */
uint64_t ipcp__stripe_bytes(uint64_t len, double share, uint64_t min_size);

/* The share of a transfer of len bytes under a calibration (bidir: the
 * pair moves data both ways at once): on the line through the two
 * measured one-way points (ipcp__stripe_fit, backend.h); both ways, that
 * scaled by what the calibration found both ways at its large size. */
double ipcp__stripe_share(const ipcp__stripe_entry_t *e, uint64_t len,
                          int bidir);

/* IPCPIPE_STRIPE_ADAPT: how much of its calibrated share a pair stages,
 * one factor per direction mode and size class (a staged path slowed by
 * another process's copies adds a fixed wait, which a 256 MiB transfer
 * feels more than a 1 GiB one).  After a striped transfer whose direct
 * part took td and staged part ts (from the moment both could start),
 * r = ts / td.  A class's first transfer teaches nothing (it pays first
 * uses: with it, 256 MiB ran at 397 GB/s against 417 without).
 *
 * Late ends.  At the calibrated share (factor 1) only a staged part more
 * than IPCP_ADAPT_LATE late lowers the factor, to f / r: there the two
 * parts end within a few per cent of each other, and a narrow band
 * ratcheted the factor down (both ways on 2 x H200: 804 against 833 GB/s
 * at 1 GiB); one more than IPCP_ADAPT_FAR late is no noise (another
 * process's copies: 24-75% late on 2 x H200) and lowers it to f / r^2.
 * Off the calibrated share, one more than IPCP_ADAPT_SLACK late lowers it
 * to f / r^2: below it the staged path has been slow, and under load it
 * is uneven too (with f / r there, 512 MiB next to a copy loop ran at
 * 342-354 GB/s, direct 390); above it the share went past the balance.
 *
 * Early ends.  Only the second of IPCP_ADAPT_STREAK ends in a row more than
 * IPCP_ADAPT_SLACK early raises the factor, to f / r: up to 1 by at most
 * IPCP_ADAPT_GROW, past 1 by at most IPCP_ADAPT_GROW_ABOVE and only from
 * ends more than IPCP_ADAPT_AHEAD early, up to IPCP_ADAPT_MAX.  Under
 * load, ends alternate between early and late, and raising on each early
 * one kept 512 MiB at factors 0.3-0.8 with every other transfer late
 * (auto 342-372 GB/s, direct 387-391).  Past 1: the calibration runs in
 * one process, where both parts start together; between processes on
 * 2 x H200 the staged part of a 256 MiB transfer at a calibrated 8%
 * ended 55-70 us before the direct part (565 against 636 us).
 *
 * Below IPCP_ADAPT_MIN the class stops striping; every so many of its
 * transfers (IPCP_ADAPT_PROBE, doubling after each probe that ended late,
 * up to IPCP_ADAPT_PROBE_MAX) one is striped at IPCP_ADAPT_MIN to see
 * whether the staged path has recovered. */
#define IPCP_ADAPT_LATE       0.10
#define IPCP_ADAPT_FAR        0.25
#define IPCP_ADAPT_SLACK      0.02
#define IPCP_ADAPT_AHEAD      0.05
#define IPCP_ADAPT_STREAK     2
#define IPCP_ADAPT_GROW       1.25
#define IPCP_ADAPT_GROW_ABOVE 1.10
#define IPCP_ADAPT_MAX        1.25
#define IPCP_ADAPT_MIN        0.25
#define IPCP_ADAPT_PROBE      8
#define IPCP_ADAPT_PROBE_MAX  256
/* Size classes: powers of two from IPCP_ADAPT_CLASS0 (the smallest size
 * auto stripes, IPCP_STRIPE_MIN_SIZE in base.h), the last open-ended. */
#define IPCP_ADAPT_CLASS0  ((uint64_t)8 << 20)
#define IPCP_ADAPT_CLASSES 12

typedef struct ipcp__adapt {
    double f;         /* factor on the calibrated share; 0: not striping */
    uint32_t wait;    /* while f is 0: transfers before the next probe */
    uint32_t backoff; /* the last wait between probes */
    int probing;      /* a probe is in flight */
    unsigned learned; /* transfers learned from */
    unsigned early;   /* early ends in a row, since the last raise */
} ipcp__adapt_t;

/* A class's state before its first transfer. */
void ipcp__adapt_init(ipcp__adapt_t *a);
/* The class of a transfer of len bytes. */
unsigned ipcp__adapt_class(uint64_t len);
/* The factor for the class's next transfer: 0 while it does not stripe,
 * except for a probe now and then. */
double ipcp__adapt_next(ipcp__adapt_t *a);
/* Learns from a striped transfer of the class whose parts took td and ts;
 * returns the new factor. */
double ipcp__adapt_learn(ipcp__adapt_t *a, double td, double ts);
/* A transfer of the class taught nothing (not striped after all, failed,
 * or neither end seen): a probe it was is tried again later. */
void ipcp__adapt_forget(ipcp__adapt_t *a);

/* The layout the engine stripes with under cfg (IPCP_STRIPE_*). */
static inline int ipcp__stripe_layout(const ipcp__config_t *cfg)
{
    return cfg->drive == IPCP_DRIVE_OFF ? IPCP_STRIPE_RING : IPCP_STRIPE_DRIVEN;
}

/* The smallest transfer the engine stripes, from the calibration's
 * smallest gaining size.  The calibration runs in one process.  Through
 * the ring between two, each staged chunk's hand-over costs more (about
 * 20 us a chunk on H200s) and the gain starts later: on 2 x H200 the
 * calibration found 8% gaining from 128 MiB, but 128 MiB between
 * processes lost 7% and 256 MiB gained 1-3%.  So twice its size there.
 * A receiver copying by itself does what the calibration does (128 MiB
 * at a fixed 9%: 411-414 GB/s against 376-379 direct). */
static inline uint64_t ipcp__stripe_engine_min(uint64_t calibrated, int layout)
{
    return layout == IPCP_STRIPE_DRIVEN ? calibrated : calibrated * 2;
}

#endif
