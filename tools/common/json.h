/* Writing JSON strings from the tools (bench, info). */
#ifndef IPCP_TOOLS_JSON_H
#define IPCP_TOOLS_JSON_H

#include <stdio.h>

/* s as a JSON string literal (NULL as ""), control characters escaped. */
static inline void ipcp_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

#endif
