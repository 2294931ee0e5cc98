#!/usr/bin/env python3
"""Side-by-side benchmark: cfgmask against XGrammar and llguidance, one run, one machine.

    tests/bench/peers/run.sh [--size smoke|modest|full] [--out DIR] [--engines ...] [--workloads ...]

(``run.sh`` creates ``.venv-peers`` from PyPI, builds ``cfgmask`` and
``cfgmask_peer_driver`` in ``build-peers``, then runs this script with the
peers' interpreter.)

Every engine gets the same grammar (its own format, see README.md), the same
vocabulary (Qwen2's 151,936 ids, qwen2_tokenizer.py) and the same
teacher-forced id streams (the canonical BPE encoding of each document).  Each
engine and workload runs in a fresh process, single thread.

Workloads and documents (nobody here wrote them):
  json    grammar/lark/json.lark; *.json files found on this machine
          (tests/corpus/json_corpus.py), those Lark accepts
  sql     grammar/lark/sql.lark; SQLite statements (tests/corpus/harvest_sql.py),
          those Lark accepts
  python  cfgmask's strict python.lark (file_input); stdlib files (tests/corpus/python_corpus.py)
Validity is Lark's verdict (``parser='lalr', lexer='contextual'``, plus
PythonIndenter for Python), the language cfgmask promises.  Besides the valid
documents, each workload gets mutated documents (a character deleted,
inserted or swapped) judged by Lark: an engine that accepts one Lark rejects
(every token allowed and EOS at the end) has a false positive; one that
refuses a Lark-valid one a false negative.

Outputs in OUT (default out/peers): results.json, table.md, latency.png.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

SIZES = {  # documents per workload, mutated documents per workload, max bytes per document
    "smoke": {"json": (5, 5, 2048), "sql": (5, 5, 2048), "python": (1, 0, 1500)},
    "modest": {"json": (50, 25, 8192), "sql": (50, 25, 8192), "python": (3, 6, 4096)},
    "full": {"json": (300, 200, 65536), "sql": (600, 300, 65536), "python": (50, 100, 32768)},
}

GRAMMARS = {
    "json": {"lark": ROOT / "grammar/lark/json.lark", "start": "start"},
    "sql": {"lark": ROOT / "grammar/lark/sql.lark", "start": "start"},
    # cfgmask's strict Python grammar; the peers' translations (grammars/) are
    # of Lark's python.lark, which is looser: see README.md.
    "python": {"lark": ROOT / "grammar/lark/python.lark", "start": "file_input"},
}


def log(msg):
    print(f"[peers] {msg}", flush=True)


def lark_parser(workload):
    import lark
    if workload == "python":
        from lark.indenter import PythonIndenter
        return lark.Lark(GRAMMARS[workload]["lark"].read_text(encoding="utf-8"), parser="lalr",
                         lexer="contextual", postlex=PythonIndenter(), start="file_input")
    return lark.Lark(GRAMMARS[workload]["lark"].read_text(encoding="utf-8"), parser="lalr",
                     lexer="contextual", start="start")


def lark_accepts(parser, text):
    try:
        parser.parse(text)
        return True
    except Exception:
        return False


def spread(items, n):
    if len(items) <= n:
        return list(items)
    return [items[(i * len(items)) // n] for i in range(n)]


# ---------------------------------------------------------------- corpora

def ensure_corpus(corpus: Path, workload: str, cfgmask_python: str):
    if workload == "json" and not (corpus / "json/manifest.json").exists():
        subprocess.run([cfgmask_python, str(ROOT / "tests/corpus/json_corpus.py"), str(corpus),
                        "--quiet"], check=True)
    if workload == "sql" and not (corpus / "sql/manifest.json").exists():
        subprocess.run([cfgmask_python, str(ROOT / "tests/corpus/harvest_sql.py"), str(corpus),
                        "--quiet"], check=True)
    if workload == "python" and not (corpus / "python/manifest.json").exists():
        subprocess.run([cfgmask_python, str(ROOT / "tests/corpus/python_corpus.py"), str(corpus),
                        "--jobs", "1"], check=True)


STRIP_FINAL_NEWLINE = False


def candidate_texts(corpus: Path, workload: str, max_bytes: int):
    if workload == "python":
        m = json.loads((corpus / "python/manifest.json").read_text())
        files = [f for f in m["files"] if f["bytes"] <= max_bytes and f["bytes"] >= 256]
        for f in files:
            yield f["rel"], Path(f["path"]).read_text(encoding="utf-8")
        return
    ext = {"json": "json", "sql": "sql"}[workload]
    for p in sorted((corpus / workload / "valid").glob(f"*.{ext}")):
        if p.stat().st_size <= max_bytes:
            text = p.read_text(encoding="utf-8")
            if STRIP_FINAL_NEWLINE and text.endswith("\n"):
                text = text[:-1]  # --strip-final-newline: the file's last byte
            yield p.name, text


MUTATION_CHARS = {"json": list('{}[],:"0-.e ') + ["true", "nul", "\\"],
                  "sql": list("(),;.*'=\" ") + ["SELECT", "FROM", " AND", "--"],
                  "python": list("():,.=[]\n ") + ["    ", "\tx", "def "]}


def mutate(text, rng, workload):
    i = rng.randrange(len(text) + 1)
    kind = rng.choice(("delete", "insert", "swap"))
    if kind == "delete" and text:
        i = min(i, len(text) - 1)
        return text[:i] + text[i + rng.randint(1, 3):]
    if kind == "swap" and len(text) > 1:
        i = min(i, len(text) - 2)
        return text[:i] + text[i + 1] + text[i] + text[i + 2:]
    return text[:i] + rng.choice(MUTATION_CHARS[workload]) + text[i:]


def select_documents(corpus, workload, n_valid, n_mut, max_bytes, seed=1):
    parser = lark_parser(workload)
    cands = list(candidate_texts(corpus, workload, max_bytes))
    picked, rejected = [], 0
    # walk an even spread first, then the rest, until n_valid Lark-valid ones
    order = spread(cands, n_valid) + cands
    seen = set()
    for name, text in order:
        if len(picked) >= n_valid:
            break
        if name in seen or not text:
            continue
        seen.add(name)
        if lark_accepts(parser, text):
            picked.append((name, text, True))
        else:
            rejected += 1
    rng = random.Random(seed)
    mutants = []
    for k in range(n_mut):
        name, text, _ = picked[k % len(picked)]
        mtext = mutate(text, rng, workload)
        if mtext == text:
            continue
        mutants.append((f"mut{k:03d}-{name}", mtext, lark_accepts(parser, mtext)))
    return picked, mutants, {"candidates": len(cands), "lark_rejected_while_picking": rejected}


# ---------------------------------------------------------------- tokenizer, streams

def load_tokenizer(out: Path):
    from tokenizers import Tokenizer
    import qwen2_tokenizer
    path = out / "qwen2-tokenizer.json"
    if not path.exists():
        tok, _, _ = qwen2_tokenizer.build(os.environ["CFGMASK_TOK_QWEN2"])
        tok.save(str(path))
    return Tokenizer.from_file(str(path)), path


def write_streams(tok, docs, path: Path):
    bad_roundtrip = 0
    with open(path, "w") as f:
        for name, text, _ in docs:
            ids = tok.encode(text, add_special_tokens=False).ids
            if tok.decode(ids, skip_special_tokens=False) != text:
                bad_roundtrip += 1
            f.write(name.replace("\t", " ") + "\t" + " ".join(map(str, ids)) + "\n")
    return bad_roundtrip


# ---------------------------------------------------------------- running

class TimedOut(RuntimeError):
    pass


TIMEOUT_S = 900


def run_measured(cmd, **kw):
    """Runs cmd with a time limit (TimedOut past it); returns (returncode, wall seconds).
    Peak memory comes from the children themselves (VmHWM, GNU time): getrusage's
    maxrss of a child counts this process's memory at fork."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, **kw)
    try:
        p.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise TimedOut(f"stopped after {TIMEOUT_S} s")
    return p.returncode, time.perf_counter() - t0


