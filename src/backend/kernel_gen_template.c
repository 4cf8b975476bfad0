/*
 * kernel_gen_template.c: a kernel template spelled in a dialect
 * (kernel_gen_nn.h's ry_gen_expand). The nn family's kernels are short
 * fixed texts that differ between dialects only in a few words, so they
 * are written once with placeholders rather than assembled call by call.
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend/kernel_gen_nn.h"

char *ry_gen_expand(const ry_dialect *d, const char *tmpl, const ry_gen_types *t) {
    ry_sbuf b = {0};
    ry_sbuf_add(&b, "%s", d->prelude);
    for (const char *p = tmpl; *p; p++) {
        if (*p != '@' || !p[1]) {
            /* runs of plain text at once: most of a template */
            size_t n = 1;
            while (p[n] && p[n] != '@') n++;
            ry_sbuf_add(&b, "%.*s", (int)n, p);
            p += n - 1;
            continue;
        }
        const char *s = NULL;
        char u64[32];
        switch (*++p) {
        case 'U': /* the unsigned 64-bit integer: "unsigned long" in OpenCL C */
            snprintf(u64, sizeof u64, "unsigned %s", d->i64);
            s = u64;
            break;
        case 'K': s = d->kernel; break;
        case 'G': s = d->global; break;
        case 'I': s = d->index; break;
        case 'L': s = d->i64; break;
        case 'N': s = d->nan; break;
        case 'T': s = t ? t->T : NULL; break;
        case 'A': s = t ? t->A : NULL; break;
        case 'X': s = t ? t->X : NULL; break;
        default: break;
        }
        if (!s) { /* a type the device lacks, or a bad placeholder */
            free(b.s);
            return NULL;
        }
        ry_sbuf_add(&b, "%s", s);
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
