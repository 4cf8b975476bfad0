/*
 * parse_value.c: one expression of the text format read into a module that
 * is already parsed, in its scope (its types, constructors and globals; no
 * locals): how a value is written outside a program, e.g. gradcheck's
 * `--input 't=relay:Node(Leaf(1), Leaf(2))'`. The module's own parse is in
 * parse.c; evaluating the expression is the caller's (the interpreter).
 */
#include <string.h>

#include "ir/parse.h"
#include "tensor/oom.h"

/* A value's parse, in the entry's frame for the undo (oom.h). */
typedef struct parsing_value {
    ry_module *m;
    const char *name, *text;
    size_t len;
    lexed lx;
    parser p;
    ry_expr *e;
} parsing_value;

/* value_text -> expr EOF */
static ry_status parse_value(void *ctx, ry_error *err) {
    parsing_value *s = ctx;
    parser *p = &s->p;
    if (ry_p_open(p, s->m, s->name, s->text, s->len, &s->lx, err)) return RY_ERR;
    ry_expr *e = NULL;
    if (s->lx.meta_text)
        ry_p_fail_at(p, s->lx.meta_span, "a value cannot carry a metadata section");
    else if ((e = ry_p_expr(p)) && !ry_p_at(p, TK_EOF))
        e = ry_p_fail(p, "expected the end of the value after the expression");
    for (int i = 0; e && i < p->ngrefs; i++)
        if (!ry_module_find_global(s->m, p->grefs[i].name))
            e = ry_p_fail_at(p, p->grefs[i].span, "unknown global @%s", p->grefs[i].name);
    ry_p_close(p, &s->lx);
    s->e = e;
    return e ? RY_OK : RY_ERR;
}

static void unparse_value(void *ctx) {
    parsing_value *s = ctx;
    ry_p_abandon(&s->p, &s->lx);
}

/* Out of memory, the module keeps the nodes made so far in its arena. */
ry_status ry_module_parse_expr(ry_module *m, const char *name, const char *text, size_t len,
                               ry_expr **out, ry_error *err) {
    *out = NULL;
    parsing_value s;
    memset(&s, 0, sizeof s);
    s.m = m;
    s.name = name ? name : "<value>";
    s.text = text;
    s.len = len;
    if (ry_oom_guard(s.name, parse_value, unparse_value, &s, err)) return RY_ERR;
    *out = s.e;
    return RY_OK;
}
