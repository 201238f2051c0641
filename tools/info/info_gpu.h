/* The GPU part of ipcpipe-info. */
#ifndef IPCP_TOOLS_INFO_GPU_H
#define IPCP_TOOLS_INFO_GPU_H

#include "ipcpipe.h"

/* "GPUs:" section: devices, peer access, and the path (with a reason code)
 * between processes on every pair of GPUs; says plainly when there are
 * none.  visible: CUDA_VISIBLE_DEVICES or NULL. */
void info_gpu_text(const char *visible);
/* The same as one JSON value. */
void info_gpu_json(void);

#endif
