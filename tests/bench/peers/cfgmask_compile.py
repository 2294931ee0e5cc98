"""cfgmask's grammar compile timed in-process, the way engines.py times the
peers': the tokenizer is read and prepared once (``cfgmask.Tokenizer``, like
XGrammar's TokenizerInfo or llguidance's LLTokenizer), then the grammar is
compiled from it on one thread, twice when the first takes under `--repeat-under`
seconds (cfgmask keeps no compile cache: the second is as cold as the first).

    python cfgmask_compile.py GRAMMAR START TOKENIZER OUT.json

Runs with the interpreter that has the cfgmask package ($CFGMASK_PYTHON).
"""
import argparse
import json
import resource
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("grammar")
    ap.add_argument("start")
    ap.add_argument("tokenizer")
    ap.add_argument("out")
    ap.add_argument("--repeat-under", type=float, default=5.0)
    a = ap.parse_args()
    import cfgmask
    t0 = time.perf_counter()
    tok = cfgmask.Tokenizer(a.tokenizer)
    tok_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    store = cfgmask.compile_grammar(a.grammar, tok, start=a.start, num_threads=1)
    cold = time.perf_counter() - t0
    again = None
    if cold < a.repeat_under:
        t0 = time.perf_counter()
        cfgmask.compile_grammar(a.grammar, tok, start=a.start, num_threads=1)
        again = time.perf_counter() - t0
    with open(a.out, "w") as f:
        json.dump({"tokenizer_s": tok_s, "compile_cold_s": cold, "compile_again_s": again,
                   "rows": store.stats()["rows"], "seconds": store.stats()["seconds"],
                   "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024},
                  f)


if __name__ == "__main__":
    main()
