/* Median, min and max of a run's repetitions: how the tools report every
 * figure (never the best run alone). */
#ifndef IPCP_TOOLS_STAT3_H
#define IPCP_TOOLS_STAT3_H

#include <stdlib.h>

typedef struct stat3 {
    double med, min, max;
} stat3_t;

static inline int ipcp_tool_cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Of v[0..n), which it sorts; all zero when n < 1. */
static inline stat3_t ipcp_tool_stats(double *v, int n)
{
    stat3_t s = {0, 0, 0};
    if (n < 1)
        return s;
    qsort(v, (size_t)n, sizeof(double), ipcp_tool_cmp_dbl);
    s.min = v[0];
    s.max = v[n - 1];
    s.med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return s;
}

#endif
