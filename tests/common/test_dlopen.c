/* The shared library opened with dlopen where the static TLS block has no
 * room left, as in a Python process that imported PyTorch first: run with
 * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0, a library that asks for
 * initial-exec TLS fails to open ("cannot allocate memory in static TLS
 * block").  It then joins a job of one rank, allocates and frees memory,
 * meets its barrier and finalizes, so that its thread-local caches are
 * used.
 *
 *   test_dlopen PATH-TO-libipcpipe.so */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "ipcpipe.h"

#define SYM(h, name)                                                           \
    __extension__({                                                            \
        void *s_ = dlsym(h, #name);                                            \
        if (!s_) {                                                             \
            fprintf(stderr, "FAIL: no %s in the library: %s\n", #name,         \
                    dlerror());                                                \
            return 1;                                                          \
        }                                                                      \
        (__typeof__(&name))s_;                                                 \
    })

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_dlopen LIBRARY\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "FAIL: dlopen: %s\n", dlerror());
        return 1;
    }
    ipcp_comm_t *comm = NULL;
    ipcp_comm_params_t p;
    ipcp_alloc_params_t ap;
    void *mem = NULL;
    SYM(h, ipcp_comm_params_init)(&p);
    p.rank = 0;
    p.size = 1;
    p.job_id = "dlopen";
    ipcp_status_t st = SYM(h, ipcp_init)(&p, &comm);
    if (st == IPCP_OK) {
        SYM(h, ipcp_alloc_params_init)(&ap);
        ap.type = IPCP_MEM_HOST;
        st = SYM(h, ipcp_mem_alloc)(comm, 4096, &ap, &mem);
        if (st == IPCP_OK) {
            memset(mem, 0x5a, 4096);
            st = SYM(h, ipcp_mem_free)(comm, mem);
        }
        if (st == IPCP_OK)
            st = SYM(h, ipcp_barrier)(comm);
        ipcp_status_t fin = SYM(h, ipcp_finalize)(comm);
        if (st == IPCP_OK)
            st = fin;
    }
    if (st != IPCP_OK) {
        fprintf(stderr, "FAIL: %s: %s\n", SYM(h, ipcp_strerror)(st),
                SYM(h, ipcp_last_error)());
        return 1;
    }
    printf("ok: version %s\n", SYM(h, ipcp_version_string)());
    dlclose(h);
    return 0;
}
