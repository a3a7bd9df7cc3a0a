/* herd lab: placeholder until the lab lands (see src/bench/lab*.c). */
#include <stdio.h>

#include "cmd/cmd.h"

int cmd_lab(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "herd: lab is not built yet\n");
    return 1;
}
