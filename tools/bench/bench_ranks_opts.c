/* ipcpipe-bench-ranks' command line (bench_ranks.h). */
#include "bench_ranks.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"
#include "sizes.h"

const char *const ranks_pat_names[NPATS] = {"ring", "pairs", "all2all"};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ipcpipe-bench-ranks: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ipcpipe-bench-ranks [--ranks N] [--pattern "
               "ring|pairs|all2all|all[,...]]\n"
               "         [--mem host|cuda] [--sizes LIST] [--reps N] "
               "[--window W] [--pin] [--timeout S]\n"
               "         [--nccl on|off]\n");
}

static void parse_patterns(ropts_t *o, const char *v)
{
    char buf[64];
    if (strlen(v) >= sizeof(buf))
        die("--pattern: '%s' is too long", v);
    strcpy(buf, v);
    memset(o->pats, 0, sizeof(o->pats));
    o->pats_set = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int p = 0; p < NPATS; p++)
            if (!strcmp(t, ranks_pat_names[p]) || !strcmp(t, "all"))
                o->pats[p] = found = 1;
        if (!found)
            die("--pattern takes ring, pairs, all2all or all, not '%s'", t);
        if (!strcmp(t, "pairs"))
            o->pats_set = 1;
    }
}

static void parse_sizes(ropts_t *o, const char *sizes)
{
    o->nsizes = 0;
    for (const char *s = sizes; *s;) {
        const char *end = s;
        if (o->nsizes == MAX_SIZES ||
            ipcp_tool_parse_size(s, ",", &o->sizes[o->nsizes], &end) != 0 ||
            o->sizes[o->nsizes] == 0 || (*end && *end != ','))
            die("--sizes: bad list '%s' (at most %d sizes, each 1 byte or "
                "more, as 8, 64K, 1M)",
                sizes, MAX_SIZES);
        o->nsizes++;
        s = *end == ',' ? end + 1 : end;
    }
    if (o->nsizes == 0)
        die("--sizes: an empty list");
}

/* A whole number in [lo, hi] for option name, or death naming it. */
static int parse_int(const char *name, const char *v, int lo, int hi)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        die("%s takes a whole number from %d to %d, not '%s'", name, lo, hi, v);
    return (int)x;
}

void ranks_parse(int argc, char **argv, ropts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->nranks = 4;
    o->reps = 5;
    o->timeout_s = 600;
    o->nccl = 1;
    parse_patterns(o, "all");
    parse_sizes(o, "64K,1M,16M");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--pin")) {
            o->pin = 1;
            continue;
        } else if (!v) {
            usage(stderr);
            die("%s: unknown option or missing value", a);
        } else if (!strcmp(a, "--ranks")) {
            o->nranks = parse_int(a, v, 2, IPCP_LAUNCH_MAX_RANKS);
            o->nranks_set = 1;
        } else if (!strcmp(a, "--pattern")) {
            parse_patterns(o, v);
        } else if (!strcmp(a, "--mem")) {
            if (strcmp(v, "host") && strcmp(v, "cuda"))
                die("--mem takes host or cuda, not '%s'", v);
            o->cuda = !strcmp(v, "cuda");
        } else if (!strcmp(a, "--sizes")) {
            parse_sizes(o, v);
        } else if (!strcmp(a, "--reps")) {
            o->reps = parse_int(a, v, 1, MAX_REPS);
        } else if (!strcmp(a, "--window")) {
            o->window = parse_int(a, v, 1, MAX_WIN);
        } else if (!strcmp(a, "--nccl")) {
            if (strcmp(v, "on") && strcmp(v, "off"))
                die("--nccl takes on or off, not '%s'", v);
            o->nccl = !strcmp(v, "on");
        } else if (!strcmp(a, "--timeout")) {
            o->timeout_s = parse_int(a, v, 0, 86400);
        } else {
            usage(stderr);
            die("%s: unknown option", a);
        }
        i++;
    }
}
