/*
 * version.c: the version of the library linked (base.h), which a program
 * compiled against another version's headers can compare with
 * RELAYC_VERSION.
 */
#include "relayc/base.h"

const char *ry_version(void) { return RELAYC_VERSION; }
