/* The README is the front door: every IPCPIPE_* setting the library knows
 * must be in its settings table, and the table must name no setting the
 * library does not know. */
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
    if (argc != 2)
        T_FAIL("usage: test_readme README.md");
    char *readme = read_all(argv[1]);
    char row[64];
    for (int i = 0; i < ipcp_settings_count(); i++) {
        ipcp_setting_info_t info;
        T_OK(ipcp_setting_get(i, &info));
        snprintf(row, sizeof row, "| `%s` |", info.name);
        if (!strstr(readme, row))
            T_FAIL("README.md's settings table lacks %s", info.name);
    }
    /* Rows of the table name only real settings. */
    for (const char *p = readme; (p = strstr(p, "| `IPCPIPE_")); p++) {
        const char *name = p + 3;
        size_t len = 0;
        while (isalnum((unsigned char)name[len]) || name[len] == '_')
            len++;
        if (!known(name, len))
            T_FAIL("README.md documents %.*s, which is not a setting",
                   (int)len, name);
    }
    free(readme);
    printf("README.md documents all %d settings\n", ipcp_settings_count());
    return 0;
}