def cfgmask_store(args, workload, tok_path_gguf, out: Path):
    store = out / "stores" / f"{workload}.cfgm"
    store.parent.mkdir(parents=True, exist_ok=True)
    grammar = GRAMMARS[workload]["lark"]
    key = hashlib.sha1(grammar.read_bytes() + Path(args.cfgmask).read_bytes()[:1 << 20]
                       + str(os.path.getmtime(args.cfgmask)).encode()).hexdigest()
    meta_path = store.with_suffix(".meta.json")
    if store.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("key") == key:
            meta["reused"] = True
            return store, meta
    # One thread, as the peers get (XGrammar's compiler is given max_threads=1).
    cmd = [args.cfgmask, "compile", str(grammar), "--tokenizer", tok_path_gguf,
           "--start", GRAMMARS[workload]["start"], "--threads", "1", "--quiet", "-o", str(store)]
    log(f"cfgmask compile {workload}: {' '.join(cmd[1:])}")
    hwm = out / "stores" / f"{workload}.maxrss"
    if os.path.exists("/usr/bin/time"):  # GNU time: the compiler's own peak RSS in KiB
        cmd = ["/usr/bin/time", "-f", "%M", "-o", str(hwm)] + cmd
    def cap():  # a store build can outgrow a shared machine: fail it instead
        import resource
        lim = int(args.compile_mem_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    rc, wall = run_measured(cmd, preexec_fn=cap)
    if rc != 0:
        raise RuntimeError(f"cfgmask compile {workload} failed (exit {rc}; address space "
                           f"capped at {args.compile_mem_gib} GiB)")
    rss = int(hwm.read_text().split()[-1]) * 1024 if hwm.exists() else None
    # The store's own timings: reading the tokenizer and building its trie is
    # work on the tokenizer alone, reported apart as the peers' tokenizer
    # preparation is (XGrammar's TokenizerInfo, llguidance's LLTokenizer).
    stats = json.loads(subprocess.run([args.cfgmask, "stats", "--json", str(store)], check=True,
                                      capture_output=True, text=True).stdout)
    tok_s = stats["seconds"].get("tokenizer", 0.0)
    meta = {"key": key, "compile_command_s": wall, "tokenizer_s": tok_s,
            "compile_cold_s": wall - tok_s, "compile_seconds": stats["seconds"],
            "compile_peak_rss_bytes": rss, "store_bytes": store.stat().st_size, "reused": False}
    meta_path.write_text(json.dumps(meta))
    return store, meta


def cfgmask_inprocess_compile(args, workload, tok_path, out: Path):
    """The grammar compile in-process from a prepared tokenizer, one thread:
    what engines.py times for the peers (cfgmask_compile.py)."""
    grammar = GRAMMARS[workload]["lark"]
    res = out / "raw" / f"cfgmask-compile-{workload}.json"
    res.parent.mkdir(parents=True, exist_ok=True)
    cmd = [os.environ.get("CFGMASK_PYTHON", sys.executable), str(HERE / "cfgmask_compile.py"),
           str(grammar), GRAMMARS[workload]["start"], tok_path, str(res)]
    env = dict(os.environ)
    if os.environ.get("CFGMASK_PEERS_PYTHONPATH"):  # run.sh: this checkout's package
        env["PYTHONPATH"] = os.environ["CFGMASK_PEERS_PYTHONPATH"]
    rc, _ = run_measured(cmd, env=env)
    if rc != 0:
        raise RuntimeError(f"cfgmask in-process compile {workload} failed (exit {rc})")
    return json.loads(res.read_text())


def run_cfgmask(args, workload, streams, out: Path):
    store, meta = cfgmask_store(args, workload, os.environ["CFGMASK_TOK_QWEN2"], out)
    inproc = cfgmask_inprocess_compile(args, workload, os.environ["CFGMASK_TOK_QWEN2"], out)
    res_path = out / "raw" / f"cfgmask-{workload}.json"
    rc, wall = run_measured([args.driver, str(store), str(streams), str(res_path)])
    if rc != 0:
        return {"engine": "cfgmask", "error": f"driver exit {rc}"}
    r = json.loads(res_path.read_text())
    # compile_cold_s / compile_repeat_s / tokenizer_s: in-process, as the peers'
    # are timed; the `cfgmask compile` command (its process, reading the
    # tokenizer file, writing the store) is reported apart.
    r.update({"engine": "cfgmask", "compile_cold_s": inproc["compile_cold_s"],
              "compile_repeat_s": inproc["compile_again_s"],
              "tokenizer_s": inproc["tokenizer_s"],
              "compile_command_s": meta.get("compile_command_s"),
              "compile_command_less_tokenizer_s": meta["compile_cold_s"],
              "compile_seconds": meta.get("compile_seconds"),
              "compile_reused_from_earlier_run": meta["reused"],
              "store_load_s": r["store_load_s"], "compile_peak_rss_bytes":
              meta["compile_peak_rss_bytes"], "store_bytes": meta["store_bytes"],
              "rss_after_tokenizer_bytes": 0})
    return r


def peer_grammar(engine, workload, out: Path):
    if engine == "llguidance":  # the rewrite where llguidance refuses the original
        rewritten = HERE / "grammars" / f"{workload}_llguidance.lark"
        return rewritten if rewritten.exists() else GRAMMARS[workload]["lark"]
    if engine == "xgrammar":
        return HERE / "grammars" / f"{workload}.gbnf"
    if engine == "xgrammar-builtin":  # its own JSON grammar; the file only names the workload
        return HERE / "grammars" / "json.gbnf" if workload == "json" else HERE / f"no-{workload}"
    if engine == "syncode":  # its own built-in grammar (README.md), JSON only here
        from importlib.util import find_spec
        builtin = Path(find_spec("syncode").origin).parent / "parsers" / "grammars"
        return builtin / f"{workload}.lark" if workload == "json" else HERE / f"no-{workload}.lark"
    raise KeyError(engine)


def run_peer(args, engine, workload, streams, tok_json, out: Path):
    grammar = peer_grammar(engine, workload, out)
    if not grammar.exists():
        return {"engine": engine, "error": f"no {engine} grammar for {workload} ({grammar.name})"}
    res_path = out / "raw" / f"{engine}-{workload}.json"
    cmd = [sys.executable, str(HERE / "engines.py"), engine, str(grammar), str(streams),
           str(tok_json), str(res_path)]
    env = dict(os.environ, OMP_NUM_THREADS="1", RAYON_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    rc, wall = run_measured(cmd, env=env)
    if rc != 0:
        return {"engine": engine, "error": f"worker exit {rc}"}
    return json.loads(res_path.read_text())


# ---------------------------------------------------------------- summary

def pct(sorted_vals, p):
    if not sorted_vals:
        return None
    i = int(p * (len(sorted_vals) - 1) + 0.5)
    return sorted_vals[min(i, len(sorted_vals) - 1)]


def summarise(r, docs):
    if "error" in r:
        return {"error": r["error"]}
    verdict = {name: ok for name, _, ok in docs}
    fill, step = [], []
    valid_refused, fp, fn_mut, mut_total = [], [], [], 0
    for s in r["streams"]:
        fill.extend(s["fill_us"])
        adv = s["advance_us"]
        step.extend(f + a for f, a in zip(s["fill_us"], adv))
        accepted = s["first_reject"] < 0 and s["eos"]
        lark_ok = verdict[s["name"]]
        if not s["name"].startswith("mut"):
            if not accepted:
                valid_refused.append({"doc": s["name"], "at_token": s["first_reject"],
                                      "reason": s["reason"] or "EOS not allowed at end"})
        else:
            mut_total += 1
            if accepted and not lark_ok:
                fp.append(s["name"])
            if lark_ok and not accepted:
                fn_mut.append(s["name"])
    fill.sort()
    step.sort()
    mem = r.get("peak_rss_bytes", 0)
    return {
        "version": r.get("version"),
        "compile_cold_s": r.get("compile_cold_s"),
        "compile_repeat_s": r.get("compile_repeat_s"),
        "tokenizer_s": r.get("tokenizer_s"),
        "steps": len(fill),
        "fill_us": {"p50": pct(fill, .5), "p90": pct(fill, .9), "p99": pct(fill, .99),
                    "max": fill[-1] if fill else None,
                    "mean": sum(fill) / len(fill) if fill else None},
        "step_us": {"p50": pct(step, .5), "p99": pct(step, .99), "max": step[-1] if step else None},
        "peak_rss_bytes": mem,
        "rss_after_tokenizer_bytes": r.get("rss_after_tokenizer_bytes"),
        "compile_peak_rss_bytes": r.get("compile_peak_rss_bytes"),
        "store_bytes": r.get("store_bytes"),
        "valid_docs_refused": valid_refused,
        "mutants": mut_total,
        "mutant_false_positives": fp,
        "mutant_false_negatives": fn_mut,
    }


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def fmt(v, digits=1):
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def table(results, meta):
    lines = [f"Machine: {meta['cpu']}, {meta['cores']} cores; size `{meta['size']}`; "
             f"tokenizer Qwen2 ({meta['vocab']:,} ids); one thread per engine.", "",
             "| workload | engine | docs / tokens | tokenizer prep | compile cold | compile again | "
             "fill p50 µs | "
             "p99 | max | step (fill+advance) p50 / p99 µs | peak RSS MiB | valid docs refused | "
             "mutants: FP / FN (of n) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for wl, per in results.items():
        for eng, s in per["engines"].items():
            if "error" in s:
                lines.append(f"| {wl} | {eng} | - | - | - | - | - | - | - | - | - | "
                             f"not run: {s['error'][:120]} | - |")
                continue
            f, st = s["fill_us"], s["step_us"]
            lines.append(
                f"| {wl} | {eng} | {per['valid_docs']} / {per['valid_tokens']:,} | "
                f"{fmt(s.get('tokenizer_s'), 2)} s | {fmt(s['compile_cold_s'], 3)} s | {fmt(s['compile_repeat_s'], 3)} s | "
                f"{fmt(f['p50'])} | {fmt(f['p99'])} | {fmt(f['max'])} | "
                f"{fmt(st['p50'])} / {fmt(st['p99'])} | {s['peak_rss_bytes'] / 2**20:.0f} | "
                f"{len(s['valid_docs_refused'])} | {len(s['mutant_false_positives'])} / "
                f"{len(s['mutant_false_negatives'])} (of {s['mutants']}) |")
    return "\n".join(lines) + "\n"


def plot(results, path: Path, meta):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    wls = list(results)
    fig, axes = plt.subplots(1, len(wls), figsize=(5 * len(wls), 4), squeeze=False)
    for ax, wl in zip(axes[0], wls):
        names, p50, p99, mx = [], [], [], []
        for eng, s in results[wl]["engines"].items():
            if "error" in s:
                continue
            names.append(eng)
            p50.append(s["fill_us"]["p50"])
            p99.append(s["fill_us"]["p99"])
            mx.append(s["fill_us"]["max"])
        x = range(len(names))
        ax.bar([i - 0.25 for i in x], p50, 0.25, label="p50")
        ax.bar(list(x), p99, 0.25, label="p99")
        ax.bar([i + 0.25 for i in x], mx, 0.25, label="max")
        ax.set_xticks(list(x), names)
        ax.set_yscale("log")
        ax.set_ylabel("mask fill per token (µs)")
        ax.set_title(f"{wl}: {results[wl]['valid_docs']} docs, {results[wl]['valid_tokens']:,} tokens")
        ax.legend()
    fig.suptitle(f"{meta['cpu']} — Qwen2 tokenizer, teacher-forced, 1 thread", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="modest")
    ap.add_argument("--out", default=str(ROOT / "out" / "peers"))
    ap.add_argument("--corpus", default=str(ROOT / ".cache" / "corpus"))
    ap.add_argument("--engines", nargs="+",
                    default=["cfgmask", "llguidance", "xgrammar", "xgrammar-builtin"],
                    help="also: syncode (JSON only); xgrammar-builtin runs on JSON only")
    ap.add_argument("--workloads", nargs="+", default=["json", "sql", "python"],
                    choices=["json", "sql", "python"])
    ap.add_argument("--cfgmask", default=str(ROOT / "build-peers" / "cfgmask"))
    ap.add_argument("--timeout", type=int, default=900,
                    help="seconds per engine and workload (compile + streams)")
    ap.add_argument("--compile-mem-gib", type=float, default=8.0,
                    help="address-space cap for cfgmask compile")
    ap.add_argument("--merge", action="store_true",
                    help="keep the other workloads/engines of an earlier results.json in OUT")
    ap.add_argument("--docs", type=int,
                    help="valid documents per workload (default: the size's)")
    ap.add_argument("--strip-final-newline", action="store_true",
                    help="JSON and SQL documents without their file's final newline (llguidance "
                         "refuses whitespace after the last value); the same streams for all")
    ap.add_argument("--driver", default=str(ROOT / "build-peers" / "tests" / "cfgmask_peer_driver"))
    a = ap.parse_args(argv)
    global TIMEOUT_S, STRIP_FINAL_NEWLINE
    TIMEOUT_S = a.timeout
    STRIP_FINAL_NEWLINE = a.strip_final_newline
    out = Path(a.out)
    (out / "raw").mkdir(parents=True, exist_ok=True)
    (out / "streams").mkdir(parents=True, exist_ok=True)
    cfgmask_python = os.environ.get("CFGMASK_PYTHON", sys.executable)
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(), "size": a.size,
            "docs": a.docs, "strip_final_newline": a.strip_final_newline,
            "python": platform.python_version(), "vocab": 151936,
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    log(f"machine: {meta['cpu']}")
    tok, tok_json = load_tokenizer(out)
    results = {}
    if a.merge and (out / "results.json").exists():
        results = json.loads((out / "results.json").read_text())["workloads"]
    for wl in a.workloads:
        n_valid, n_mut, max_bytes = SIZES[a.size][wl]
        n_valid = a.docs or n_valid
        ensure_corpus(Path(a.corpus), wl, cfgmask_python)
        valid, mutants, sel = select_documents(Path(a.corpus), wl, n_valid, n_mut, max_bytes)
        docs = valid + mutants
        streams = out / "streams" / f"{wl}.txt"
        bad_rt = write_streams(tok, docs, streams)
        n_tokens = sum(len(l.split("\t", 1)[1].split()) for l in
                       streams.read_text().splitlines()[:len(valid)])
        import qwen2_tokenizer
        tk_bad = qwen2_tokenizer.check_against_tiktoken(
            tok, os.environ["CFGMASK_TOK_QWEN_TIKTOKEN"], [(n, t) for n, t, _ in docs])
        log(f"{wl}: {len(valid)} valid docs ({n_tokens:,} tokens), {len(mutants)} mutants "
            f"({sum(1 for m in mutants if m[2])} Lark-valid); ids differing from tiktoken: "
            f"{len(tk_bad)}; decode round-trip failures: {bad_rt}")
        per = {"valid_docs": len(valid), "valid_tokens": n_tokens, "mutants": len(mutants),
               "mutants_lark_valid": sum(1 for m in mutants if m[2]), "selection": sel,
               "tiktoken_id_mismatches": tk_bad, "roundtrip_failures": bad_rt,
               "documents": [n for n, _, _ in valid],
               "engines": results.get(wl, {}).get("engines", {}) if a.merge else {}}
        for eng in a.engines:
            log(f"{wl}: {eng}")
            try:
                r = (run_cfgmask(a, wl, streams, out) if eng == "cfgmask"
                     else run_peer(a, eng, wl, streams, tok_json, out))
            except Exception as e:  # one engine failing must not lose the others
                r = {"engine": eng, "error": f"{type(e).__name__}: {e}"}
            s = summarise(r, docs)
            per["engines"][eng] = s
            if "error" in s:
                log(f"  {eng}: {s['error']}")
            else:
                log(f"  {eng}: fill p50 {fmt(s['fill_us']['p50'])} p99 {fmt(s['fill_us']['p99'])} "
                    f"max {fmt(s['fill_us']['max'])} µs; refused valid "
                    f"{len(s['valid_docs_refused'])}; FP {len(s['mutant_false_positives'])}")
        results[wl] = per
        (out / "results.json").write_text(json.dumps({"meta": meta, "workloads": results},
                                                     indent=1))
    md = table(results, meta)
    (out / "table.md").write_text(md)
    try:
        plot(results, out / "latency.png", meta)
    except Exception as e:  # matplotlib missing: the table still stands
        log(f"no plot: {e}")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
