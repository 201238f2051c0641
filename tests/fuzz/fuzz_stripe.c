/* Fuzzes the striping calibration file (IPCPIPE_STRIPE_CACHE), which any
 * process of the user may have written: ipcp__stripe_cache_load in
 * engine/stripe.c reads it, and an entry it trusts then sizes transfers
 * (ipcp__stripe_share, ipcp__stripe_bytes).  Input: a key byte (the
 * layout and driver looked up), then the file's bytes. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/stripe.h"
#include "fuzz_common.h"

#define FUZZ_HOST "fuzzhost"
#define FUZZ_SRC  "GPU-11111111-2222-3333-4444-555555555555"
#define FUZZ_DST  "GPU-66666666-7777-8888-9999-000000000000"

static char fuzz_path[256];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_rmdir(void)
{
    unlink(fuzz_path);
    *strrchr(fuzz_path, '/') = '\0';
    rmdir(fuzz_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet();
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_path, sizeof(fuzz_path), "%s/ipcpipe-fuzz-stripe-XXXXXX",
             tmp && tmp[0] == '/' ? tmp : "/tmp");
    if (!mkdtemp(fuzz_path))
        abort();
    strcat(fuzz_path, "/stripe.txt");
    atexit(fuzz_rmdir);
    return 0;
}

/* What the engine does with a trusted entry: the staged bytes of a few
 * transfer sizes, one way and both ways, must be a part of the transfer. */
static void fuzz_use(const ipcp__stripe_entry_t *e)
{
    static const uint64_t lens[] = {
        1, 4096, 8 << 20, 256 << 20, 1ull << 30, 1ull << 40, UINT64_MAX};
    for (size_t i = 0; i < ipcp__array_size(lens); i++) {
        for (int both = 0; both < 2; both++) {
            double share = ipcp__stripe_share(e, lens[i], both);
            uint64_t min = ipcp__stripe_engine_min(e->min_size, e->layout);
            uint64_t n = ipcp__stripe_bytes(lens[i], share, min);
            if (n >= lens[i] && n) {
                fprintf(stderr, "fuzz_stripe: %llu staged of %llu\n",
                        (unsigned long long)n, (unsigned long long)lens[i]);
                abort();
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ipcp__stripe_entry_t key, out;
    char why[512];
    if (size < 1 || size > 64 * 1024)
        return 0;
    int fd = open(fuzz_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, data + 1, size - 1) != (ssize_t)(size - 1))
        abort();
    close(fd);
    memset(&key, 0, sizeof(key));
    snprintf(key.src, sizeof(key.src), "%s", FUZZ_SRC);
    snprintf(key.dst, sizeof(key.dst), "%s", FUZZ_DST);
    key.layout = data[0] & 1 ? IPCP_STRIPE_DRIVEN : IPCP_STRIPE_RING;
    key.driver = data[0] & 2 ? 12040 : 12080;
    why[0] = '\0';
    ipcp__stripe_lookup_t r = ipcp__stripe_cache_load(
        fuzz_path, FUZZ_HOST, &key, &out, why, sizeof(why));
    if (r == IPCP_STRIPE_HIT)
        fuzz_use(&out);
    else if (!why[0])
        abort(); /* every other answer comes with its reason */
    return 0;
}
