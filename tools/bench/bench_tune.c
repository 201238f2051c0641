/* ipcpipe-bench --tune: measures striping (IPCPIPE_STRIPE=auto) for every
 * ordered pair of visible GPUs now, rather than at a transfer's first use,
 * writes the calibration file and prints what it found (ipcpipe_diag.h). */
#include "bench.h"

#include <stdio.h>
#include <string.h>

#include "ipcpipe_diag.h"

static void tune_header(const ipcp_diag_stripe_t *set)
{
    printf("# striping calibration (IPCPIPE_STRIPE=auto): per ordered pair of "
           "GPUs, a copy over the direct link alone and split with the "
           "staged path at several shares, in this process; file: %s\n"
           "# layout %s: %s; the best share at 256 MiB, at 1 GiB and at 1 "
           "GiB both ways at once (a transfer's share lies on the line "
           "through the first two in 1 / size);\n"
           "# GB/s at 256 MiB one way\n",
           set->file[0] ? set->file : "(none: IPCPIPE_STRIPE_CACHE=off)",
           set->driven ? "driven" : "ring",
           set->driven
               ? "the receiver copies both parts itself, as measured here, "
                 "and transfers stripe from the smallest size that gained "
                 "here (\"from size\")"
               : "IPCPIPE_DRIVE=off, the two-sided ring; transfers between "
                 "processes stripe from twice the smallest size that gained "
                 "here (\"from size\")");
    printf("%-9s %-8s %6s %6s %9s %10s %12s %12s %12s %8s\n", "from->to",
           "stripe", "share", "at 1G", "both ways", "from size", "direct GB/s",
           "staged GB/s", "striped GB/s", "gain %");
}

static void tune_row(const char *pair, const ipcp_diag_stripe_t *e)
{
    printf(
        "%-9s %-8s %5.0f%% %5.0f%% %8.0f%% %9lluM %12.1f %12.1f %12.1f "
        "%8.1f\n",
        pair, e->share > 0 ? "yes" : "no", e->share * 100, e->share_large * 100,
        e->share_bidir * 100, (unsigned long long)(e->min_size >> 20),
        e->direct_gbs, e->staged_gbs, e->striped_gbs,
        e->direct_gbs > 0 ? (e->striped_gbs / e->direct_gbs - 1) * 100 : 0.0);
}

int bench_tune(void)
{
    static ipcp_diag_gpus_t gpus;
    ipcp_diag_stripe_t set, e;
    int tuned = 0, failed = 0;

    if (ipcp_diag_stripe_lookup(NULL, NULL, 0, &set) != IPCP_OK) {
        fprintf(stderr, "ipcpipe-bench: %s\n", ipcp_last_error());
        return 2;
    }
    if (ipcp_diag_gpus(&gpus) != IPCP_OK ||
        ipcp_diag_stripe_open() != IPCP_OK) {
        printf("ipcpipe-bench --tune: no GPU to tune: %s\n", ipcp_last_error());
        return 0;
    }
    tune_header(&set);
    for (int s = 0; s < gpus.ndev; s++) {
        for (int d = 0; d < gpus.ndev; d++) {
            char pair[32];
            if (s == d)
                continue;
            snprintf(pair, sizeof(pair), "%d->%d", s, d);
            if (ipcp_diag_stripe_tune(s, d, &e) != IPCP_OK) {
                printf("%-9s %-8s %s\n", pair, "no", ipcp_last_error());
                /* A pair without a direct path has nothing to stripe. */
                failed += gpus.peer[s][d] ? 1 : 0;
                continue;
            }
            tuned++;
            tune_row(pair, &e);
        }
    }
    if (!tuned && !failed)
        printf("# no pair of GPUs to stripe between (%d visible)\n", gpus.ndev);
    ipcp_diag_release();
    return failed ? 1 : 0;
}
