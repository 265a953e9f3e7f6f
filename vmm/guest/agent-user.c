/* SPDX-License-Identifier: MIT */
/* The user an exec runs as (an OCI image's User): USER, UID, USER:GROUP or UID:GID, looked up
 * in the guest's /etc/passwd and /etc/group (read here: the static agent loads no NSS
 * module). A numeric uid need not exist; its group is then 0, as container runtimes do. */
#include "vmm/guest/agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool all_digits(const char *s)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

/* Finds name (or the numeric id, by_id) in a passwd/group-style file: field 3 and 4. */
static int lookup(const char *file, const char *name, bool by_id, unsigned *ret_id,
                  unsigned *ret_gid)
{
        char line[1024];
        FILE *f = fopen(file, "re");
        int r = -ENOENT;

        while (f && r < 0 && fgets(line, sizeof(line), f)) {
                char *save = NULL, *fields[4] = {0};
                int n = 0;

                for (char *t = strtok_r(line, ":\n", &save); t && n < 4;
                     t = strtok_r(NULL, ":\n", &save))
                        fields[n++] = t;
                if (n < 3 || !all_digits(fields[2]))
                        continue;
                if (by_id ? strcmp(fields[2], name) != 0 : strcmp(fields[0], name) != 0)
                        continue;
                *ret_id = (unsigned)strtoul(fields[2], NULL, 10);
                if (ret_gid)
                        *ret_gid = n > 3 && all_digits(fields[3])
                                           ? (unsigned)strtoul(fields[3], NULL, 10)
                                           : 0;
                r = 0;
        }
        if (f)
                fclose(f);
        return r;
}

int ga_user_resolve(const char *spec, unsigned *ret_uid, unsigned *ret_gid)
{
        char user[256], *group;
        unsigned uid = 0, gid = 0;
        int r;

        if (strlen(spec) >= sizeof(user))
                return -EINVAL;
        snprintf(user, sizeof(user), "%s", spec);
        group = strchr(user, ':');
        if (group)
                *group++ = '\0';
        r = lookup("/etc/passwd", user, all_digits(user), &uid, &gid);
        if (r < 0 && all_digits(user)) {
                uid = (unsigned)strtoul(user, NULL, 10);
                gid = 0;
                r = 0;
        }
        if (r < 0)
                return r;
        if (group && all_digits(group))
                gid = (unsigned)strtoul(group, NULL, 10);
        else if (group && lookup("/etc/group", group, false, &gid, NULL) < 0)
                return -ENOENT;
        *ret_uid = uid;
        *ret_gid = gid;
        return 0;
}
