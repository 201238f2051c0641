/* ipcpipe-bench-ranks' options (bench_ranks_opts.c), read before the
 * ranks start. */
#ifndef IPCP_TOOLS_BENCH_RANKS_H
#define IPCP_TOOLS_BENCH_RANKS_H

#include <stddef.h>

#define MAX_SIZES 32
#define MAX_REPS  100
#define MAX_WIN   64
#define T_DATA    1
#define T_RESULT  2

enum { PAT_RING, PAT_PAIRS, PAT_ALL2ALL, NPATS };
extern const char *const ranks_pat_names[NPATS];

typedef struct ropts {
    int nranks, pats[NPATS], cuda, reps, window, pin;
    int nranks_set; /* --ranks given: a launcher's size must match it */
    int pats_set;   /* pairs asked for by name (not within all) */
    int nccl;       /* --nccl: NCCL's grouped send/recv of each pattern */
    double timeout_s;
    size_t sizes[MAX_SIZES];
    int nsizes;
} ropts_t;

/* The command line into o; a bad one ends the process (exit 2) saying
 * why. */
void ranks_parse(int argc, char **argv, ropts_t *o);

#endif
