/*
 * print_leaf.c: the leaves of the text format, for print.c: types, operator
 * attribute values, string literals and scalar constants, with floats in the
 * shortest form that reads back to the same value (0.1f, 1e-05f). Nothing
 * here binds or orders expressions; that is print.c's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h"

/* The shortest %g form that reads back as the same value (as a float when
 * single is set), so `0.1f` prints as 0.1f, not 0.100000001f. */
static void fmt_real(char *buf, size_t n, double v, bool single) {
    if (isinf(v)) {
        snprintf(buf, n, "%sinf", v < 0 ? "-" : "");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (single ? (float)back == (float)v : back == v) return;
    }
}

/* A symbolic dim in TVM's text: `?` (TVM has only Any), noted in r. */
static void put_sym_dim(strbuf *b, const char *name, ry_print_report *r) {
    ry_sb_puts(b, "?");
    r->sym_dims++;
    size_t n = strlen(r->sym_names), len = strlen(name);
    const char *p = r->sym_names;
    for (; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) /* once per name */
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0')) return;
    if (n + len + 2 < sizeof r->sym_names) snprintf(r->sym_names + n, sizeof r->sym_names - n, "%s%s", n ? "," : "", name);
}

void ry_print_types_tvm(strbuf *b, ry_type *const *ts, int n, ry_print_report *tvm) {
    for (int i = 0; i < n; i++) {
        if (i) ry_sb_puts(b, ", ");
        ry_print_type_tvm(b, ts[i], tvm);
    }
}

void ry_print_types(strbuf *b, ry_type *const *ts, int n) { ry_print_types_tvm(b, ts, n, NULL); }

void ry_print_type(strbuf *b, const ry_type *t) { ry_print_type_tvm(b, t, NULL); }

/* depth bounds the walk through recursive ADTs: a constructor field that
 * holds a ref (the gradient twin of a tree of tensors) makes the ADT's type
 * hold one. */
static bool has_ref(const ry_type *t, int depth) {
    if (!t || depth > 8) return false;
    switch (t->kind) {
    case RY_TYPE_REF: return true;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (has_ref(t->tuple.fields[i], depth)) return true;
        return false;
    case RY_TYPE_FUNC:
        for (int i = 0; i < t->func.nargs; i++)
            if (has_ref(t->func.args[i], depth)) return true;
        return has_ref(t->func.ret, depth);
    case RY_TYPE_CALL:
        /* an ADT made generic in its refs for TVM (tvm_adt.c), named bare */
        if (t->call.adt && t->call.nargs < t->call.adt->ntparams) return true;
        for (int i = 0; i < t->call.nargs; i++)
            if (has_ref(t->call.args[i], depth)) return true;
        for (int c = 0; t->call.adt && c < t->call.adt->nctors; c++)
            for (int k = 0; k < t->call.adt->ctors[c]->nfields; k++)
                if (has_ref(t->call.adt->ctors[c]->fields[k], depth + 1)) return true;
        return false;
    default: return false;
    }
}

bool ry_type_has_ref(const ry_type *t) { return has_ref(t, 0); }

/* Whether TVM can read t as an annotation: nothing to infer, no ref. */
bool ry_type_tvm_writable(const ry_type *t) {
    if (!t) return false;
    switch (t->kind) {
    case RY_TYPE_INCOMPLETE:
    case RY_TYPE_REF: return false;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (!ry_type_tvm_writable(t->tuple.fields[i])) return false;
        return true;
    case RY_TYPE_FUNC:
        for (int i = 0; i < t->func.nargs; i++)
            if (!ry_type_tvm_writable(t->func.args[i])) return false;
        return ry_type_tvm_writable(t->func.ret);
    case RY_TYPE_CALL:
        for (int i = 0; i < t->call.nargs; i++)
            if (!ry_type_tvm_writable(t->call.args[i])) return false;
        return !ry_type_has_ref(t);
    default: return true;
    }
}

