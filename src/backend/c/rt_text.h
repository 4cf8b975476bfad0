/*
 * rt_text.h: the export runtime's source files (the .c files of src/backend/c/rt/) as
 * strings, built into relayc by tools/embed_c_rt.sh, so an export writes
 * them into the artifact with no file of the repository at hand.
 */
#ifndef RELAYC_BACKEND_C_RT_TEXT_H
#define RELAYC_BACKEND_C_RT_TEXT_H

/* The text of rt/NAME.c ("core", "gemm", ...), or NULL if there is none. */
const char *ry_c_rt_text(const char *name);

#endif
