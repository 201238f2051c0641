/* Sizes on command lines: "123", "4K", "1M+3", "4G+1", a sum of terms each
 * written as the IPCPIPE_* settings take them (ipcp_diag_parse_size). */
#ifndef IPCP_TOOLS_SIZES_H
#define IPCP_TOOLS_SIZES_H

#include <stdint.h>
#include <string.h>

#include "ipcpipe_diag.h"

/* Parses a sum that ends at '\0' or at a character of stop ("," in lists;
 * NULL for none).  Returns 0 with the end in *endp (NULL: the sum must end
 * the string), -1 on a bad term or an overflow. */
static inline int ipcp_tool_parse_size(const char *s, const char *stop,
                                       size_t *out, const char **endp)
{
    char term[32], delim[8] = "+";
    size_t total = 0;
    if (stop)
        strncat(delim, stop, sizeof(delim) - 2);
    for (;;) {
        size_t n = strcspn(s, delim), v;
        if (n == 0 || n >= sizeof(term))
            return -1;
        memcpy(term, s, n);
        term[n] = '\0';
        if (ipcp_diag_parse_size(term, &v) != IPCP_OK || total > SIZE_MAX - v)
            return -1;
        total += v;
        s += n;
        if (*s != '+')
            break;
        s++;
    }
    if (endp)
        *endp = s;
    else if (*s)
        return -1;
    *out = total;
    return 0;
}

#endif
