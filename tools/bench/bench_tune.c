/* ipcpipe-bench --tune: measures striping (IPCPIPE_STRIPE=auto) for every
 * ordered pair of visible GPUs now, rather than at a transfer's first use,
 * writes the calibration file and prints what it found. */
#include "bench.h"

#include <stdio.h>
#include <string.h>

#ifdef IPCP_HAVE_CUDA

#include "backend/cuda/cuda_backend.h"
#include "common/config.h"
#include "engine/stripe.h"

int bench_tune(void)
{
    const ipcp__config_t *cfg;
    ipcp__backend_t *be = NULL;
    const ipcp__backend_ops_t *ops = &ipcp__cuda_backend_ops;
    char path[IPCP_DIR_MAX];
    int tuned = 0, failed = 0;

    if (ipcp__config_get(&cfg) != IPCP_OK) {
        fprintf(stderr, "ipcpipe-bench: %s\n", ipcp_last_error());
        return 2;
    }
    if (ops->open(cfg, &be) != IPCP_OK) {
        printf("ipcpipe-bench --tune: no GPU to tune: %s\n", ipcp_last_error());
        return 0;
    }
    ipcp__stripe_cache_path(cfg, path, sizeof(path));
    printf("# striping calibration (IPCPIPE_STRIPE=auto): per ordered pair of "
           "GPUs, a copy over the direct link alone and split with the "
           "staged path at several shares, in this process; file: %s\n"
           "# layout %s: %s; the best share at 256 MiB, at 1 GiB and at 1 "
           "GiB both ways at once (a transfer's share lies on the line "
           "through the first two in 1 / size);\n"
           "# GB/s at 256 MiB one way\n",
           path[0] ? path : "(none: IPCPIPE_STRIPE_CACHE=off)",
           ipcp__stripe_layout_name(ipcp__stripe_layout(cfg)),
           ipcp__stripe_layout(cfg) == IPCP_STRIPE_DRIVEN
               ? "the receiver copies both parts itself, as measured here, "
                 "and transfers stripe from the smallest size that gained "
                 "here (\"from size\")"
               : "IPCPIPE_DRIVE=off, the two-sided ring; transfers between "
                 "processes stripe from twice the smallest size that gained "
                 "here (\"from size\")");
    printf("%-9s %-8s %6s %6s %9s %10s %12s %12s %12s %8s\n", "from->to",
           "stripe", "share", "at 1G", "both ways", "from size", "direct GB/s",
           "staged GB/s", "striped GB/s", "gain %");
    for (int s = 0; s < be->ndev; s++) {
        for (int d = 0; d < be->ndev; d++) {
            ipcp__stripe_entry_t e;
            char pair[32];
            if (s == d)
                continue;
            snprintf(pair, sizeof(pair), "%d->%d", s, d);
            if (ipcp__stripe_tune(cfg, ops, be, s, d, IPCP_TUNE_FORCE, &e) !=
                IPCP_OK) {
                printf("%-9s %-8s %s\n", pair, "no", ipcp_last_error());
                failed += !be->peer[s][d] ? 0 : 1;
                continue;
            }
            tuned++;
            printf("%-9s %-8s %5.0f%% %5.0f%% %8.0f%% %9lluM %12.1f %12.1f "
                   "%12.1f %8.1f\n",
                   pair, e.share > 0 ? "yes" : "no", e.share * 100,
                   e.share_large * 100, e.share_bidir * 100,
                   (unsigned long long)(e.min_size >> 20), e.direct_gbs,
                   e.staged_gbs, e.striped_gbs,
                   e.direct_gbs > 0 ? (e.striped_gbs / e.direct_gbs - 1) * 100
                                    : 0.0);
        }
    }
    if (!tuned && !failed)
        printf("# no pair of GPUs to stripe between (%d visible)\n", be->ndev);
    ops->close(be);
    return failed ? 1 : 0;
}

#else

int bench_tune(void)
{
    printf("ipcpipe-bench --tune: built without CUDA; nothing to tune\n");
    return 0;
}

#endif
