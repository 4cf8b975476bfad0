/*
 * parse_value.c: one expression of the text format read into a module that
 * is already parsed, in its scope (its types, constructors and globals; no
 * locals): how a value is written outside a program, e.g. gradcheck's
 * `--input 't=relay:Node(Leaf(1), Leaf(2))'`. The module's own parse is in
 * parse.c; evaluating the expression is the caller's (the interpreter).
 */
#include "ir/parse.h"

/* value_text -> expr EOF */
ry_status ry_module_parse_expr(ry_module *m, const char *name, const char *text, size_t len,
                               ry_expr **out, ry_error *err) {
    *out = NULL;
    lexed lx;
    parser p;
    if (ry_p_open(&p, m, name ? name : "<value>", text, len, &lx, err)) return RY_ERR;
    ry_expr *e = NULL;
    if (lx.meta_text)
        ry_p_fail_at(&p, lx.meta_span, "a value cannot carry a metadata section");
    else if ((e = ry_p_expr(&p)) && !ry_p_at(&p, TK_EOF))
        e = ry_p_fail(&p, "expected the end of the value after the expression");
    for (int i = 0; e && i < p.ngrefs; i++)
        if (!ry_module_find_global(m, p.grefs[i].name))
            e = ry_p_fail_at(&p, p.grefs[i].span, "unknown global @%s", p.grefs[i].name);
    ry_p_close(&p, &lx);
    *out = e;
    return e ? RY_OK : RY_ERR;
}
