/* The tools' CUDA driver table (tool_cuda.h). */
#include "tool_cuda.h"

#ifdef IPCP_HAVE_CUDA

#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdio.h>

#include "ipcpipe_diag.h"

#define TOOL_CU_ABI_CHECK_(name, abi, old)                                     \
    _Static_assert(                                                            \
        __builtin_types_compatible_p(__typeof__(&name), PFN_##name##_v##abi),  \
        #name " does not have the ABI of CUDA version " #abi);
TOOL_CU_FUNCS(TOOL_CU_ABI_CHECK_)
#undef TOOL_CU_ABI_CHECK_
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuEventElapsedTime),
                                            PFN_cuEventElapsedTime_v2000),
               "cuEventElapsedTime's original ABI differs");

tool_cu_table_t tool_cu;

static pthread_once_t tool_cu_once = PTHREAD_ONCE_INIT;
static char tool_cu_error[256];

static void tool_cu_load_once(void)
{
#define TOOL_CU_FETCH_(name, abi, old)                                         \
    do {                                                                       \
        void *fn = ipcp_diag_cuda_proc(#name, abi);                            \
        if (!fn && (old))                                                      \
            fn = ipcp_diag_cuda_proc(#name, old);                              \
        if (!fn) {                                                             \
            snprintf(tool_cu_error, sizeof(tool_cu_error), "%s",               \
                     ipcp_last_error());                                       \
            return;                                                            \
        }                                                                      \
        tool_cu.pfn_##name = (__typeof__(tool_cu.pfn_##name))fn;               \
    } while (0);
    TOOL_CU_FUNCS(TOOL_CU_FETCH_)
#undef TOOL_CU_FETCH_
}

int tool_cu_load(char *err, size_t elen)
{
    pthread_once(&tool_cu_once, tool_cu_load_once);
    if (!tool_cu_error[0])
        return 0;
    if (err && elen)
        snprintf(err, elen, "%s", tool_cu_error);
    return -1;
}

const char *tool_cu_strerror(CUresult r, char *buf, size_t len)
{
    const char *name = NULL, *text = NULL;
    if (tool_cu_load(NULL, 0) == 0) {
        if (TOOL_CU(cuGetErrorName)(r, &name) != CUDA_SUCCESS)
            name = NULL;
        if (TOOL_CU(cuGetErrorString)(r, &text) != CUDA_SUCCESS)
            text = NULL;
    }
    if (name)
        snprintf(buf, len, "%s: %s", name, text ? text : "no description");
    else
        snprintf(buf, len, "CUresult %d", (int)r);
    return buf;
}

#endif
