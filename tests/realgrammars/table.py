"""The table of real grammars: `cfgmask reduction` over Lark grammars written by others.

    tests/realgrammars/table.py [--tokenizer TOK] [--walks N] [--samples N] [--only NAME,...]
                                [-o tests/realgrammars/table.json]

The grammars come from PyPI packages (tests/realgrammars/fetch.sh, into
.cache/grammars; not committed).  For each: whether it compiles, or the exact
reason it does not (cfgmask's one-line error); the compile's seconds and the
process's peak memory; the rows after each streamlining step (the seed's
figure 6, from every lexing); parser checks and ORed rows per decoding step
with and without streamlining on random masked walks; and samples drawn from
the masks (`cfgmask sample --ascii`) judged by Lark (the grammar's own
language, tests/tools/lark_accepts.py) and, where PyPI has one, by a real
parser: tree-sitter's Go, Java and C grammars, SQLite (through Python's
sqlite3) for SQL, the package's own parser for HCL2 (python-hcl2) and
commentjson.  The real parsers are installed with pip into .cache/realparsers
on first use (--no-parsers: Lark only).

Not a CI test (minutes per grammar); tests/py/test_reduction.py runs two of the
grammars at quick size.  Defaults: the 32k LLaMA SentencePiece vocabulary
($CFGMASK_TOK_LLAMA_SPM), 30 walks of up to 48 tokens, 20 samples.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("CFGMASK_BIN", str(ROOT / "build" / "cfgmask"))
CACHE = Path(os.environ.get("CFGMASK_REAL_GRAMMARS", str(ROOT / ".cache" / "grammars")))
PARSERS = ROOT / ".cache" / "realparsers"
PARSER_PACKAGES = ["tree-sitter==0.26.1", "tree-sitter-go==0.25.0", "tree-sitter-java==0.23.5",
                   "tree-sitter-c==0.24.2", "python-hcl2==8.1.4", "commentjson==0.9.0"]

# name, path under CACHE, start, Lark indenter, kind of language, package, real parser
GRAMMARS = [
    ("commentjson", "commentjson/commentjson.lark", "start", "none", "data (JSON + comments)",
     "commentjson 0.9.0", "commentjson"),
    ("cel", "cel/cel.lark", "expr", "none", "expression (CEL)", "cel-python 0.5.0", None),
    ("hcl2", "hcl2/hcl2.lark", "start", "none", "configuration (HCL2)", "python-hcl2 8.1.4",
     "hcl2"),
    ("beancount", "beancount/beancount.lark", "start", "none", "configuration (ledger)",
     "beancount-parser 1.2.3", None),
    ("sql", "syncode/sql.lark", "start", "none", "query (SQL)", "syncode 0.4.16", "sqlite"),
    ("prover9", "syncode/prover9.lark", "start", "none", "logic (Prover9)", "syncode 0.4.16",
     None),
    ("pddl", "pddl/grammar.lark", "domain", "none", "planning (PDDL domain)", "pddl 0.5.1", None),
    ("go", "syncode/go.lark", "start", "none", "programming (Go)", "syncode 0.4.16",
     "tree_sitter_go"),
    ("java", "syncode/java.lark", "start", "none", "programming (Java)", "syncode 0.4.16",
     "tree_sitter_java"),
    ("c", "syncode/c.lark", "start", "none", "programming (C)", "syncode 0.4.16",
     "tree_sitter_c"),
    ("vyper", "vyper/grammar.lark", "module", "python", "programming (Vyper)", "vyper 0.4.3",
     None),
    ("gdscript", "gdscript/gdscript.lark", "start", "none", "programming (GDScript)",
     "gdtoolkit 4.5.0", None),
    ("iec61131", "blark/iec.lark", "start", "none", "programming (IEC 61131-3 ST)",
     "blark 0.8.3", None),
]

# A real parser's verdict on one text, run in a child process with .cache/realparsers first
# on sys.path (so its packages never shadow the test environment's own lark).
JUDGE = r'''
import json, sys
kind = sys.argv[1]
def ok(text):
    if kind.startswith("tree_sitter_"):
        import importlib, tree_sitter
        lang = tree_sitter.Language(importlib.import_module(kind).language())
        tree = tree_sitter.Parser(lang).parse(text.encode())
        return not tree.root_node.has_error
    if kind == "hcl2":
        import hcl2
        hcl2.loads(text)
        return True
    if kind == "commentjson":
        import commentjson
        commentjson.loads(text)
        return True
    raise SystemExit("unknown judge " + kind)
for line in sys.stdin:
    try:
        print(1 if ok(json.loads(line)) else 0)
    except SystemExit:
        raise
    except Exception:
        print(0)
'''


def sqlite_ok(text: str) -> bool:
    """SQLite's parser: a statement that fails only on names (no such table...) parses."""
    con = sqlite3.connect(":memory:")
    try:
        con.execute("EXPLAIN " + text)
        return True
    except sqlite3.Error as e:
        m = str(e)
        return not ("syntax error" in m or "incomplete input" in m or "unrecognized token" in m)
    finally:
        con.close()