void ry_print_type_tvm(strbuf *b, const ry_type *t, ry_print_report *tvm) {
    if (!t) {
        ry_sb_puts(b, "_");
        return;
    }
    switch (t->kind) {
    case RY_TYPE_TENSOR:
        if (t->tensor.ndim == 0) {
            ry_sb_puts(b, ry_dtype_name(t->tensor.dtype));
            return;
        }
        ry_sb_puts(b, "Tensor[(");
        for (int i = 0; i < t->tensor.ndim; i++) {
            const ry_dim *d = &t->tensor.dims[i];
            if (i) ry_sb_puts(b, ", ");
            if (d->kind == RY_DIM_CONST) ry_sb_printf(b, "%lld", (long long)d->value);
            else if (d->kind == RY_DIM_SYM && tvm) put_sym_dim(b, d->name, tvm);
            else if (d->kind == RY_DIM_SYM) ry_sb_puts(b, d->name);
            else ry_sb_puts(b, "?");
        }
        ry_sb_printf(b, "), %s]", ry_dtype_name(t->tensor.dtype));
        return;
    case RY_TYPE_TUPLE:
        ry_sb_puts(b, "(");
        ry_print_types_tvm(b, t->tuple.fields, t->tuple.n, tvm);
        ry_sb_puts(b, t->tuple.n == 1 ? ",)" : ")");
        return;
    case RY_TYPE_FUNC:
        ry_sb_puts(b, "fn ");
        if (t->func.ntparams) {
            ry_sb_puts(b, "[");
            ry_print_types_tvm(b, t->func.tparams, t->func.ntparams, tvm);
            ry_sb_puts(b, "]");
        }
        ry_sb_puts(b, "(");
        ry_print_types_tvm(b, t->func.args, t->func.nargs, tvm);
        ry_sb_puts(b, ") -> ");
        ry_print_type_tvm(b, t->func.ret, tvm);
        return;
    case RY_TYPE_VAR: ry_sb_puts(b, t->var.name); return;
    case RY_TYPE_CALL:
        ry_sb_puts(b, t->call.adt->name);
        if (t->call.nargs) {
            ry_sb_puts(b, "[");
            ry_print_types_tvm(b, t->call.args, t->call.nargs, tvm);
            ry_sb_puts(b, "]");
        }
        return;
    case RY_TYPE_REF:
        ry_sb_puts(b, "ref(");
        ry_print_type_tvm(b, t->ref.inner, tvm);
        ry_sb_puts(b, ")");
        return;
    case RY_TYPE_INCOMPLETE: ry_sb_puts(b, "_"); return;
    }
}

const char *ry_type_str(const ry_type *t, char *buf, size_t n) {
    strbuf b = {0};
    ry_print_type(&b, t);
    if (n) snprintf(buf, n, "%s", b.data && !b.oom ? b.data : "");
    ry_free(b.data);
    return buf;
}

static void put_string_lit(strbuf *b, const char *s) {
    ry_sb_puts(b, "\"");
    for (; *s; s++) {
        switch (*s) {
        case '"': ry_sb_puts(b, "\\\""); break;
        case '\\': ry_sb_puts(b, "\\\\"); break;
        case '\n': ry_sb_puts(b, "\\n"); break;
        case '\t': ry_sb_puts(b, "\\t"); break;
        case '\r': ry_sb_puts(b, "\\r"); break;
        default: ry_sb_put(b, s, 1);
        }
    }
    ry_sb_puts(b, "\"");
}

void ry_print_attr_value(strbuf *b, const ry_attr_value *v) {
    char num[64];
    switch (v->kind) {
    case RY_AV_NONE: ry_sb_puts(b, "None"); return;
    case RY_AV_INT: ry_sb_printf(b, "%lld", (long long)v->i); return;
    case RY_AV_FLOAT:
        fmt_real(num, sizeof num, v->f, false);
        ry_sb_printf(b, "%sf", num);
        return;
    case RY_AV_BOOL: ry_sb_puts(b, v->b ? "True" : "False"); return;
    case RY_AV_STR: put_string_lit(b, v->s ? v->s : ""); return;
    case RY_AV_LIST:
        ry_sb_puts(b, "[");
        for (int i = 0; i < v->list.n; i++) {
            if (i) ry_sb_puts(b, ", ");
            ry_print_attr_value(b, &v->list.items[i]);
        }
        ry_sb_puts(b, "]");
        return;
    }
}

void ry_print_attrs(strbuf *b, const ry_attrs *a, bool first) {
    for (int i = 0; i < a->n; i++) {
        if (!first || i) ry_sb_puts(b, ", ");
        ry_sb_printf(b, "%s=", a->items[i].name);
        ry_print_attr_value(b, &a->items[i].value);
    }
}

/* TVM's simple scalars print inline (1f, 2i64, True); others go to meta. */
bool ry_print_scalar(strbuf *b, const ry_tensor *t) {
    if (t->ndim != 0) return false;
    char num[64];
    double v = ry_tensor_get(t, 0);
    switch (t->dtype) {
    case RY_INT32: ry_sb_printf(b, "%d", *(const int32_t *)t->data); return true;
    case RY_INT64: ry_sb_printf(b, "%lldi64", (long long)*(const int64_t *)t->data); return true;
    case RY_INT8: ry_sb_printf(b, "%di8", *(const int8_t *)t->data); return true;
    case RY_INT16: ry_sb_printf(b, "%di16", *(const int16_t *)t->data); return true;
    case RY_BOOL: ry_sb_puts(b, v != 0 ? "True" : "False"); return true;
    case RY_FLOAT32:
    case RY_FLOAT64:
    case RY_FLOAT16:
        /* the text has no NaN, and infinity only as float32's `inff` */
        if (isnan(v) || (isinf(v) && t->dtype != RY_FLOAT32)) return false;
        fmt_real(num, sizeof num, v, t->dtype != RY_FLOAT64);
        ry_sb_printf(b, "%s%s", num, t->dtype == RY_FLOAT32 ? "f" : t->dtype == RY_FLOAT64 ? "f64" : "f16");
        return true;
    default: return false;
    }
}

