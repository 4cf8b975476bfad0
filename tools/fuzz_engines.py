#!/usr/bin/env python3
"""fuzz_engines.py: differential fuzzing of relayc's engines.

Generates random, well-typed Relay programs (text format 0.0.5) with random
.npy inputs, runs each through the reference interpreter (--engine interp)
and the compiled engine (--engine vm --level 0, 1, 2; big programs also at
level 2 on two threads and at level 1 without SIMD), again with --grad when
a parameter is a float tensor, sometimes `relayc gradcheck` (float64 central
finite differences, sometimes --second-order) on smooth programs, and
compares: ints and bools exactly, float32 with rtol 1e-4 / atol 1e-5,
float64 with rtol 1e-9 / atol 1e-10 (gradients 10x looser), NaN equal to
NaN.

  tools/fuzz_engines.py --relayc build/relayc --seed S --count N --out DIR
      [--force big|special|zero|anydim|train]... [--no-grad]
      [--gradcheck-rate P] [--valgrind-rate P] [--keep-passing]
      [--report-known] [--timeout SEC] [-v]
  tools/fuzz_engines.py --seed S --print      # only print program S

Program i (0 <= i < N) uses seed S + i, so `--seed X --count 1` reproduces
one program (its text and inputs depend on the seed only). Exit status 1
when something was found. Only Python 3 and NumPy are needed.

Findings are saved as DIR/<seed>_<kinds>/: program.relay, inputs/*.npy,
cmd.sh (every command run), out_<engine>[_grad]/ and .log for each run,
README.txt with what differed. Kinds: mismatch (outputs or gradients
differ from the interpreter's), error (one engine fails, the other not),
crash (a signal or an exit status other than 0/1, e.g. ASan's), hang
(--timeout), internal ("(a bug in ...)" messages), gradcheck, valgrind.
Programs `relayc check` rejects are generator bugs (DIR/<seed>_genbug/).
Not findings, only counted: every engine failing alike (both_error*), a
gradient rule's limitation in code that level 2 removed as dead
(grad_limit_dead_code), a run-time error in dead code that DCE removed at
levels 1-2 (dce_removed_error), and KNOWN problems (known_*, saved with
--report-known). With an ASan build: ASAN_OPTIONS=exitcode=23
UBSAN_OPTIONS=exitcode=24 make its reports crashes.

Modes (each program draws them; --force sets one for all): big (tensors up
to 70,000 elements: the pool's split kernels and SIMD tails), special (NaN,
inf, -0, huge values among the float inputs), zero (0-sized dims), anydim
(`?` and symbolic dims in @main's signature), train (--train --seed: nn.dropout
masks; every dropout is returned so none is dead code).

What the generator covers: elementwise and broadcast chains over ranks 0-4
with size-1 dims and scalar literals; float32, float64, int32 and bool
tensors; reductions (sum/mean/max/min/argmax/argmin with axis, keepdims,
exclude); nn.dense, nn.matmul, nn.batch_matmul (transposes, batch
broadcast); transpose, reshape (-1, 0), concatenate, stack, split
(sections/indices), take (clip/wrap/fast, axis None, batch_dims), expand_dims,
squeeze, broadcast_to, collapse_sum_like, one_hot, cast; softmax,
log_softmax, layer_norm, bias_add; conv2d (strides, padding, dilation,
groups), conv2d_transpose, max/avg/global/adaptive pooling (ceil_mode,
count_include_pad), batch_norm, instance_norm, group_norm, l2_normalize,
prelu, lrn, pad, batch_flatten, dropout; comparisons, logical ops, where;
constant-only work with edge values (INT_MIN / -1, casts of huge floats)
that folding computes at compile time; let chains that reuse values after
later ops, and values kept in tuples/refs/lists/options/closures while
elementwise ops could overwrite them in place; tuples, projections and
tuple patterns; if/else on data-dependent conditions; closures capturing
tensors, closures chosen by if, closures returned from globals; polymorphic
higher-order globals (twice, compose, map, foldl, tree folds, id, swap);
recursive loop globals with invariant parameters (hoist), swapped
"invariants", non-tail recursion and data-dependent trip counts; RNN-style
loops with embedding lookups, dense and bias_add on invariant weights (the
hoist pass's table rewrite); List/Option/Tree ADTs and match; references
(ref/ref_read/ref_write, a ref updated by a closure called in a loop).
"""

import argparse
import os
import re
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np

FLOATS = ("float32", "float64")
MAX_SIZE = 96  # elements per tensor


def prod(s):
    p = 1
    for d in s:
        p *= d
    return p


class T:
    """A tensor type."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = dtype

    def __eq__(self, o):
        return isinstance(o, T) and self.shape == o.shape and self.dtype == o.dtype

    def __hash__(self):
        return hash((self.shape, self.dtype))

    @property
    def rank(self):
        return len(self.shape)

    @property
    def size(self):
        return prod(self.shape)

    def text(self):
        if not self.shape:
            return self.dtype
        return "Tensor[(%s), %s]" % (", ".join(str(d) for d in self.shape), self.dtype)


class Var:
    __slots__ = ("name", "t", "mag", "dyn", "text")

    def __init__(self, name, t, mag, dyn=False):
        self.name = name
        self.t = t
        self.mag = mag  # an estimate of the largest absolute value
        self.dyn = dyn  # its static type has `?` or symbolic dims (anydim mode)
        self.text = None


def lit(dtype, v):
    if dtype == "bool":
        return "True" if v else "False"
    if dtype == "int32":
        return str(int(v))
    s = ("%.3g" % v)
    if "." not in s and "e" not in s:
        s = s  # integers like 2 are written 2f
    return s + ("f" if dtype == "float32" else "f64")


def ilist(xs):
    return "[%s]" % ", ".join(str(x) for x in xs)


def az(shape):
    """reshape's allowzero for a new shape with a 0 dim (0 means "copy" otherwise)."""
    return ", allowzero=True" if 0 in shape else ""


def bcast(a, b):
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            return None
        out.append(max(x, y))
    return tuple(out)


class Block:
    """A sequence of let bindings in one scope."""

    def __init__(self, gen, env, ctx, focus=None, indent=1):
        self.gen = gen
        self.env = list(env)  # visible tensor variables
        self.raw_dyn = set()  # non-tensor bindings holding values of dynamic types
        self.lines = []
        self.ctx = ctx  # "main" (may add parameters) or "global"
        self.focus = focus  # a type the block should produce
        self.indent = indent

    def emit(self, expr, t, mag):
        name = self.gen.fresh()
        self.lines.append("let %s = %s;" % (name, expr))
        dyn = False
        if t.rank and not expr.startswith("reshape("):
            dyn = self.refs_dyn(expr)
        v = Var(name, t, min(mag, 1e30), dyn)
        self.env.append(v)
        return v

    def refs_dyn(self, expr):
        refs = set(re.findall(r"%[a-z]+\d+", expr))
        return any(u.dyn for u in self.env if u.name in refs) or bool(refs & self.raw_dyn)

    def emit_raw(self, name, expr):
        """A binding of a non-tensor value (tuple, list, ref, closure...)."""
        self.lines.append("let %s = %s;" % (name, expr))
        if self.refs_dyn(expr):
            self.raw_dyn.add(name)

    def text(self, result):
        pad = "  " * self.indent
        return "\n".join(pad + l for l in self.lines + [result])


