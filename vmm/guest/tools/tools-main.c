/* SPDX-License-Identifier: MIT */
/* forklet-tools main: dispatch on argv[0] (pgrep, pkill, timeout, wget), or
 * `forklet-tools NAME ARGS...`. */
#include "vmm/guest/tools/tools.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
        const char *name = argc > 0 ? strrchr(argv[0], '/') : NULL;

        name = name ? name + 1 : (argc > 0 ? argv[0] : "");
        if (strcmp(name, "forklet-tools") == 0 && argc > 1) {
                argc--;
                argv++;
                name = argv[0];
        }
        if (strcmp(name, "pgrep") == 0)
                return gt_pgrep_main(argc, argv, false);
        if (strcmp(name, "pkill") == 0)
                return gt_pgrep_main(argc, argv, true);
        if (strcmp(name, "timeout") == 0)
                return gt_timeout_main(argc, argv);
        if (strcmp(name, "wget") == 0)
                return gt_wget_main(argc, argv);
        fprintf(stderr, "usage: forklet-tools pgrep|pkill|timeout|wget ARGS... (or call it by one "
                        "of these names)\n");
        return 2;
}
