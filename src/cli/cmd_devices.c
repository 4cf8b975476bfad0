/*
 * cmd_devices.c: `relayc devices`: the devices the machine's drivers
 * report, one per line, numbered as `--target opencl:N` / `cuda:N` and
 * RELAYC_OPENCL_DEVICE / RELAYC_CUDA_DEVICE take them; and, for a device
 * target without a device, why.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char *help =
    "usage: relayc devices\n"
    "\n"
    "Lists the devices kernels can run on: the CPU, then each device the\n"
    "OpenCL and CUDA drivers report (platform, name, memory, compute units),\n"
    "numbered as `--target opencl:N` / `--target cuda:N` and\n"
    "RELAYC_OPENCL_DEVICE=N / RELAYC_CUDA_DEVICE=N take them; for a target\n"
    "without a device, why.\n";

int cmd_devices(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        }
        return cli_fail("devices", "unknown option '%s' (see relayc devices --help)", argv[i]);
    }
    printf("cpu        the host (always)\n");
    ry_device_info d[32];
    int n = ry_devices(d, 32);
    for (int i = 0; i < n && i < 32; i++) {
        char id[32];
        snprintf(id, sizeof id, "%s:%d", d[i].target, d[i].index);
        printf("%-10s %s / %s, %.1f GiB, %d compute units\n", id, d[i].platform, d[i].name,
               (double)d[i].memory / (1024.0 * 1024 * 1024), d[i].compute_units);
    }
    static const char *const device_targets[] = {"opencl", "cuda"};
    for (int k = 0; k < 2; k++) {
        int have = 0;
        for (int i = 0; i < n && i < 32; i++) have += strcmp(d[i].target, device_targets[k]) == 0;
        const ry_target *t;
        ry_error err = {0};
        if (!have && ry_target_find(device_targets[k], &t, &err) != RY_OK)
            printf("(%s: %s)\n", device_targets[k], err.msg);
    }
    return 0;
}