FORCE = set()  # --force MODE: modes every program uses


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.seed = seed
        self.n = 0
        self.params = []  # Var, with numpy values in self.values
        self.values = {}
        self.globals = []
        self.need = set()  # prelude parts
        self.nonsmooth = False  # an op whose derivative jumps (for gradcheck)
        self.fdtype = "float64" if self.r.random() < 0.2 else "float32"
        self.nglobal = 0
        self.features = set()
        r = self.r
        self.big = r.random() < 0.08        # large tensors: the parallel and SIMD paths
        self.maxsize = 70000 if self.big or "big" in FORCE else MAX_SIZE
        self.special = r.random() < 0.12    # NaN, inf, -0, huge values among the inputs
        self.zero = r.random() < 0.04       # zero-size dims
        self.anydim = r.random() < 0.25     # `?` and symbolic dims in @main's signature
        self.train = r.random() < 0.1       # run with --train: nn.dropout draws, batch_norm uses batch stats
        self.keep_alive = []                # values @main must return (dropouts: a dead one would be removed)
        for k in ("big", "special", "zero", "anydim", "train"):
            if k in FORCE:
                setattr(self, k, True)
            if getattr(self, k):
                self.features.add(k)

    # ---- names and values ----
    def fresh(self, p="v"):
        self.n += 1
        return "%%%s%d" % (p, self.n)

    def rand_shape(self, maxrank=4):
        r = self.r
        rank = r.choice([0, 1, 1, 2, 2, 2, 3, 3, 4][: 9 if maxrank >= 4 else (7 if maxrank == 3 else 5)])
        rank = min(rank, maxrank)
        dims = [1, 2, 2, 3, 3, 4, 5]
        if self.big:
            dims = [1, 2, 3, 16, 33, 64, 130, 257, 1024]
        if self.zero:
            dims = dims + [0]
        while True:
            s = tuple(r.choice(dims) for _ in range(rank))
            if prod(s) <= self.maxsize:
                return s

    def new_param(self, t, kind="normal", static=False):
        name = self.fresh("p")
        r = np.random.RandomState(self.r.randrange(2**31))
        if t.dtype in FLOATS:
            val = r.standard_normal(t.shape).astype(t.dtype)
            mag = 4.0
            if self.special and val.size and self.r.random() < 0.6:
                sp = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 3e9, 1e-40, 65504.0])
                mask = r.random_sample(val.shape) < 0.25
                val = np.where(mask, r.choice(sp, size=val.shape), val).astype(t.dtype)
        elif t.dtype == "int32":
            lo, hi = (-5, 6) if kind == "normal" else kind
            val = r.randint(lo, hi, size=t.shape).astype(np.int32)
            mag = max(abs(lo), abs(hi))
        else:
            val = r.randint(0, 2, size=t.shape).astype(bool)
            mag = 1
        v = Var(name, t, mag)
        v.text = t.text() if static else self.param_type_text(t)
        v.dyn = v.text != t.text()
        self.params.append(v)
        self.values[name[1:]] = np.asarray(val)
        return v

    # ---- operands ----
    def pick(self, b, pred=None, prefer_focus=True):
        c = [v for v in b.env if (pred is None or pred(v))]
        if not c:
            return None
        if prefer_focus and b.focus is not None and self.r.random() < 0.5:
            f = [v for v in c if v.t == b.focus]
            if f:
                return self.r.choice(f)
        # prefer recent values, but keep old ones alive (in-place hazards)
        if self.r.random() < 0.6:
            return c[-1 - min(len(c) - 1, int(self.r.expovariate(0.7)))]
        return self.r.choice(c)

    def spick(self, b, pred=None, prefer_focus=True):
        """pick, among values of static types only."""
        return self.pick(b, lambda v: not v.dyn and (pred is None or pred(v)), prefer_focus)

    def soperand(self, b, t, maxmag=1e4):
        """operand, of a static type."""
        v = self.operand(b, t, maxmag)
        if v.dyn:
            v = b.emit("reshape(%s, newshape=%s%s)" % (v.name, ilist(t.shape), az(t.shape)), t, v.mag)
        return v

    def operand(self, b, t, maxmag=1e4):
        """A value of exactly type t: an existing one, a new parameter, or one built."""
        r = self.r
        same = [v for v in b.env if v.t == t and v.mag <= maxmag]
        if same and r.random() < 0.55:
            return r.choice(same)
        if b.ctx == "main" and r.random() < 0.6:
            return self.new_param(t)
        # build from something in scope
        src = [v for v in b.env if v.t.dtype == t.dtype and v.mag <= maxmag]
        k = r.random()
        if src and k < 0.35:
            s = r.choice(src)
            if s.t.size == t.size and s.t.shape != t.shape:
                return b.emit("reshape(%s, newshape=%s%s)" % (s.name, ilist(t.shape or []), az(t.shape)), t, s.mag)
            red = b.emit("sum(%s)" % s.name, T((), t.dtype), s.mag * s.t.size)
            if t.dtype in FLOATS:
                red = b.emit("tanh(%s)" % red.name, red.t, 1.0)
            elif t.dtype == "int32":
                red = b.emit("clip(%s, a_min=-7f, a_max=7f)" % red.name, red.t, 7)
                self.nonsmooth = True
            return b.emit('broadcast_to(%s, shape=%s)' % (red.name, ilist(t.shape)), t, red.mag)
        if t.dtype == "bool":
            return b.emit('full(%s, shape=%s, dtype="bool")' % (lit("bool", r.random() < 0.5), ilist(t.shape)), t, 1)
        if k < 0.6 and t.size > 0:
            fn = r.choice(["ones", "zeros"])
            return b.emit('%s(shape=%s, dtype="%s")' % (fn, ilist(t.shape), t.dtype), t, 1)
        val = r.choice([0.5, -1.5, 2, 0.25, 3]) if t.dtype in FLOATS else r.choice([1, 2, -3, 4])
        return b.emit('full(%s, shape=%s, dtype="%s")' % (lit(t.dtype, val), ilist(t.shape), t.dtype), t, abs(val))

    def bcast_partner(self, b, v):
        """A value whose shape broadcasts with v's (same dtype), maybe a literal."""
        r = self.r
        t = v.t
        k = r.random()
        if k < 0.2:
            val = r.choice([0.5, 2, -1, 1.5, 0.1]) if t.dtype in FLOATS else r.choice([1, 2, -1, 3])
            if t.dtype == "bool":
                val = r.random() < 0.5
            return lit(t.dtype, val), abs(float(val)), t.shape
        cands = [u for u in b.env if u is not v and u.t.dtype == t.dtype and bcast(u.t.shape, t.shape)
                 and prod(bcast(u.t.shape, t.shape)) <= self.maxsize]
        if cands and k < 0.6:
            u = r.choice(cands)
            return u.name, u.mag, bcast(u.t.shape, t.shape)
        if k < 0.68:
            return v.name, v.mag, t.shape  # the value with itself
        s = list(t.shape)
        m = r.random()
        if m < 0.3 and s:
            s = s[r.randint(0, len(s)):]  # drop leading dims
        elif m < 0.7:
            s = [d if r.random() < 0.6 else 1 for d in s]
        elif m < 0.85 and len(s) < 4:
            s = [r.choice([1, 2, 3])] + s
            if prod(s) > self.maxsize:
                s = s[1:]
        u = self.operand(b, T(s, t.dtype))
        return u.name, u.mag, bcast(u.t.shape, t.shape)

    # ---- statements ----
    def st_unary(self, b):
        r = self.r
        v = self.pick(b)
        if v is None:
            return False
        d = v.t.dtype
        if d == "bool":
            b.emit("logical_not(%s)" % v.name, v.t, 1)
            return True
        if d == "int32":
            op = r.choice(["negative", "abs", "nn.relu", "copy", "clip", "clip"])
            if op == "clip":
                lo = r.randint(-6, 0)
                b.emit("clip(%s, a_min=%sf, a_max=%sf)" % (v.name, lo, lo + r.randint(0, 8)), v.t, 8)
            else:
                b.emit("%s(%s)" % (op, v.name), v.t, v.mag)
            if op in ("abs", "nn.relu", "clip"):
                self.nonsmooth = True
            return True
        ops = ["tanh", "sigmoid", "negative", "exp", "log", "sqrt", "rsqrt", "abs", "nn.relu",
               "nn.leaky_relu", "clip", "copy", "softmax", "log_softmax", "layer_norm", "stop_gradient"]
        op = r.choice(ops)
        x, m = v.name, v.mag
        if op == "exp" and m > 8:
            x = b.emit("tanh(%s)" % x, v.t, 1).name
            m = 1
        if op in ("log", "sqrt", "rsqrt"):
            sq = b.emit("multiply(%s, %s)" % (x, x), v.t, m * m)
            x = b.emit("add(%s, %s)" % (sq.name, lit(d, 0.5)), v.t, m * m + 0.5).name
            m = m * m + 0.5
        if op == "exp":
            b.emit("exp(%s)" % x, v.t, np.exp(min(m, 60)))
        elif op == "log":
            b.emit("log(%s)" % x, v.t, abs(np.log(max(m, 1.0))) + 1)
        elif op == "sqrt":
            b.emit("sqrt(%s)" % x, v.t, np.sqrt(m))
        elif op == "rsqrt":
            b.emit("rsqrt(%s)" % x, v.t, 1.5)
        elif op in ("tanh", "sigmoid"):
            b.emit("%s(%s)" % (op, x), v.t, 1)
        elif op == "nn.leaky_relu":
            b.emit("nn.leaky_relu(%s, alpha=%s)" % (x, lit("float32", r.choice([0.1, 0.25, 0.5]))), v.t, m)
            self.nonsmooth = True
        elif op == "clip":
            lo = r.choice([-2, -1, -0.5, 0])
            b.emit("clip(%s, a_min=%sf, a_max=%sf)" % (x, lit("float32", lo)[:-1], lit("float32", lo + r.choice([0.5, 1, 3]))[:-1]), v.t, 3)
            self.nonsmooth = True
        elif op in ("softmax", "log_softmax"):
            if v.t.rank == 0:
                return False
            ax = r.randrange(-v.t.rank, v.t.rank)
            if m > 50:
                return False
            b.emit("nn.%s(%s, axis=%d)" % (op, x, ax), v.t, 1 if op == "softmax" else m * 2 + 5)
        elif op == "layer_norm":
            if v.t.rank == 0 or m > 100:
                return False
            ax = r.randrange(-v.t.rank, v.t.rank)
            c = v.t.shape[ax]
            g = self.operand(b, T((c,), d), maxmag=10)
            be = self.operand(b, T((c,), d), maxmag=10)
            b.emit("nn.layer_norm(%s, %s, %s, axis=%d, epsilon=1e-05f)" % (x, g.name, be.name, ax), v.t,
                   (c ** 0.5 + 1) * g.mag + be.mag)
        else:
            if op in ("abs", "nn.relu", "stop_gradient"):
                self.nonsmooth = True  # (stop_gradient: finite differences see through it)
            b.emit("%s(%s)" % (op, x), v.t, m)
        return True

    def st_binary(self, b):
        r = self.r
        v = self.pick(b, lambda v: v.t.dtype != "bool")
        if v is None:
            return False
        d = v.t.dtype
        name2, m2, shape = self.bcast_partner(b, v)
        if shape is None or prod(shape) > self.maxsize:
            return False
        m1 = v.mag
        t = T(shape, d)
        ops = ["add", "subtract", "multiply", "maximum", "minimum", "divide"]
        if d in FLOATS:
            ops += ["power", "add", "multiply"]
        op = r.choice(ops)
        a, bb = v.name, name2
        if r.random() < 0.3:
            a, bb, m1, m2 = bb, a, m2, m1
        if op == "multiply" and m1 * m2 > 1e5:
            op = "add"
        if op in ("maximum", "minimum"):
            self.nonsmooth = True
        if op == "divide":
            den_t = T(shape if not bb.startswith("%") else self.type_of(b, bb).shape, d)
            if bb.startswith("%"):
                if d in FLOATS:
                    sq = b.emit("multiply(%s, %s)" % (bb, bb), den_t, m2 * m2)
                    bb = b.emit("add(%s, %s)" % (sq.name, lit(d, 1)), den_t, m2 * m2 + 1).name
                else:
                    ab = b.emit("abs(%s)" % bb, den_t, m2)
                    bb = b.emit("add(%s, 1)" % ab.name, den_t, m2 + 1).name
            elif float(bb.rstrip("f64").rstrip("f") or 0) == 0:
                bb = lit(d, 2)
            b.emit("divide(%s, %s)" % (a, bb), t, m1 if d in FLOATS else m1)
            return True
        if op == "power":
            if m1 > 1e3:
                return False
            if a.startswith("%"):
                at = self.type_of(b, a)
                sq = b.emit("multiply(%s, %s)" % (a, a), at, m1 * m1)
                a = b.emit("add(%s, %s)" % (sq.name, lit(d, 0.5)), at, m1 * m1 + 0.5).name
            else:
                a = lit(d, abs(float(a.rstrip("f64").rstrip("f"))) + 0.5)
            if bb.startswith("%"):
                bt = self.type_of(b, bb)
                bb = b.emit("tanh(%s)" % bb, bt, 1).name
            else:
                bb = lit(d, max(-2.0, min(2.0, float(bb.rstrip("f64").rstrip("f")))))
            b.emit("power(%s, %s)" % (a, bb), t, (m1 * m1 + 0.5) ** 2 + 2)
            return True
        mag = {"add": m1 + m2, "subtract": m1 + m2, "multiply": m1 * m2}.get(op, max(m1, m2))
        infix = {"add": "+", "subtract": "-", "multiply": "*"}
        if op in infix and r.random() < 0.2:
            b.emit("%s %s %s" % (a, infix[op], bb), t, mag)
        else:
            b.emit("%s(%s, %s)" % (op, a, bb), t, mag)
        return True

    def add_extra(self, b, name):
        """A non-tensor value (list, option, tuple, tree) to return from main."""
        if b.ctx == "main" and b.indent == 1:
            self.extra_out.append(name)

    def type_of(self, b, name):
        for v in reversed(b.env):
            if v.name == name:
                return v.t
        raise KeyError(name)

    def st_compare_where(self, b):
        r = self.r
        v = self.pick(b, lambda v: v.t.dtype != "bool")
        if v is None:
            return False
        name2, _, shape = self.bcast_partner(b, v)
        if shape is None:
            return False
        op = r.choice(["less", "greater", "less_equal", "greater_equal", "equal", "not_equal"])
        c = b.emit("%s(%s, %s)" % (op, v.name, name2), T(shape, "bool"), 1)
        if r.random() < 0.3:
            bools = [u for u in b.env if u.t.dtype == "bool" and bcast(u.t.shape, shape) and u is not c]
            if bools:
                u = r.choice(bools)
                s2 = bcast(u.t.shape, shape)
                if prod(s2) <= self.maxsize:
                    c = b.emit("%s(%s, %s)" % (r.choice(["logical_and", "logical_or"]), c.name, u.name),
                               T(s2, "bool"), 1)
        # where(c, x, y)
        d = r.choice([v.t.dtype, self.fdtype])
        x = self.pick(b, lambda u: u.t.dtype == d and bcast(u.t.shape, c.t.shape) and u.mag < 1e6)
        if x is None or r.random() < 0.2:
            return True
        s2 = bcast(x.t.shape, c.t.shape)
        if prod(s2) > self.maxsize:
            return True
        tmp = Var(x.name, T(s2, d), x.mag)
        yname, ym, s3 = self.bcast_partner(b, tmp)
        if s3 is None or prod(s3) > self.maxsize:
            return True
        self.nonsmooth = True  # the condition's boundary
        b.emit("where(%s, %s, %s)" % (c.name, x.name, yname), T(s3, d), max(x.mag, ym))
        return True

    def axes_attr(self, rank):
        r = self.r
        k = r.random()
        if k < 0.2 or rank == 0:
            return None, list(range(rank))
        n = r.randint(1, rank)
        ax = sorted(r.sample(range(rank), n))
        neg = [a - rank if r.random() < 0.3 else a for a in ax]
        return neg, ax

    def st_reduce(self, b):
        r = self.r
        v = self.pick(b, lambda v: v.t.dtype != "bool" or True)
        if v is None:
            return False
        op = r.choice(["sum", "sum", "mean", "max", "min", "argmax", "argmin"])
        if v.t.dtype == "bool" and op not in ("sum",):
            return False
        rank = v.t.rank
        attrs, ax = self.axes_attr(rank)
        keep = r.random() < 0.4
        excl = attrs is not None and r.random() < 0.2
        red = set(ax) if not excl else set(range(rank)) - set(ax)
        shape = []
        for i, dd in enumerate(v.t.shape):
            if i in red:
                if keep:
                    shape.append(1)
            else:
                shape.append(dd)
        parts = []
        if attrs is not None:
            parts.append("axis=%s" % (ilist(attrs) if r.random() < 0.8 or len(attrs) != 1 else attrs[0]))
        if keep or r.random() < 0.2:
            parts.append("keepdims=%s" % keep)
        if excl or (attrs is not None and r.random() < 0.1):
            parts.append("exclude=%s" % excl)
        nred = prod(v.t.shape[i] for i in red)
        dt = "int32" if op in ("argmax", "argmin") else v.t.dtype
        mag = {"sum": v.mag * nred, "argmax": max(v.t.shape or (1,)), "argmin": max(v.t.shape or (1,))}.get(op, v.mag)
        if op in ("max", "min", "argmax", "argmin"):
            self.nonsmooth = True
        b.emit("%s(%s%s)" % (op, v.name, "".join(", " + p for p in parts)), T(shape, dt), mag)
        return True

    def st_matmul(self, b):
        r = self.r
        v = self.pick(b, lambda v: v.t.dtype in FLOATS + ("int32",) and v.t.rank >= 1 and v.mag < 1e3)
        if v is None:
            return False
        d = v.t.dtype
        kind = r.choice(["dense", "matmul", "batch_matmul"])
        if kind == "batch_matmul":
            if v.t.rank != 3:
                if v.t.rank == 2 and r.random() < 0.5:
                    v = b.emit("expand_dims(%s, axis=0)" % v.name, T((1,) + v.t.shape, d), v.mag)
                else:
                    return False
            bt, i, k = v.t.shape
            ta = r.random() < 0.3
            if ta:  # x read as (b, k, i)
                bt, k, i = v.t.shape
            tb = r.random() < 0.5
            j = r.choice([1, 2, 3, 4])
            b2 = r.choice([bt, bt, 1]) if bt != 1 else r.choice([1, 2])
            y = self.operand(b, T((b2, j, k) if tb else (b2, k, j), d), maxmag=1e3)
            shape = (max(bt, b2), i, j)
            if prod(shape) > self.maxsize:
                return False
            b.emit("nn.batch_matmul(%s, %s, transpose_a=%s, transpose_b=%s)" % (v.name, y.name, ta, tb),
                   T(shape, d), v.mag * y.mag * k)
            return True
        k = v.t.shape[-1]
        m = r.choice([1, 2, 3, 4, 5])
        if kind == "dense":
            w = self.operand(b, T((m, k), d), maxmag=1e3)
            shape = v.t.shape[:-1] + (m,)
            if prod(shape) > self.maxsize:
                return False
            units = ", units=%d" % m if r.random() < 0.3 else ""
            b.emit("nn.dense(%s, %s%s)" % (v.name, w.name, units), T(shape, d), v.mag * w.mag * k)
            return True
        ta = v.t.rank >= 2 and r.random() < 0.3
        tb = r.random() < 0.5
        if ta:
            k = v.t.shape[-2]
        w = self.operand(b, T((m, k) if tb else (k, m), d), maxmag=1e3)
        shape = list(v.t.shape)
        if ta:
            shape[-2] = v.t.shape[-1]
        shape[-1] = m
        if prod(shape) > self.maxsize:
            return False
        b.emit("nn.matmul(%s, %s, transpose_a=%s, transpose_b=%s)" % (v.name, w.name, ta, tb), T(shape, d),
               v.mag * w.mag * k)
        return True

    def st_shape(self, b):
        r = self.r
        v = self.pick(b)
        if v is None:
            return False
        t, d = v.t, v.t.dtype
        op = r.choice(["transpose", "reshape", "expand_dims", "squeeze", "concatenate", "split", "take",
                       "stack", "broadcast_to", "collapse_sum_like", "cast", "one_hot", "bias_add",
                       "reshape", "transpose", "concatenate", "take"])
        if op == "transpose":
            if t.rank < 2:
                return False
            p = list(range(t.rank))
            r.shuffle(p)
            if r.random() < 0.2:
                b.emit("transpose(%s)" % v.name, T(t.shape[::-1], d), v.mag)
            else:
                b.emit("transpose(%s, axes=%s)" % (v.name, ilist(p)), T([t.shape[i] for i in p], d), v.mag)
        elif op == "reshape":
            s = self.factor(t.size)
            ns = list(s)
            if ns and r.random() < 0.3:
                ns[r.randrange(len(ns))] = -1
            elif ns and r.random() < 0.2 and len(ns) <= t.rank and 0 not in s:
                i = r.randrange(len(ns))
                if i < t.rank and t.shape[i] == s[i]:
                    ns[i] = 0
            b.emit("reshape(%s, newshape=%s%s)" % (v.name, ilist(ns), az(s)), T(s, d), v.mag)
        elif op == "expand_dims":
            if t.rank >= 4:
                return False
            ax = r.randint(-t.rank - 1, t.rank)
            nn_ = r.choice([1, 1, 2]) if t.rank <= 2 else 1
            pos = ax if ax >= 0 else ax + t.rank + 1
            s = list(t.shape[:pos]) + [1] * nn_ + list(t.shape[pos:])
            b.emit("expand_dims(%s, axis=%d%s)" % (v.name, ax, ", num_newaxis=%d" % nn_ if nn_ != 1 or r.random() < 0.3 else ""),
                   T(s, d), v.mag)
        elif op == "squeeze":
            ones = [i for i, x in enumerate(t.shape) if x == 1]
            if not ones:
                return False
            if r.random() < 0.3 and not v.dyn:
                b.emit("squeeze(%s)" % v.name, T([x for x in t.shape if x != 1], d), v.mag)
            else:
                ax = sorted(r.sample(ones, r.randint(1, len(ones))))
                b.emit("squeeze(%s, axis=%s)" % (v.name, ilist(ax)), T([x for i, x in enumerate(t.shape) if i not in ax], d), v.mag)
        elif op in ("concatenate", "stack"):
            if op == "concatenate" and t.rank == 0:
                return False
            if op == "stack" and t.rank >= 4:
                return False
            n = r.choice([2, 2, 3])
            ax = r.randrange(t.rank) if op == "concatenate" else r.randint(0, t.rank)
            parts = [v]
            total = t.shape[ax] if op == "concatenate" else 1
            for _ in range(n - 1):
                if r.random() < 0.3:
                    parts.append(v)
                    total += t.shape[ax] if op == "concatenate" else 1
                    continue
                s = list(t.shape)
                if op == "concatenate":
                    s[ax] = r.choice([1, 2, 3])
                    total += s[ax]
                else:
                    total += 1
                u = self.operand(b, T(s, d))
                parts.append(u)
            if op == "concatenate":
                s = list(t.shape)
                s[ax] = total
            else:
                s = list(t.shape[:ax]) + [total] + list(t.shape[ax:])
            if prod(s) > self.maxsize:
                return False
            axt = ax - (t.rank if op == "concatenate" else t.rank + 1) if r.random() < 0.3 else ax
            tup = "(%s)" % ", ".join(p.name for p in parts)
            if r.random() < 0.3:
                tv = self.fresh()
                b.emit_raw(tv, tup)
                tup = tv
            b.emit("%s(%s, axis=%d)" % (op, tup, axt), T(s, d), max(p.mag for p in parts))
        elif op == "split":
            if t.rank == 0:
                return False
            ax = r.randrange(t.rank)
            n = t.shape[ax]
            if r.random() < 0.5:
                divs = [k for k in range(1, n + 1) if n % k == 0]
                k = r.choice(divs)
                sizes = [n // k] * k
                attr = str(k)
            else:
                if n < 2:
                    return False
                cuts = sorted(set(r.randint(1, n - 1) for _ in range(r.randint(1, 3))))
                attr = ilist(cuts)
                edges = [0] + cuts + [n]
                sizes = [edges[i + 1] - edges[i] for i in range(len(edges) - 1)]
            tv = self.fresh()
            b.emit_raw(tv, "split(%s, indices_or_sections=%s, axis=%d)" % (v.name, attr, ax))
            idxs = [i for i, s in enumerate(sizes) if s > 0]
            if not idxs:
                return False
            for i in r.sample(idxs, min(len(idxs), r.randint(1, 2))):
                s = list(t.shape)
                s[ax] = sizes[i]
                b.emit("%s.%d" % (tv, i), T(s, d), v.mag)
        elif op == "take":
            if t.rank == 0:
                return False
            mode = r.choice(["clip", "wrap", "fast", None])
            axis = None if r.random() < 0.2 else r.randrange(t.rank)
            n = t.size if axis is None else t.shape[axis]
            ishape = self.rand_shape(2)
            lo, hi = (0, n) if mode == "fast" else (-n - 2, n + 3)
            if mode == "wrap" and n == 0:
                return False
            bd = 0
            if axis is not None and axis >= 1 and r.random() < 0.3:
                bd = 1
                ishape = (t.shape[0],) + tuple(ishape[:1])
            if b.ctx == "main":
                idx = self.new_param(T(ishape, "int32"), kind=(lo, hi))
                iname = idx.name
            else:
                iname = self.operand(b, T(ishape, "int32")).name
                if mode == "fast":
                    mode = "clip"
            if axis is None:
                shape = ishape
            else:
                shape = list(t.shape[:axis]) + list(ishape[bd:]) + list(t.shape[axis + 1:])
            if prod(shape) > self.maxsize or len(shape) > 6:
                return False
            attrs = []
            if axis is not None:
                attrs.append("axis=%d" % (axis - t.rank if r.random() < 0.3 else axis))
            if bd:
                attrs.append("batch_dims=%d" % bd)
            if mode:
                attrs.append('mode="%s"' % mode)
            b.emit("take(%s, %s%s)" % (v.name, iname, "".join(", " + a for a in attrs)), T(shape, d), v.mag)
        elif op == "broadcast_to":
            s = list(t.shape)
            s = [x if x != 1 else r.choice([1, 2, 3]) for x in s]
            if len(s) < 4 and r.random() < 0.4:
                s = [r.choice([1, 2, 3])] + s
            if prod(s) > self.maxsize:
                return False
            b.emit("broadcast_to(%s, shape=%s)" % (v.name, ilist(s)), T(s, d), v.mag)
        elif op == "collapse_sum_like":
            if d == "bool":
                return False
            s = [x if r.random() < 0.6 else 1 for x in t.shape]
            if s and r.random() < 0.3:
                s = s[r.randint(0, len(s)):]
            like = self.operand(b, T(s, d))
            b.emit("collapse_sum_like(%s, %s)" % (v.name, like.name), T(s, d), v.mag * t.size)
        elif op == "cast":
            nd = r.choice([x for x in ("float32", "float64", "int32", "bool") if x != d])
            if d in FLOATS and nd in ("int32", "bool"):
                self.nonsmooth = True
                if v.mag > 1e6:
                    return False
            if nd in FLOATS and nd != self.fdtype and r.random() < 0.7:
                nd = self.fdtype
            b.emit('cast(%s, dtype="%s")' % (v.name, nd), T(t.shape, nd), v.mag if nd != "bool" else 1)
        elif op == "one_hot":
            if d != "int32" or t.rank >= 3:
                return False
            depth = r.choice([1, 2, 3, 4])
            ax = r.randint(-1, t.rank)
            pos = ax if ax >= 0 else t.rank
            s = list(t.shape[:pos]) + [depth] + list(t.shape[pos:])
            if prod(s) > self.maxsize:
                return False
            od = r.choice([self.fdtype, "int32"])
            b.emit('one_hot(%s, %s, %s, depth=%d, axis=%d, dtype="%s")' % (v.name, lit(od, 1), lit(od, 0), depth, ax, od),
                   T(s, od), 1)
        elif op == "bias_add":
            if t.rank == 0 or d == "bool":
                return False
            ax = r.randrange(-t.rank, t.rank)
            bias = self.operand(b, T((t.shape[ax],), d))
            b.emit("nn.bias_add(%s, %s, axis=%d)" % (v.name, bias.name, ax), t, v.mag + bias.mag)
        return True

    def factor(self, n):
        r = self.r
        if n == 0:
            return [0] + [r.choice([1, 2]) for _ in range(r.randint(0, 2))]
        s = []
        rank = r.choice([0, 1, 2, 2, 3, 3, 4])
        for _ in range(rank - 1):
            divs = [k for k in range(1, n + 1) if n % k == 0]
            k = r.choice(divs)
            s.append(k)
            n //= k
        if rank > 0:
            s.append(n)
        elif n != 1:
            s = [n]
        return s

    # ---- compound statements ----
    def scalar_cond(self, b):
        """A rank-0 bool that depends on data."""
        r = self.r
        v = self.pick(b, lambda v: v.t.dtype != "bool", prefer_focus=False)
        if v is None:
            return None
        red = v
        if v.t.rank:
            op = r.choice(["sum", "max", "min", "mean"])
            red = b.emit("%s(%s)" % (op, v.name), T((), v.t.dtype), v.mag * v.t.size)
        cmp = r.choice(["greater", "less", "greater_equal", ">", "<"])
        thr = lit(v.t.dtype, r.choice([0, 0, 1, -1, 0.5]) if v.t.dtype in FLOATS else r.choice([0, 1, -1, 3]))
        if cmp in (">", "<"):
            c = b.emit("%s %s %s" % (red.name, cmp, thr), T((), "bool"), 1)
        else:
            c = b.emit("%s(%s, %s)" % (cmp, red.name, thr), T((), "bool"), 1)
        return c

    def sub_block(self, b, focus, seed_vars, nstmts, depth):
        """A nested block producing a value of type focus; returns (Block, result Var)."""
        sb = Block(self, b.env + list(seed_vars), b.ctx, focus=focus, indent=b.indent + 1)
        sb.raw_dyn = set(b.raw_dyn)
        self.fill(sb, nstmts, depth)
        return sb, self.finish(sb, focus)

    def finish(self, sb, t, bound=50.0):
        r = self.r
        c = [v for v in sb.env if v.t == t and not v.dyn]
        if not c:
            v = self.soperand(sb, t)
        else:
            # prefer values made in this block
            v = c[-1] if r.random() < 0.7 else r.choice(c)
        if v.mag > bound and t.dtype in FLOATS:
            v = sb.emit("tanh(%s)" % v.name, t, 1)
        elif v.mag > 1000 and t.dtype == "int32":
            v = sb.emit("clip(%s, a_min=-50f, a_max=50f)" % v.name, t, 50)
            self.nonsmooth = True
        return v

    def st_if(self, b, depth):
        if depth <= 0:
            return False
        c = self.scalar_cond(b)
        if c is None:
            return False
        v = self.spick(b, lambda v: v.t.dtype != "bool")
        if v is None:
            return False
        t = v.t
        b1, r1 = self.sub_block(b, t, [], self.r.randint(0, 3), depth - 1)
        b2, r2 = self.sub_block(b, t, [], self.r.randint(0, 3), depth - 1)
        pad = "  " * b.indent
        name = self.fresh()
        b.lines.append("let %s = if (%s) {\n%s\n%s} else {\n%s\n%s};" % (
            name, c.name, b1.text(r1.name), pad, b2.text(r2.name), pad))
        b.env.append(Var(name, t, max(r1.mag, r2.mag)))
        self.features.add("if")
        self.nonsmooth = True
        return True

    def st_closure(self, b, depth):
        if depth <= 0:
            return False
        r = self.r
        v = self.spick(b, lambda v: v.t.dtype != "bool")
        if v is None:
            return False
        t = v.t
        p = Var(self.fresh("x"), t, v.mag)
        extra = []
        if r.random() < 0.3:
            w = self.spick(b, lambda u: u.t.dtype != "bool")
            if w is not None:
                extra.append(Var(self.fresh("y"), w.t, w.mag))
                extra_arg = w
        sb, res = self.sub_block(b, t, [p] + extra, r.randint(1, 4), depth - 1)
        f = self.fresh("f")
        params = ", ".join("%s: %s" % (q.name, q.t.text()) for q in [p] + extra)
        pad = "  " * b.indent
        ret = " -> %s" % t.text() if r.random() < 0.7 else ""
        body = "fn (%s)%s {\n%s\n%s}" % (params, ret, sb.text(res.name), pad)
        if r.random() < 0.25 and depth > 1:
            # choose between two closures at run time
            sb2, res2 = self.sub_block(b, t, [p] + extra, r.randint(1, 3), depth - 1)
            body2 = "fn (%s)%s {\n%s\n%s}" % (params, ret, sb2.text(res2.name), pad)
            c = self.scalar_cond(b)
            if c is not None:
                body = "if (%s) {\n%s  %s\n%s} else {\n%s  %s\n%s}" % (
                    c.name, pad, body.replace("\n", "\n  "), pad, pad, body2.replace("\n", "\n  "), pad)
                self.nonsmooth = True
        b.lines.append("let %s = %s;" % (f, body))
        ncalls = r.choice([1, 1, 2])
        cur = v
        for _ in range(ncalls):
            args = [cur.name] + ([extra_arg.name] if extra else [])
            if r.random() < 0.3 and not extra:
                self.need.add("twice")
                cur = b.emit("@twice(%s)(%s)" % (f, cur.name), t, 1e3)
            else:
                cur = b.emit("%s(%s)" % (f, ", ".join(args)), t, 1e3)
            cur.mag = 1e3
        self.features.add("closure")
        return True

    def st_loop(self, b, depth):
        """A recursive global looping over a counter, with invariant parameters."""
        if depth <= 0:
            return False
        r = self.r
        v = self.spick(b, lambda v: v.t.dtype != "bool")
        if v is None:
            return False
        t = v.t
        invs = []
        for _ in range(r.randint(1, 3)):
            w = self.spick(b, lambda u: u.mag < 1e3)
            if w is not None and w not in invs:
                invs.append(w)
        gname = "@loop%d" % self.nglobal
        self.nglobal += 1
        i = Var("%i", T((), "int32"), 10)
        acc = Var("%acc", t, 50)
        inv_params = [Var("%%w%d" % k, w.t, w.mag) for k, w in enumerate(invs)]
        gb = Block(self, [i, acc] + inv_params, "global", focus=t, indent=2)
        # invariant work first (only the invariant parameters), then the step
        inv_only = Block(self, inv_params, "global", indent=2)
        inv_only.lines = gb.lines
        for _ in range(r.randint(0, 3)):
            self.statement(inv_only, 0, simple=True)
        gb.env = [i, acc] + inv_only.env
        self.fill(gb, r.randint(1, 4), depth - 1)
        res = self.finish(gb, t, bound=10.0)
        params = ", ".join("%s: %s" % (q.name, q.t.text()) for q in [i, acc] + inv_params)
        cmpop = r.choice(["%i <= 0", "less_equal(%i, 0)", "%i < 1"])
        inv_names = [q.name for q in inv_params]
        if len(inv_params) >= 2 and r.random() < 0.25:
            # pass two parameters of one type swapped: they are not invariant
            j, k = r.sample(range(len(inv_params)), 2)
            if inv_params[j].t == inv_params[k].t:
                inv_names[j], inv_names[k] = inv_names[k], inv_names[j]
                self.features.add("loop_swap")
        rec_args = ", ".join(["subtract(%i, 1)" if r.random() < 0.5 else "%i - 1", res.name] + inv_names)
        call = "%s(%s)" % (gname, rec_args)
        if t.dtype in FLOATS and r.random() < 0.2:
            call = "tanh(add(%s, %%acc))" % call  # not a tail call
            self.features.add("loop_nontail")
        g = "def %s(%s) -> %s {\n  if (%s) {\n    %%acc\n  } else {\n%s\n  }\n}\n" % (
            gname, params, t.text(), cmpop, gb.text(call))
        self.globals.append(g)
        # trip count: a constant or data-dependent
        if r.random() < 0.5:
            n = str(r.randint(0, 4))
        else:
            src = self.spick(b, lambda u: u.t.rank >= 1 and u.t.dtype != "bool" and u.t.size <= 6)
            if src is None:
                n = "3"
            else:
                n = b.emit("argmax(%s)" % src.name, T((), "int32"), 6).name
                self.nonsmooth = True
        b.emit("%s(%s, %s%s)" % (gname, n, v.name, "".join(", " + w.name for w in invs)), t, 10 if t.dtype in FLOATS else 1e3)
        self.features.add("loop")
        return True

    def st_list(self, b, depth):
        r = self.r
        v = self.spick(b, lambda v: v.t.dtype in FLOATS + ("int32",))
        if v is None:
            return False
        t = v.t
        self.need.add("list")
        items = [v] + [self.soperand(b, t) for _ in range(r.randint(0, 3))]
        if r.random() < 0.3:
            items.append(v)
        lst = "Nil"
        for it in reversed(items):
            lst = "Cons(%s, %s)" % (it.name, lst)
        lv = self.fresh("l")
        b.emit_raw(lv, lst)
        k = r.random()
        op = r.choice(["add", "maximum", "multiply", "subtract"])
        if op == "maximum":
            self.nonsmooth = True
        mag = sum(it.mag for it in items) if op != "multiply" else prod(max(1, it.mag) for it in items)
        if mag > 1e5:
            op = "add"
            mag = sum(it.mag for it in items)
        if k < 0.3:
            self.need.add("foldl")
            p1, p2 = self.fresh("a"), self.fresh("e")
            z = self.soperand(b, t)
            b.emit("@foldl(fn (%s: %s, %s: %s) -> %s { %s(%s, %s) }, %s, %s)" % (
                p1, t.text(), p2, t.text(), t.text(), op, p1, p2, z.name, lv), t, mag + z.mag)
        elif k < 0.55:
            self.need.add("map")
            self.need.add("foldl")
            p = Var(self.fresh("x"), t, max(it.mag for it in items))
            sb, res = self.sub_block(b, t, [p], r.randint(1, 2), max(0, depth - 1))
            pad = "  " * b.indent
            ml = self.fresh("l")
            b.emit_raw(ml, "@map(fn (%s: %s) -> %s {\n%s\n%s}, %s)" % (p.name, t.text(), t.text(), sb.text(res.name), pad, lv))
            p1, p2 = self.fresh("a"), self.fresh("e")
            z = self.soperand(b, t)
            b.emit("@foldl(fn (%s: %s, %s: %s) { add(%s, %s) }, %s, %s)" % (
                p1, t.text(), p2, t.text(), p1, p2, z.name, ml), t, len(items) * 1e3)
            if r.random() < 0.2:
                self.add_extra(b, ml)
        elif k < 0.8:
            # match the head, with a default
            d = self.soperand(b, t)
            h, tl = self.fresh("h"), self.fresh("t")
            pat = r.choice(["Cons(%s, %s)" % (h, tl), "Cons(%s, _)" % h, "Cons(_, Cons(%s, _))" % h])
            b.emit("match (%s) {\n%s  %s => %s,\n%s  _ => %s,\n%s}" % (
                lv, "  " * b.indent, pat, h, "  " * b.indent, d.name, "  " * b.indent), t, max(it.mag for it in items + [d]))
        else:
            self.need.add("length")
            n = b.emit("@length(%s)" % lv, T((), "int32"), 10)
            if r.random() < 0.3:
                self.add_extra(b, lv)
        self.features.add("list")
        return True

    def st_option(self, b, depth):
        r = self.r
        v = self.spick(b, lambda v: v.t.dtype != "bool")
        if v is None:
            return False
        c = self.scalar_cond(b)
        if c is None:
            return False
        self.need.add("option")
        o = self.fresh("o")
        b.emit_raw(o, "if (%s) { Some(%s) } else { None }" % (c.name, v.name))
        d = self.soperand(b, v.t)
        x = self.fresh("s")
        op = r.choice(["tanh", "negative", "copy"]) if v.t.dtype in FLOATS else r.choice(["negative", "copy"])
        b.emit("match (%s) {\n%s  Some(%s) => %s(%s),\n%s  None => %s,\n%s}" % (
            o, "  " * b.indent, x, op, x, "  " * b.indent, d.name, "  " * b.indent), v.t, max(v.mag, d.mag))
        self.nonsmooth = True
        if r.random() < 0.2:
            self.add_extra(b, o)
        self.features.add("option")
        return True

    def st_tree(self, b, depth):
        r = self.r
        v = self.spick(b, lambda v: v.t.dtype in FLOATS)
        if v is None:
            return False
        self.need.add("tree")
        t = v.t

        def build(n):
            if n <= 1 or r.random() < 0.3:
                leaf = v if r.random() < 0.4 else self.soperand(b, t)
                return "Leaf(%s)" % leaf.name, 1
            k = r.randint(1, n - 1)
            a, na = build(k)
            c, nc = build(n - k)
            return "Node(%s, %s)" % (a, c), na + nc

        tree, nleaves = build(r.randint(1, 5))
        tv = self.fresh("tr")
        b.emit_raw(tv, tree)
        p1, p2 = self.fresh("a"), self.fresh("c")
        op = r.choice(["add", "multiply", "subtract"])
        inner = "%s(%s, %s)" % (op, p1, p2)
        if r.random() < 0.5:
            inner = "tanh(%s)" % inner
        b.emit("@tree_fold(fn (%s: %s, %s: %s) -> %s { %s }, %s)" % (p1, t.text(), p2, t.text(), t.text(), inner, tv),
               t, 1e3)
        if r.random() < 0.15:
            self.add_extra(b, tv)
        self.features.add("tree")
        return True

    def st_ref(self, b, depth):
        r = self.r
        v = self.spick(b, lambda v: v.t.dtype != "bool" and v.mag < 100)
        if v is None:
            return False
        rv = self.fresh("r")
        b.emit_raw(rv, "ref(%s)" % v.name)
        k = r.random()
        if k < 0.4 and depth > 0:
            # a closure updating the ref, called in a loop
            self.need.add("repeat")
            w = self.soperand(b, v.t, maxmag=100)
            op = r.choice(["add", "subtract", "maximum"]) if v.t.dtype != "int32" else r.choice(["add", "subtract", "maximum", "minimum"])
            upd = "%s(ref_read(%s), %s)" % (op, rv, w.name)
            if v.t.dtype in FLOATS and r.random() < 0.5:
                upd = "tanh(%s)" % upd
            st = self.fresh("step")
            b.emit_raw(st, "fn () -> () { ref_write(%s, %s) }" % (rv, upd))
            n = r.randint(0, 4)
            b.emit_raw(self.fresh("u"), "@repeat(%d, %s)" % (n, st))
            if op in ("maximum", "minimum"):
                self.nonsmooth = True
            b.emit("ref_read(%s)" % rv, v.t, v.mag + 5 * w.mag)
        else:
            w = self.soperand(b, v.t, maxmag=100)
            mid = b.emit("ref_read(%s)" % rv, v.t, v.mag) if r.random() < 0.5 else None
            b.emit_raw(self.fresh("u"), "ref_write(%s, %s(ref_read(%s), %s))" % (rv, r.choice(["add", "multiply"]), rv, w.name))
            b.emit("ref_read(%s)" % rv, v.t, v.mag * max(1, w.mag) + w.mag)
        self.features.add("ref")
        return True

    def st_tuple(self, b, depth):
        r = self.r
        vs = [self.pick(b) for _ in range(r.randint(1, 3))]
        vs = [v for v in vs if v is not None]
        if not vs:
            return False
        tv = self.fresh("tup")
        b.emit_raw(tv, "(%s%s)" % (", ".join(v.name for v in vs), "," if len(vs) == 1 else ""))
        k = r.random()
        if k < 0.3 and len(vs) == 2:
            self.need.add("swap")
            sw = self.fresh("tup")
            b.emit_raw(sw, "@swap(%s)" % tv)
            b.emit("%s.0" % sw, vs[1].t, vs[1].mag)
        elif k < 0.6:
            names = [self.fresh("m") for _ in vs]
            i = r.randrange(len(vs))
            pats = ", ".join(n if j == i or r.random() < 0.5 else "_" for j, n in enumerate(names))
            if len(vs) == 1:
                pats += ","
            b.emit("match (%s) {\n%s  (%s) => %s,\n%s}" % (tv, "  " * b.indent, pats, names[i], "  " * b.indent),
                   vs[i].t, vs[i].mag)
        elif k < 0.75:
            self.need.add("id")
            i = r.randrange(len(vs))
            b.emit("@id(%s).%d" % (tv, i), vs[i].t, vs[i].mag)
        else:
            i = r.randrange(len(vs))
            b.emit("%s.%d" % (tv, i), vs[i].t, vs[i].mag)
        if r.random() < 0.1:
            self.add_extra(b, tv)
        self.features.add("tuple")
        return True

    def st_global_closure(self, b, depth):
        """A closure returned from a global, capturing a tensor; maybe composed."""
        r = self.r
        v = self.spick(b, lambda v: v.t.dtype in FLOATS and v.mag < 100)
        if v is None:
            return False
        t = v.t
        s = self.soperand(b, t, maxmag=100)
        gname = "@mk%d" % self.nglobal
        self.nglobal += 1
        op = r.choice(["multiply", "add", "subtract"])
        self.globals.append("def %s(%%s: %s) -> fn (%s) -> %s {\n  fn (%%z: %s) -> %s {\n    tanh(%s(%%z, %%s))\n  }\n}\n" % (
            gname, t.text(), t.text(), t.text(), t.text(), t.text(), op))
        f = self.fresh("g")
        b.emit_raw(f, "%s(%s)" % (gname, s.name))
        if r.random() < 0.5:
            self.need.add("compose")
            f2 = self.fresh("g")
            b.emit_raw(f2, "@compose(%s, %s(%s))" % (f, gname, v.name))
            f = f2
        b.emit("%s(%s)" % (f, v.name), t, 1)
        self.features.add("global_closure")
        return True

    def st_alias(self, b, depth):
        """A value kept in a container (tuple, ref, list, option, closure),
        then consumed by elementwise ops that could run in place over it,
        then read back from the container."""
        r = self.r
        v = self.spick(b, lambda v: v.t.dtype in FLOATS and v.mag < 100)
        if v is None:
            return False
        t = v.t
        # a fresh value (its buffer is the VM's own, so it may be overwritten)
        x = b.emit("%s(%s)" % (r.choice(["tanh", "sigmoid", "exp", "negative", "copy"]), v.name), t, 3)
        kind = r.choice(["tuple", "ref", "list", "option", "closure", "closure", "tuple"])
        c = self.fresh("k")
        if kind == "tuple":
            b.emit_raw(c, "(%s, %s)" % (x.name, v.name))
            back = "%s.0" % c
        elif kind == "ref":
            b.emit_raw(c, "ref(%s)" % x.name)
            back = "ref_read(%s)" % c
        elif kind == "list":
            self.need.add("list")
            b.emit_raw(c, "Cons(%s, Nil)" % x.name)
            h = self.fresh("h")
            back = "match (%s) { Cons(%s, _) => %s, Nil => %s }" % (c, h, h, v.name)
        elif kind == "option":
            self.need.add("option")
            b.emit_raw(c, "Some(%s)" % x.name)
            h = self.fresh("h")
            back = "match (%s) { Some(%s) => %s, None => %s }" % (c, h, h, v.name)
        else:
            q = self.fresh("q")
            b.emit_raw(c, "fn (%s: %s) -> %s { add(%s, %s) }" % (q, t.text(), t.text(), x.name, q))
            back = "%s(%s)" % (c, lit(t.dtype, 0) if not t.rank else "zeros_like(%s)" % v.name)
        # ops on x after which x is dead by name (but alive in the container)
        y = x
        for _ in range(r.randint(1, 3)):
            op = r.choice(["tanh", "negative", "sigmoid", "exp", "nn.relu"])
            if op == "nn.relu":
                self.nonsmooth = True
            if r.random() < 0.4:
                y = b.emit("%s(%s, %s)" % (r.choice(["add", "multiply", "subtract"]), y.name, lit(t.dtype, 2)), t, 6)
            else:
                y = b.emit("%s(%s)" % (op, y.name if op != "exp" else "tanh(%s)" % y.name), t, 3)
        z = b.emit(back, t, 3)
        b.emit("%s(%s, %s)" % (r.choice(["add", "subtract", "multiply"]), y.name, z.name), t, 20)
        self.features.add("alias")
        return True

    def st_const(self, b, depth):
        """Work on constants only (partial evaluation and folding compute it
        at compile time), with edge values, mixed with data."""
        r = self.r
        d = r.choice([self.fdtype, self.fdtype, "int32"])
        shape = self.rand_shape(3) if r.random() < 0.7 else ()
        if prod(shape) > 64:
            shape = ()
        if d == "int32":
            vals = [-7, 7, -2147483648, 2147483647, 100000, -3, 0, 46341]
        else:
            vals = [0.5, -1.5, 3e38, -0.0, 1e-30, 88.5, -100.0, 2.5]
        a = b.emit('full(%s, shape=%s, dtype="%s")' % (lit(d, r.choice(vals)), ilist(shape), d), T(shape, d), 1e38)
        cur = a
        for _ in range(r.randint(1, 4)):
            k = r.random()
            if d == "int32":
                op = r.choice(["add", "subtract", "multiply", "divide", "maximum", "minimum", "negative", "abs",
                               "cast_f", "mean", "clip"])
                if op in ("negative", "abs"):
                    cur = b.emit("%s(%s)" % (op, cur.name), cur.t, 1e10)
                elif op == "cast_f":
                    f = b.emit('cast(%s, dtype="%s")' % (cur.name, self.fdtype), T(cur.t.shape, self.fdtype), 1e10)
                    cur = b.emit('cast(%s, dtype="int32")' % f.name, cur.t, 1e10)
                elif op == "mean":
                    if not cur.t.rank:
                        continue
                    cur = b.emit("mean(%s, axis=[0], keepdims=True)" % cur.name, cur.t, 1e10)
                    cur = b.emit("broadcast_to(%s, shape=%s)" % (cur.name, ilist(shape)), T(shape, d), 1e10)
                elif op == "clip":
                    cur = b.emit("clip(%s, a_min=-100f, a_max=1e10f)" % cur.name, cur.t, 1e10)
                else:
                    other = r.choice([-1, 2, -2147483648, 3, 65536, -7])
                    if op == "divide" and other == 0:
                        other = 3
                    cur = b.emit("%s(%s, %s)" % (op, cur.name, other), cur.t, 1e10)
            else:
                op = r.choice(["add", "multiply", "divide", "exp", "log", "sqrt", "cast_i", "cast_b", "tanh",
                               "maximum", "power", "rsqrt", "sigmoid", "negative"])
                if op in ("exp", "log", "sqrt", "tanh", "rsqrt", "sigmoid", "negative"):
                    cur = b.emit("%s(%s)" % (op, cur.name), cur.t, 1e38)
                elif op == "cast_i":
                    cur = b.emit('cast(cast(%s, dtype="int32"), dtype="%s")' % (cur.name, d), cur.t, 3e9)
                elif op == "cast_b":
                    cur = b.emit('cast(cast(%s, dtype="bool"), dtype="%s")' % (cur.name, d), cur.t, 1)
                else:
                    other = lit(d, r.choice([0.0, -0.0, 2.0, 1e30, -3.5, 0.5]))
                    cur = b.emit("%s(%s, %s)" % (op, cur.name, other), cur.t, 1e38)
        self.nonsmooth = True
        # mix with data: a same-dtype value broadcast against it
        u = self.pick(b, lambda u: u.t.dtype == d and bcast(u.t.shape, shape) is not None and u is not cur)
        if u is not None and prod(bcast(u.t.shape, shape)) <= self.maxsize and r.random() < 0.7:
            op = r.choice(["maximum", "minimum", "add"]) if d in FLOATS else r.choice(["maximum", "minimum"])
            b.emit("%s(%s, %s)" % (op, u.name, cur.name), T(bcast(u.t.shape, shape), d), 1e38)
        self.features.add("const")
        return True

    def st_rnn(self, b, depth):
        """An RNN-style loop: an embedding lookup of a token chosen by the
        counter, dense and bias_add on invariant weights (the hoist pass
        turns these into table lookups), a carried state."""
        r = self.r
        if b.ctx != "main":
            return False
        d = self.fdtype
        V, D, H = r.choice([3, 5, 7]), r.choice([2, 3, 4]), r.choice([2, 3])
        batch = r.choice([None, 1, 2])
        L = r.randint(1, 5)
        E = self.new_param(T((V, D), d), static=True)
        W = self.new_param(T((H, D), d), static=True)
        U = self.new_param(T((H, H), d), static=True)
        bias = self.new_param(T((H,), d), static=True)
        ids_shape = (L,) if batch is None else (L, batch)
        mode = r.choice(["clip", "wrap", None])
        ids = self.new_param(T(ids_shape, "int32"), kind=(-2, V + 2) if mode else (0, V), static=True)
        hs = (H,) if batch is None else (batch, H)
        h0 = self.soperand(b, T(hs, d), maxmag=10)
        gname = "@rnn%d" % self.nglobal
        self.nglobal += 1
        m = ', mode="%s"' % mode if mode else ""
        ba = r.choice(["-1", "%d" % len(hs)])  # bias_add on the last axis
        ba = str(len(hs) - 1) if ba != "-1" else "-1"
        step = r.choice(["tanh", "sigmoid"])
        swap = r.random() < 0.15  # pass W and W2 swapped: not invariant any more
        tok = "take(%%ids, %%i, axis=0%s)" % m if r.random() < 0.7 or batch else "take(%%ids, %%i%s)" % m
        body = ("    let %%tok = %s;\n"
                "    let %%x = take(%%E, %%tok, axis=0%s);\n"
                "    let %%p = nn.dense(%%x, %%W);\n"
                "    let %%q = nn.bias_add(%%p, %%b, axis=%s);\n"
                "    let %%r = nn.dense(%%h, %%U);\n"
                "    let %%hn = %s(add(%%q, %%r));\n") % (tok, m, ba, step)
        n = L
        g = ("def %s(%%i: int32, %%n: int32, %%h: %s, %%ids: %s, %%E: %s, %%W: %s, %%U: %s, %%b: %s) -> %s {\n"
             "  if (%%i >= %%n) {\n    %%h\n  } else {\n%s    %s(%%i + 1, %%n, %%hn, %%ids, %%E, %s, %s, %%b)\n  }\n}\n") % (
            gname, T(hs, d).text(), T(ids_shape, "int32").text(), E.t.text(), W.t.text(), U.t.text(),
            bias.t.text(), T(hs, d).text(), body, gname,
            "%W" if not swap else "%W", "%U")
        self.globals.append(g)
        start = str(r.choice([0, 0, 1])) if r.random() < 0.8 else "0"
        b.emit("%s(%s, %d, %s, %s, %s, %s, %s, %s)" % (gname, start, n, h0.name, ids.name, E.name, W.name, U.name,
                                                    bias.name), T(hs, d), 1)
        self.features.add("rnn")
        return True

    def st_nn(self, b, depth):
        """Convolution, pooling, normalization and padding on NCHW tensors."""
        r = self.r
        d = self.fdtype
        v = self.pick(b, lambda v: v.t.dtype == d and v.t.rank == 4 and min(v.t.shape) > 0 and v.mag < 1e3)
        if v is None:
            if b.ctx != "main":
                return False
            dims = [r.choice([1, 2]), r.choice([1, 2, 3, 4]), r.choice([3, 4, 5, 6]), r.choice([3, 4, 5, 7])]
            if self.big:
                dims = [r.choice([1, 2]), r.choice([3, 8, 16]), r.choice([17, 32]), r.choice([16, 33])]
            v = self.new_param(T(dims, d))
        N, C, H, W = v.t.shape
        op = r.choice(["conv2d", "conv2d", "max_pool2d", "avg_pool2d", "global", "adaptive", "batch_flatten",
                       "pad", "batch_norm", "instance_norm", "group_norm", "l2_normalize", "prelu", "lrn",
                       "softmax1", "conv2d_transpose"])
        x = v.name

        def out_dim(n, k, s, p0, p1, dil, ceil=False):
            num = n + p0 + p1 - dil * (k - 1) - 1
            if num < 0:
                return None
            # TVM's rule (kept by relayc): ceil_mode may leave a last window
            # that starts in the padding or past the data (unlike PyTorch)
            return (-(-num // s) if ceil else num // s) + 1

        def pads():
            k = r.random()
            if k < 0.4:
                return [0, 0, 0, 0], ""
            if k < 0.7:
                a, c = r.randint(0, 2), r.randint(0, 2)
                return [a, c, a, c], ", padding=[%d, %d]" % (a, c)
            p4 = [r.randint(0, 2) for _ in range(4)]
            return p4, ", padding=%s" % ilist(p4)
        if op in ("conv2d", "conv2d_transpose"):
            groups = r.choice([g for g in (1, 1, 2, C) if C % g == 0])
            O = r.choice([1, 2, 3, 4]) * (groups if groups > 1 else 1)
            kh, kw = r.choice([1, 2, 3]), r.choice([1, 2, 3])
            st = r.choice([1, 1, 2])
            dil = r.choice([1, 1, 2]) if op == "conv2d" else 1
            p4, ptxt = pads()
            if op == "conv2d":
                w = self.operand(b, T((O, C // groups, kh, kw), d), maxmag=100)
                oh = out_dim(H, kh, st, p4[0], p4[2], dil)
                ow = out_dim(W, kw, st, p4[1], p4[3], dil)
                if not oh or not ow or oh < 1 or ow < 1:
                    return False
                b.emit("nn.conv2d(%s, %s, strides=[%d, %d]%s, dilation=[%d, %d], groups=%d, channels=%d, kernel_size=[%d, %d])"
                       % (x, w.name, st, st, ptxt, dil, dil, groups, O, kh, kw), T((N, O, oh, ow), d),
                       v.mag * w.mag * C * kh * kw)
            else:
                if groups != 1:
                    return False
                w = self.operand(b, T((C, O, kh, kw), d), maxmag=100)
                op_ = r.choice([0, 1]) if st > 1 else 0
                oh = (H - 1) * st - p4[0] - p4[2] + kh + op_
                ow = (W - 1) * st - p4[1] - p4[3] + kw + op_
                if oh < 1 or ow < 1:
                    return False
                b.emit("nn.conv2d_transpose(%s, %s, channels=%d, kernel_size=[%d, %d], strides=[%d, %d]%s, output_padding=[%d, %d])"
                       % (x, w.name, O, kh, kw, st, st, ptxt, op_, op_), T((N, O, oh, ow), d), v.mag * w.mag * C * kh * kw)
        elif op in ("max_pool2d", "avg_pool2d"):
            kh, kw = r.choice([1, 2, 3]), r.choice([1, 2, 3])
            st = r.choice([1, 2, 2, 3])
            p4, ptxt = pads()
            if p4[0] >= kh or p4[2] >= kh or p4[1] >= kw or p4[3] >= kw:
                p4, ptxt = [0, 0, 0, 0], ""
            ceil = r.random() < 0.3
            oh = out_dim(H, kh, st, p4[0], p4[2], 1, ceil)
            ow = out_dim(W, kw, st, p4[1], p4[3], 1, ceil)
            if not oh or not ow:
                return False
            extra = ", ceil_mode=True" if ceil else ""
            if op == "avg_pool2d" and r.random() < 0.5:
                extra += ", count_include_pad=%s" % (r.random() < 0.5)
            self.nonsmooth = self.nonsmooth or op == "max_pool2d"
            b.emit("nn.%s(%s, pool_size=[%d, %d], strides=[%d, %d]%s%s)" % (op, x, kh, kw, st, st, ptxt, extra),
                   T((N, C, oh, ow), d), v.mag)
        elif op == "global":
            k = r.choice(["avg", "max"])
            self.nonsmooth = self.nonsmooth or k == "max"
            b.emit("nn.global_%s_pool2d(%s)" % (k, x), T((N, C, 1, 1), d), v.mag)
        elif op == "adaptive":
            k = r.choice(["avg", "max"])
            oh, ow = r.randint(1, H), r.randint(1, W)
            self.nonsmooth = self.nonsmooth or k == "max"
            b.emit("nn.adaptive_%s_pool2d(%s, output_size=[%d, %d])" % (k, x, oh, ow), T((N, C, oh, ow), d), v.mag)
        elif op == "batch_flatten":
            b.emit("nn.batch_flatten(%s)" % x, T((N, C * H * W), d), v.mag)
        elif op == "pad":
            pw = [[0, 0], [0, 0], [r.randint(0, 2), r.randint(0, 2)], [r.randint(0, 2), r.randint(0, 2)]]
            val = lit(d, r.choice([0, 0, 1.5, -2]))
            b.emit("nn.pad(%s, %s, pad_width=%s)" % (x, val, "[%s]" % ", ".join(ilist(q) for q in pw)),
                   T((N, C, H + sum(pw[2]), W + sum(pw[3])), d), v.mag + 2)
        elif op == "batch_norm":
            g = self.operand(b, T((C,), d), maxmag=10)
            be = self.operand(b, T((C,), d), maxmag=10)
            mu = self.operand(b, T((C,), d), maxmag=10)
            var0 = self.operand(b, T((C,), d), maxmag=10)
            sq = b.emit("multiply(%s, %s)" % (var0.name, var0.name), var0.t, 100)
            var = b.emit("add(%s, %s)" % (sq.name, lit(d, 0.5)), var0.t, 101)
            flags = "".join(", %s=%s" % (k, r.random() < 0.7) for k in ("center", "scale") if r.random() < 0.4)
            tv = self.fresh()
            b.emit_raw(tv, "nn.batch_norm(%s, %s, %s, %s, %s, axis=1, epsilon=1e-05f%s)" % (x, g.name, be.name, mu.name, var.name, flags))
            b.emit("%s.0" % tv, v.t, (v.mag + 10) * 20)
        elif op in ("instance_norm", "group_norm"):
            g = self.operand(b, T((C,), d), maxmag=10)
            be = self.operand(b, T((C,), d), maxmag=10)
            extra = ""
            if op == "group_norm":
                extra = ", num_groups=%d" % r.choice([k for k in range(1, C + 1) if C % k == 0])
            b.emit("nn.%s(%s, %s, %s%s, epsilon=1e-05f)" % (op, x, g.name, be.name, extra), v.t, 10 * (H * W) ** 0.5 * 10)
        elif op == "l2_normalize":
            ax = r.choice([[1], [2, 3], [1, 2, 3]])
            b.emit("nn.l2_normalize(%s, eps=1e-06f, axis=%s)" % (x, ilist(ax)), v.t, 1)
        elif op == "prelu":
            a = self.operand(b, T((C,), d), maxmag=10)
            self.nonsmooth = True
            b.emit("nn.prelu(%s, %s)" % (x, a.name), v.t, v.mag * 10)
        elif op == "lrn":
            b.emit("nn.lrn(%s, size=%d)" % (x, r.choice([1, 3, 5])), v.t, v.mag)
        else:
            b.emit("nn.softmax(%s, axis=1)" % x, v.t, 1)
        self.features.add("nn")
        return True

    def st_dropout(self, b, depth):
        """nn.dropout (training mode: random masks from --seed); its result is
        returned from @main so that no engine drops a draw as dead code."""
        r = self.r
        if not self.train or b.ctx != "main" or b.indent != 1:
            return False
        v = self.pick(b, lambda v: v.t.dtype in FLOATS)
        if v is None:
            return False
        tv = self.fresh()
        b.emit_raw(tv, "nn.dropout(%s, rate=%s)" % (v.name, lit("float32", r.choice([0.1, 0.5, 0.75]))))
        out = b.emit("%s.0" % tv, v.t, v.mag * 10)
        self.keep_alive.append(out.name)
        self.nonsmooth = True
        return True

    def st_inplace(self, b, depth):
        """x = op(a); y = elementwise(x); z = other(x): x used after an op that could overwrite it."""
        r = self.r
        v = self.pick(b, lambda v: v.t.dtype in FLOATS and v.mag < 100)
        if v is None:
            return False
        x = b.emit("%s(%s)" % (r.choice(["tanh", "sigmoid", "negative", "exp"]), v.name), v.t, 3)
        y = b.emit("%s(%s, %s)" % (r.choice(["add", "multiply", "subtract"]), x.name, lit(v.t.dtype, 2)), v.t, 6)
        z = b.emit("%s(%s)" % (r.choice(["sigmoid", "tanh", "negative"]), y.name), v.t, 6)
        w = b.emit("%s(%s, %s)" % (r.choice(["add", "multiply", "subtract", "divide"]) if False else r.choice(["add", "multiply", "subtract"]), z.name, x.name), v.t, 36)
        if r.random() < 0.5:
            b.emit("add(%s, %s)" % (w.name, v.name), v.t, 136)
        self.features.add("inplace")
        return True

    def statement(self, b, depth, simple=False):
        r = self.r
        kinds = [(self.st_unary, 5), (self.st_binary, 6), (self.st_reduce, 2), (self.st_shape, 4),
                 (self.st_matmul, 1.5), (self.st_compare_where, 1.5),
                 (self.st_nn, 0.8)]
        if not simple:
            kinds += [(self.st_if, 1), (self.st_closure, 1), (self.st_loop, 0.8), (self.st_list, 0.7),
                      (self.st_option, 0.4), (self.st_tree, 0.4), (self.st_ref, 0.6), (self.st_tuple, 0.7),
                      (self.st_global_closure, 0.4), (self.st_inplace, 0.6), (self.st_alias, 0.8),
                      (self.st_const, 0.5), (self.st_rnn, 0.3), (self.st_dropout, 4 if self.train else 0)]
        tot = sum(w for _, w in kinds)
        for _ in range(20):
            x = r.random() * tot
            for f, w in kinds:
                x -= w
                if x < 0:
                    break
            try:
                takes_depth = f.__code__.co_argcount == 3
                n0 = len(b.lines)
                ok = f(b, depth) if takes_depth else f(b)
            except KeyError:
                ok = False
            if ok:
                return True
        return False

    def fill(self, b, n, depth):
        for _ in range(n):
            self.statement(b, depth)

    # ---- the whole program ----
    def program(self):
        r = self.r
        self.extra_out = []
        main = Block(self, [], "main")
        for _ in range(r.randint(1, 3)):
            d = self.fdtype if r.random() < 0.8 else r.choice(["int32", self.fdtype, "bool"])
            main.env.append(self.new_param(T(self.rand_shape(), d)))
        self.fill(main, r.randint(3, 14), depth=2)
        # results: the last value, and some earlier ones (still alive after later ops)
        outs = [main.env[-1]]
        for _ in range(r.randint(0, 3)):
            outs.append(r.choice(main.env))
        names = [v.name for v in outs] + self.extra_out[:2] + self.keep_alive
        res = names[0] if len(names) == 1 and r.random() < 0.5 else "(%s)" % ", ".join(names)
        sig = ", ".join("%s: %s" % (p.name, p.text) for p in self.params)
        text = ['#[version = "0.0.5"]']
        text += [PRELUDE[k] for k in PRELUDE_ORDER if k in self.closure_needs()]
        text += self.globals
        text.append("def @main(%s) {\n%s\n}\n" % (sig, main.text(res)))
        return "\n".join(text)

    def param_type_text(self, t):
        """@main's parameter types: with `?` and symbolic dims in anydim mode."""
        if not self.anydim or not t.shape:
            return t.text()
        if not hasattr(self, "symbols"):
            self.symbols = {d: "n%d" % d for d in range(1, 6) if self.r.random() < 0.4}
        dims = []
        for d in t.shape:
            k = self.r.random()
            if k < 0.35:
                dims.append("?")
            elif k < 0.6 and d in self.symbols:
                dims.append(self.symbols[d])
            else:
                dims.append(str(d))
        return "Tensor[(%s), %s]" % (", ".join(dims), t.dtype)

    def closure_needs(self):
        need = set(self.need)
        deps = {"map": {"list"}, "foldl": {"list"}, "length": {"list"}}
        for k in list(need):
            need |= deps.get(k, set())
        return need


PRELUDE_ORDER = ["list", "option", "tree", "map", "foldl", "length", "twice", "compose", "swap", "id", "repeat"]
PRELUDE = {
    "list": "type List[A] {\n  Cons(A, List[A]),\n  Nil,\n}\n",
    "option": "type Option[A] {\n  Some(A),\n  None,\n}\n",
    "tree": ("type Tree[A] {\n  Leaf(A),\n  Node(Tree[A], Tree[A]),\n}\n\n"
             "def @tree_fold[A](%f: fn (A, A) -> A, %t: Tree[A]) -> A {\n  match (%t) {\n"
             "    Leaf(%x) => %x,\n    Node(%l, %r) => %f(@tree_fold(%f, %l), @tree_fold(%f, %r)),\n  }\n}\n"),
    "map": ("def @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B] {\n  match (%l) {\n"
            "    Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)),\n    Nil => Nil,\n  }\n}\n"),
    "foldl": ("def @foldl[A, B](%f: fn (A, B) -> A, %acc: A, %l: List[B]) -> A {\n  match (%l) {\n"
              "    Cons(%h, %t) => @foldl(%f, %f(%acc, %h), %t),\n    Nil => %acc,\n  }\n}\n"),
    "length": ("def @length[A](%l: List[A]) -> int32 {\n  match (%l) {\n    Cons(_, %t) => 1 + @length(%t),\n"
               "    Nil => 0,\n  }\n}\n"),
    "twice": "def @twice[A](%f: fn (A) -> A) -> fn (A) -> A {\n  fn (%x: A) -> A {\n    %f(%f(%x))\n  }\n}\n",
    "compose": ("def @compose[A, B, C](%f: fn (B) -> C, %g: fn (A) -> B) -> fn (A) -> C {\n"
                "  fn (%x: A) -> C {\n    %f(%g(%x))\n  }\n}\n"),
    "swap": "def @swap[A, B](%p: (A, B)) -> (B, A) {\n  (%p.1, %p.0)\n}\n",
    "id": "def @id[A](%x: A) -> A {\n  %x\n}\n",
    "repeat": ("def @repeat(%n: int32, %f: fn () -> ()) -> () {\n  if (%n > 0) {\n    let %u = %f();\n"
               "    @repeat(%n - 1, %f)\n  } else {\n    ()\n  }\n}\n"),
}


# ---------------------------------------------------------------- running

ENGINES = [("interp", ["--engine", "interp"]), ("cpu0", ["--target", "cpu", "--level", "0"]),
           ("cpu1", ["--target", "cpu", "--level", "1"]), ("cpu2", ["--target", "cpu", "--level", "2"])]
# big programs also run on two threads (the pool's split kernels) and without SIMD
ENGINES_BIG = [("cpu2t", ["--target", "cpu", "--level", "2"]), ("cpu1s", ["--target", "cpu", "--level", "1"])]
ENV = {"cpu2t": {"RELAYC_NUM_THREADS": "2"}, "cpu1s": {"RELAYC_SIMD": "base", "RELAYC_NUM_THREADS": "2"}}
TOL = {"float32": (1e-4, 1e-5), "float64": (1e-9, 1e-10), "float16": (1e-2, 1e-3)}


def run(cmd, timeout, cwd=None, env=None):
    try:
        e = None
        if env:
            e = dict(os.environ)
            e.update(env)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, cwd=cwd, env=e)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        return "timeout", (e.stdout or b"").decode(errors="replace"), (e.stderr or b"").decode(errors="replace")


def load_dir(d):
    out = {}
    if os.path.isdir(d):
        for f in sorted(os.listdir(d)):
            if f.endswith(".npy"):
                out[f] = np.load(os.path.join(d, f))
    return out


def compare(ref, got, grad=False):
    """None if equal within tolerance, else a description."""
    if sorted(ref) != sorted(got):
        return "files differ: %s vs %s" % (sorted(ref), sorted(got))
    for k in sorted(ref):
        a, b = ref[k], got[k]
        if a.dtype != b.dtype or a.shape != b.shape:
            return "%s: %s%s vs %s%s" % (k, a.dtype, a.shape, b.dtype, b.shape)
        if a.dtype.kind == "f":
            rt, at = TOL.get(str(a.dtype), (1e-4, 1e-5))
            if grad:
                rt, at = rt * 10, at * 10
            fa, fb = a.astype(np.float64), b.astype(np.float64)
            ok = np.isclose(fa, fb, rtol=rt, atol=at, equal_nan=True) | ((fa == fb))
            # values beyond float range on one side only are compared by class
            if not ok.all():
                i = np.unravel_index(np.argmin(ok), a.shape) if a.shape else ()
                return "%s: max diff %.3g at %s: %r vs %r" % (k, np.nanmax(np.abs(fa - fb)), i, a[i], b[i])
        else:
            if not np.array_equal(a, b):
                i = np.unravel_index(np.argmin(a == b), a.shape) if a.shape else ()
                return "%s: differs at %s: %r vs %r" % (k, i, a[i], b[i])
    return None


# Known, already reported problems: a finding whose text matches is counted
# as known_<name> instead of being saved (--report-known saves them too).
KNOWN = [
    # (name, text of the message): known problems, counted and not saved
    # unless --report-known; none at the moment
]


def known(kind, text, g):
    for name, pat in KNOWN:
        if pat in text:
            return name
    # Both below: the gradient pushes a zero adjoint through work whose
    # result did not matter, and 0 * inf = NaN. The messages read
    # "<engine> vs interp --grad: <file>: ...: <interp's value> vs <engine's>".
    # (the non-finite values come from special inputs or from the program:
    # log of a negative constant, say)
    if kind != "mismatch" or not text.startswith("cpu2") or "--grad" not in text:
        return None
    finite = r"\(-?\d[0-9.e+-]*\)"
    interp_nan = re.search(r"\(nan\) vs np\.float\d+" + finite, text)
    engine_nan = re.search(finite + r" vs np\.float\d+\(nan\)", text)
    # ry_hoist (level 2 only) computes loop-invariant work before the loop;
    # the loop may never use it (rows never looked up, zero trips)
    if engine_nan and ("rnn" in g.features or "loop" in g.features):
        return "hoist_zero_adjoint_nan"
    # a dead call (its result unused) still runs its backward pass, with a
    # zero adjoint, on the interpreter and levels 0-1; level 2 removes it
    if interp_nan:
        return "dead_call_zero_adjoint_nan"
    return None


def is_crash(rc):
    return rc == "timeout" or rc not in (0, 1)


class Fuzzer:
    def __init__(self, args):
        self.a = args
        self.relayc = os.path.abspath(args.relayc)
        self.stats = {}
        os.makedirs(args.out, exist_ok=True)

    def count(self, k):
        self.stats[k] = self.stats.get(k, 0) + 1

    def save(self, seed, kind, work, prog, details, cmds):
        d = os.path.join(self.a.out, "%d_%s" % (seed, kind))
        if os.path.exists(d):
            shutil.rmtree(d)
        shutil.copytree(work, d)
        with open(os.path.join(d, "README.txt"), "w") as f:
            f.write("seed %d: %s\n\n%s\n" % (seed, kind, details))
        with open(os.path.join(d, "cmd.sh"), "w") as f:
            f.write("#!/bin/sh\n# run from this folder; RELAYC=path/to/relayc\nRELAYC=${RELAYC:-relayc}\n")
            for c in cmds:
                f.write(" ".join(c).replace(self.relayc, "$RELAYC") + "\n")

    def one(self, seed):
        a = self.a
        g = Gen(seed)
        try:
            prog = g.program()
        except Exception as e:  # a generator bug: count it, go on
            self.count("generror")
            if a.verbose:
                print(seed, "generator error:", repr(e))
            return "generror"
        work = tempfile.mkdtemp(prefix="fz%d_" % seed)
        try:
            return self._one(seed, g, prog, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _one(self, seed, g, prog, work):
        a = self.a
        with open(os.path.join(work, "program.relay"), "w") as f:
            f.write(prog)
        os.makedirs(os.path.join(work, "inputs"))
        inputs = []
        for k, v in g.values.items():
            np.save(os.path.join(work, "inputs", k + ".npy"), v)
            inputs += ["--input", "%s=inputs/%s.npy" % (k, k)]
        R = self.relayc
        rc, so, se = run([R, "check", "program.relay"], a.timeout, cwd=work)
        if rc != 0:
            self.count("genbug")
            if is_crash(rc):
                self.count("crash")
                self.save(seed, "crash_check", work, prog, "check: rc=%s\n%s" % (rc, se), [[R, "check", "program.relay"]])
            else:
                self.save(seed, "genbug", work, prog, se, [[R, "check", "program.relay"]])
            if a.verbose:
                print(seed, "genbug:", se.strip().splitlines()[0] if se.strip() else rc)
            return "genbug"
        floats = any(p.t.dtype in FLOATS for p in g.params)
        modes = [False] + ([True] if floats and not a.no_grad else [])
        cmds = []
        found = []
        grad_ok = False
        for grad in modes:
            res = {}
            engines = ENGINES + (ENGINES_BIG if g.big else [])
            for name, eargs in engines:
                env = None
                if name in ENV:
                    env = ENV[name]
                od = "out_%s%s" % (name, "_grad" if grad else "")
                cmd = [R, "run", "program.relay"] + inputs + ["--out", od] + eargs + (["--grad"] if grad else [])
                if g.train:
                    cmd += ["--train", "--seed", str(seed % 1000)]
                cmds.append((["env"] + ["%s=%s" % kv for kv in env.items()] if env else []) + cmd)
                rc, so, se = run(cmd, a.timeout, cwd=work, env=env)
                with open(os.path.join(work, od + ".log"), "w") as f:
                    f.write("rc=%s\n--- stdout\n%s\n--- stderr\n%s\n" % (rc, so, se))
                res[name] = (rc, se, load_dir(os.path.join(work, od)))
                if is_crash(rc):
                    found.append(("crash" if rc != "timeout" else "hang",
                                  "%s%s: rc=%s\n%s" % (name, " --grad" if grad else "", rc, se[-3000:])))
            ref = res["interp"]
            for name, _ in engines[1:]:
                got = res[name]
                if is_crash(got[0]) or is_crash(ref[0]):
                    continue
                if grad and ref[0] != 0 and got[0] == 0 and "error: gradient of" in ref[1]:
                    # a gradient rule's limitation in code that level 2 removed as dead
                    self.count("grad_limit_dead_code")
                    continue
                if (ref[0] == 1 and got[0] == 0 and name in ("cpu1", "cpu2")
                        and res["cpu0"][0] == 1 and res["cpu0"][1].split("\n")[0] == ref[1].split("\n")[0]):
                    # a run-time error of dead code, which DCE removed at level 1 and 2
                    self.count("dce_removed_error")
                    continue
                if (ref[0] == 0) != (got[0] == 0):
                    found.append(("error", "%s%s: interp rc=%s, %s rc=%s\ninterp: %s\n%s: %s" % (
                        name, " --grad" if grad else "", ref[0], name, got[0], ref[1][-1500:], name, got[1][-1500:])))
                    continue
                if ref[0] != 0:
                    continue
                d = compare(ref[2], got[2], grad)
                if d:
                    found.append(("mismatch", "%s vs interp%s: %s" % (name, " --grad" if grad else "", d)))
            if grad:
                grad_ok = ref[0] == 0
            if ref[0] != 0 and "(a bug in" in ref[1]:
                found.append(("internal", "interp%s: %s" % (" --grad" if grad else "", ref[1][-1500:])))
            if ref[0] != 0 and all(res[n][0] == ref[0] for n, _ in engines):
                self.count("both_error%s" % ("_grad" if grad else ""))
                if a.verbose:
                    print(seed, "all engines fail%s:" % (" (grad)" if grad else ""), ref[1].strip().splitlines()[:1])
        # gradcheck against finite differences (float64)
        if grad_ok and not g.nonsmooth and not g.special and not g.big and not g.train and \
                random.Random(seed).random() < a.gradcheck_rate:
            cmd = [R, "gradcheck", "program.relay"] + inputs + ["--rtol", "1e-4", "--atol", "1e-6"]
            if random.Random(seed + 99).random() < 0.3:
                cmd.append("--second-order")
            cmds.append(cmd)
            rc, so, se = run(cmd, a.timeout * 3, cwd=work)
            self.count("gradcheck")
            with open(os.path.join(work, "gradcheck.log"), "w") as f:
                f.write("rc=%s\n%s\n%s" % (rc, so, se))
            if rc != 0:
                found.append(("gradcheck" if not is_crash(rc) else "crash", "gradcheck rc=%s\n%s\n%s" % (rc, so[-2000:], se[-2000:])))
        # valgrind on a sample
        if a.valgrind_rate and random.Random(seed * 7 + 1).random() < a.valgrind_rate:
            eng = random.Random(seed * 7 + 2).choice(ENGINES)
            grad = floats and random.Random(seed * 7 + 3).random() < 0.5
            cmd = ["valgrind", "-q", "--error-exitcode=9", "--leak-check=full", R, "run", "program.relay"] + inputs + [
                "--out", "out_vg"] + eng[1] + (["--grad"] if grad else [])
            cmds.append(cmd)
            rc, so, se = run(cmd, a.timeout * 20, cwd=work)
            self.count("valgrind")
            if rc == 9 or is_crash(rc):
                found.append(("valgrind", "%s: rc=%s\n%s" % (" ".join(cmd[6:]), rc, se[-4000:])))
        self.count("programs")
        for f in g.features:
            self.count("feat_" + f)
        if not a.report_known:
            rest = []
            for k, t in found:
                kn = known(k, t, g)
                if kn:
                    self.count("known_" + kn)
                else:
                    rest.append((k, t))
            found = rest
        if found:
            kinds = sorted(set(k for k, _ in found))
            for k in kinds:
                self.count("found_" + k)
            self.save(seed, "+".join(kinds), work, prog, "\n\n".join("[%s] %s" % x for x in found), cmds)
            if a.verbose:
                print(seed, "FOUND", kinds, found[0][1].splitlines()[0])
            return "found"
        if a.keep_passing:
            self.save(seed, "pass", work, prog, "passed", cmds)
        return "pass"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--relayc", default="build/relayc")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--out", default="fuzz-out")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--no-grad", action="store_true")
    ap.add_argument("--gradcheck-rate", type=float, default=0.3)
    ap.add_argument("--valgrind-rate", type=float, default=0.0)
    ap.add_argument("--keep-passing", action="store_true")
    ap.add_argument("--report-known", action="store_true", help="also save findings of known bugs (KNOWN)")
    ap.add_argument("--print", action="store_true", help="only print the program of --seed")
    ap.add_argument("--force", action="append", default=[], choices=["big", "special", "zero", "anydim", "train"],
                    help="make every program use this mode (repeatable)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    FORCE.update(a.force)
    if a.print:
        g = Gen(a.seed)
        print(g.program())
        for k, v in g.values.items():
            print("// %%%s: %s%s" % (k, v.dtype, list(v.shape)))
        return 0
    fz = Fuzzer(a)
    for s in range(a.seed, a.seed + a.count):
        fz.one(s)
    print("seeds %d..%d: %s" % (a.seed, a.seed + a.count - 1,
                                ", ".join("%s=%d" % kv for kv in sorted(fz.stats.items()))))
    return 1 if any(k.startswith("found_") for k in fz.stats) else 0


if __name__ == "__main__":
    sys.exit(main())
