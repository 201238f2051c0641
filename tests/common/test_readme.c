/* The documentation against the library: every IPCPIPE_* setting the
 * library knows must be in the settings reference (docs/settings.md), whose
 * table must name no setting the library does not know; and the README,
 * the front door, stays short (at most 12 KiB: details live in docs/).
 *
 *   test_readme docs/settings.md README.md */
#include <ctype.h>

#include "testutil.h"

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        T_FAIL("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = t_malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n)
        T_FAIL("cannot read %s", path);
    s[n] = '\0';
    fclose(f);
    return s;
}

static int known(const char *name, size_t len)
{
    for (int i = 0; i < ipcp_settings_count(); i++) {
        ipcp_setting_info_t info;
        T_OK(ipcp_setting_get(i, &info));
        if (strlen(info.name) == len && strncmp(info.name, name, len) == 0)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        T_FAIL("usage: test_readme docs/settings.md README.md");
    char *page = read_all(argv[1]);
    char row[64];
    for (int i = 0; i < ipcp_settings_count(); i++) {
        ipcp_setting_info_t info;
        T_OK(ipcp_setting_get(i, &info));
        snprintf(row, sizeof row, "| `%s` |", info.name);
        if (!strstr(page, row))
            T_FAIL("%s's settings table lacks %s", argv[1], info.name);
    }
    /* Rows of the table name only real settings. */
    for (const char *p = page; (p = strstr(p, "| `IPCPIPE_")); p++) {
        const char *name = p + 3;
        size_t len = 0;
        while (isalnum((unsigned char)name[len]) || name[len] == '_')
            len++;
        if (!known(name, len))
            T_FAIL("%s documents %.*s, which is not a setting", argv[1],
                   (int)len, name);
    }
    free(page);
    char *readme = read_all(argv[2]);
    size_t n = strlen(readme);
    if (n > 12 * 1024)
        T_FAIL("%s has %zu bytes: more than 12 KiB (move details to docs/)",
               argv[2], n);
    free(readme);
    printf("%s documents all %d settings; %s has %zu bytes\n", argv[1],
           ipcp_settings_count(), argv[2], n);
    return 0;
}
