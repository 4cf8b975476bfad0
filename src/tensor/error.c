/*
 * error.c: located errors as values. An error copies the offending source
 * line so it can be printed with a caret after the module is gone.
 */
#include <string.h>

#include "relayc/base.h"

static void copy_line(ry_error *err, ry_span span) {
    err->source_line[0] = '\0';
    if (!span.src || !span.src->text || span.line <= 0) return;
    const char *p = span.src->text, *end = p + span.src->len;
    for (int line = 1; line < span.line && p < end; p++)
        if (*p == '\n') line++;
    size_t n = 0;
    while (p + n < end && p[n] != '\n' && n + 1 < sizeof err->source_line) n++;
    memcpy(err->source_line, p, n);
    err->source_line[n] = '\0';
}

ry_status ry_error_vat(ry_error *err, ry_span span, const char *fmt, va_list ap) {
    if (!err) return RY_ERR;
    snprintf(err->file, sizeof err->file, "%s", span.src && span.src->name ? span.src->name : "");
    err->line = span.line;
    err->col = span.col;
    err->len = span.len;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    copy_line(err, span);
    return RY_ERR;
}

ry_status ry_error_at(ry_error *err, ry_span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ry_error_vat(err, span, fmt, ap);
    va_end(ap);
    return RY_ERR;
}

ry_status ry_error_file(ry_error *err, const char *path, const char *fmt, ...) {
    if (!err) return RY_ERR;
    va_list ap;
    va_start(ap, fmt);
    ry_error_vat(err, RY_NO_SPAN, fmt, ap);
    va_end(ap);
    snprintf(err->file, sizeof err->file, "%s", path ? path : "");
    return RY_ERR;
}

void ry_error_prefix(ry_error *err, const char *fmt, ...) {
    if (!err) return;
    char head[RY_ERROR_MSG_MAX], old[RY_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", head, old);
}

void ry_error_print(FILE *f, const ry_error *err) {
    if (err->file[0] && err->line > 0)
        fprintf(f, "%s:%d:%d: error: %s\n", err->file, err->line, err->col, err->msg);
    else if (err->file[0])
        fprintf(f, "%s: error: %s\n", err->file, err->msg);
    else
        fprintf(f, "error: %s\n", err->msg);
    int width = (int)strlen(err->source_line);
    if (!err->source_line[0] || err->col <= 0 || err->col > width + 1) return;
    fprintf(f, "  %s\n  ", err->source_line);
    for (int i = 1; i < err->col; i++) fputc(err->source_line[i - 1] == '\t' ? '\t' : ' ', f);
    fputc('^', f);
    for (int i = 1; i < err->len && err->col - 1 + i < width; i++) fputc('~', f);
    fputc('\n', f);
}
