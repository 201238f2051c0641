/* What the library says of itself and of its names: its version, the
 * paths' names, the parameters' defaults. */
#include <string.h>

#include "ipcpipe.h"

#ifndef IPCP_VERSION_STRING
#define IPCP_VERSION_STRING "0.1.0"
#endif

unsigned ipcp_version(void)
{
    return IPCP_VERSION;
}

const char *ipcp_version_string(void)
{
    return IPCP_VERSION_STRING;
}

const char *ipcp_path_name(ipcp_path_t path)
{
    switch (path) {
    case IPCP_PATH_AUTO:
        return "auto";
    case IPCP_PATH_DIRECT:
        return "direct";
    case IPCP_PATH_STAGED:
        return "staged";
    case IPCP_PATH_EAGER:
        return "eager";
    case IPCP_PATH_STRIPED:
        return "striped";
    case IPCP_PATH_LANE:
        return "lane";
    case IPCP_PATH_BOUNCE:
        return "bounce";
    case IPCP_PATH_REMOTE:
        return "remote";
    }
    return "unknown";
}

void ipcp_comm_params_init(ipcp_comm_params_t *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(*params);
    params->rank = -1;
    params->size = -1;
    params->path = IPCP_PATH_AUTO;
}