def judge(kind, texts):
    if kind is None or not texts:
        return None
    if kind == "sqlite":
        return [sqlite_ok(t) for t in texts]
    if not PARSERS.exists():
        return None
    env = dict(os.environ, PYTHONPATH=str(PARSERS))
    proc = subprocess.run([sys.executable, "-c", JUDGE, kind], env=env, capture_output=True,
                          text=True, input="".join(json.dumps(t) + "\n" for t in texts))
    if proc.returncode != 0:
        return None
    return [line == "1" for line in proc.stdout.split()]


def lark_verdicts(grammar, start, indenter, texts):
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "tools" / "lark_accepts.py"),
                           str(grammar), start, indenter],
                          input="".join(json.dumps(t) + "\n" for t in texts), capture_output=True,
                          text=True)
    if proc.returncode != 0:
        return None, proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
    return [line == "1" for line in proc.stdout.split()], ""


def run_one(g, tokenizer, walks, samples, timeout):
    name, rel, start, indenter, kind, package, parser = g
    row = {"name": name, "package": package, "kind": kind, "file": rel, "start": start}
    grammar = CACHE / rel
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store.cfgm"
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(["nice", BIN, "reduction", str(grammar), "--tokenizer", tokenizer,
                                   "--start", start, "--walks", str(walks), "--max-tokens", "48",
                                   "--threads", "1", "--json", "-o", str(store)],
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            row.update(compiles=False, reason=f"over the table's {timeout} s limit")
            return row
        row["wall_seconds"] = round(time.perf_counter() - t0, 1)
        if proc.returncode not in (0, 1):
            row.update(compiles=False, reason=proc.stderr.strip().splitlines()[-1]
                       if proc.stderr.strip() else f"exit status {proc.returncode}")
            return row
        rep = json.loads(proc.stdout)
        row.update(compiles=True, report=rep)
        out = Path(tmp) / "samples"
        proc = subprocess.run(["nice", BIN, "sample", str(store), "-n", str(samples), "--seed", "1",
                               "--ascii", "--max-tokens", "40", "-o", str(out)],
                              capture_output=True, text=True, timeout=timeout)
        texts = [p.read_text(encoding="utf-8", errors="replace")
                 for p in sorted(out.glob("sample_*.txt"))]
        row["samples"] = len(texts)
        row["samples_complete"] = proc.returncode == 0
        verdicts, why = lark_verdicts(grammar, start, indenter, texts)
        row["lark_accepts"] = sum(verdicts) if verdicts is not None else None
        if verdicts is None:
            row["lark_error"] = why
        real = judge(parser, texts)
        row["real_parser"] = {"sqlite": "SQLite 3 (sqlite3)", "hcl2": "python-hcl2 hcl2.loads",
                              "commentjson": "commentjson.loads"}.get(
            parser, parser.replace("_", "-") if parser else None)
        row["real_accepts"] = sum(real) if real is not None else None
        if real is not None:
            row["real_rejected_example"] = next((t[:200] for t, ok in zip(texts, real) if not ok),
                                                None)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default=os.environ.get("CFGMASK_TOK_LLAMA_SPM"))
    ap.add_argument("--walks", type=int, default=30)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-parsers", action="store_true")
    ap.add_argument("-o", "--output", default=str(ROOT / "tests" / "realgrammars" / "table.json"))
    a = ap.parse_args()
    if not a.tokenizer:
        sys.exit("table.py: give --tokenizer or set CFGMASK_TOK_LLAMA_SPM (./setup.sh)")
    subprocess.run([str(ROOT / "tests" / "realgrammars" / "fetch.sh"), str(CACHE)], check=True)
    if not a.no_parsers and not PARSERS.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(PARSERS)]
                       + PARSER_PACKAGES, check=True)
    only = set(filter(None, a.only.split(",")))
    rows = []
    for g in GRAMMARS:
        if only and g[0] not in only:
            continue
        row = run_one(g, a.tokenizer, a.walks, a.samples, a.timeout)
        rows.append(row)
        rep = row.get("report")
        if rep:
            st = rep["steps"]
            print(f"{g[0]:12s} {st[0]['rows']:>9,} -> {st[-1]['rows']:>8,} rows "
                  f"({st[-1]['reduction']:.2f}x; payloads stored {st[-1].get('payloads', 0):,}, "
                  f"{st[-1].get('payloads_reduction', 0):.2f}x), checks/boundary step "
                  f"{rep['no_streamline']['parser_checks_boundary']['mean']:.0f} -> "
                  f"{rep['streamlined']['parser_checks_boundary']['mean']:.0f}, compile "
                  f"{rep['compile_seconds']:.1f} s, Lark {row['lark_accepts']}/{row['samples']}, "
                  f"real {row['real_accepts']}", flush=True)
        else:
            print(f"{g[0]:12s} does not compile: {row['reason']}", flush=True)
    load = os.getloadavg()
    doc = {"tokenizer": os.path.basename(a.tokenizer), "walks": a.walks, "samples": a.samples,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "load_average": [round(x, 2) for x in load], "cpus": os.cpu_count(), "grammars": rows}
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print("wrote", a.output)


if __name__ == "__main__":
    main()
