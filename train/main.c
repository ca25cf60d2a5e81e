/* main.c — the sfvit command: dispatches to subcommands. */
#include <stdio.h>
#include <string.h>

#include "sfvit/core.h"

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        printf("usage: sfvit <train|eval|info|bench|dump|viz|data|ablate> ...\n");
        return argc < 2 ? 2 : 0;
    }
    return sf_error("unknown command '%s'", argv[1]) ? 2 : 0;
}
