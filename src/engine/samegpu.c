/* Two processes on one GPU (issue 24).  Without MPS the GPU runs the work
 * of one process's context at a time and switches between them in time
 * slices, so a transfer between two ranks on one GPU may wait for the
 * other process's slice before its copy runs; with the MPS server the
 * processes' work goes through one shared context and runs at once.  On
 * one H200 an 8 B direct device transfer took ~170 us a half round trip
 * without MPS and ~22 us with the daemon running.  The receiver chooses
 * the path and already compares the GPUs (the sender's identity comes in
 * its RTS), so it is the one that says so, once per peer. */
#include <stdio.h>

#include "common/log.h"
#include "engine/samegpu.h"

void ipcp__samegpu_text(char *buf, size_t len, int rank, int device, int mps)
{
    static const char slices[] =
        "each process's work gets its own time slices of the GPU, so a "
        "small transfer waits for the other's slice (8 B half round trip "
        "~170 us measured on one H200; ~22 us with the MPS daemon running: "
        "nvidia-cuda-mps-control -d)";
    if (mps > 0)
        snprintf(buf, len,
                 "rank %d uses the same GPU as this process (GPU %d), with "
                 "MPS: both processes' work runs on it at once, with no "
                 "time slices to wait for (8 B half round trip ~22 us "
                 "measured on one H200 with MPS, ~170 us without)",
                 rank, device);
    else if (mps == 0)
        snprintf(buf, len,
                 "rank %d uses the same GPU as this process (GPU %d), "
                 "without MPS: %s",
                 rank, device, slices);
    else
        snprintf(buf, len,
                 "rank %d uses the same GPU as this process (GPU %d); MPS "
                 "unknown (the driver does not report it); without MPS %s",
                 rank, device, slices);
}

int ipcp__samegpu(ipcp_comm_t *comm, const ipcp__msg_rts_t *rts,
                  const ipcp_request_t *req)
{
    const ipcp__backend_ops_t *ops = comm->dev_ops;
    ipcp__backend_t *be = ipcp__dev(comm);
    uint64_t mine;
    return be && req->attr.type == IPCP_MEM_CUDA &&
           rts->src_type == (int32_t)IPCP_MEM_CUDA && rts->nreach >= 1 &&
           ops->device_reach &&
           ops->device_reach(be, req->attr.device, &mine, 1) == 1 &&
           mine == rts->reach[0];
}

void ipcp__samegpu_note(ipcp_comm_t *comm, ipcp__peer_t *peer,
                        const ipcp__msg_rts_t *rts, const ipcp_request_t *req)
{
    const ipcp__backend_ops_t *ops = comm->dev_ops;
    ipcp__backend_t *be = ipcp__dev(comm);
    char text[512];

    if (peer->samegpu_noted ||
        !ipcp__log_enabled(IPCP_LOG_INFO, IPCP_SUB_ENGINE) ||
        !ipcp__samegpu(comm, rts, req))
        return;
    peer->samegpu_noted = 1;
    ipcp__samegpu_text(text, sizeof(text), peer->rank, req->attr.device,
                       ops->device_mps ? ops->device_mps(be, req->attr.device)
                                       : -1);
    IPCP_INFO(IPCP_SUB_ENGINE, "%s", text);
}
