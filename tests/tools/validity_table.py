"""Share of model outputs that the language's own parser accepts,
unconstrained vs constrained by cfgmask, with tokens/s both ways.

    python tests/tools/validity_table.py --model SmolLM2.gguf \
        --python-store python.cfgm [--sql-store sql.cfgm] [--max-tokens 128] [--limit N]

Prompts: tests/prompts/python.txt and sql.txt (one request a line).  Python
outputs are judged by CPython's compile(), SQL outputs by SQLite's parser
(sqlite3, syntax errors only).  Unconstrained outputs are judged as they
come and, more kindly, after taking the body of their first ``` fence.
--answer-prefix opens every answer in both modes (e.g. a ``` fence the model
reads and the grammar does not see).  Greedy decoding; a constrained completion that reaches the budget is steered
to its end (cfgmask.generate), and counted incomplete if it still has not
ended.  A grammar without a store is run unconstrained only.  Every output is
also judged by Lark (parser='lalr', lexer='contextual', PythonIndenter for
Python) on the grammar the store was compiled from, the language cfgmask
promises: constrained outputs must all pass.  --json keeps every output.
"""
import argparse
import json
import re
import sys
import time
from pathlib import Path

from cfgmask import Store
from cfgmask import generate as gen

PROMPTS = Path(__file__).resolve().parents[1] / "prompts"
FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)(```|$)", re.S)


def fenced(text):
    m = FENCE.search(text)
    return m.group(1) if m else text


def lark_checker(grammar, start, python):
    from lark import Lark
    from lark.indenter import PythonIndenter
    kwargs = dict(parser="lalr", lexer="contextual", start=start)
    if python:
        kwargs["postlex"] = PythonIndenter()
    parser = Lark.open(grammar, **kwargs)

    def accepts(text):
        try:
            parser.parse(text)
            return True
        except Exception:
            return False
    return accepts


def run(llm, name, prompts, check, lark_ok, store, args):
    rows = {"grammar": name, "prompts": len(prompts)}
    modes = [("unconstrained", None)] + ([("constrained", store)] if store else [])
    for mode, s in modes:
        ok = ok_fenced = ok_lark = ended = steered = tokens = 0
        seconds = mask_seconds = 0.0
        outputs = []
        for i, p in enumerate(prompts):
            prefix = args.answer_prefix.replace("LANG", name)
            res = gen.generate(llm, gen.format_prompt(p, answer_prefix=prefix), s,
                               max_tokens=args.max_tokens,
                               steer_tokens=args.steer_tokens)
            good = check(res.text)
            ok += good
            in_lark = lark_ok(res.text)
            ok_lark += in_lark
            outputs.append({"prompt": p, "text": res.text, "ended": res.ended,
                            "accepted": bool(good), "lark": bool(in_lark)})
            # With a prefix that opened a fence, the body ends at the closing one.
            ok_fenced += check(res.text.split("```")[0] if "```" in prefix else fenced(res.text))
            ended += res.ended
            steered += res.steered
            tokens += len(res.tokens)
            seconds += res.seconds
            mask_seconds += res.mask_seconds
            if args.verbose:
                print(f"[{name} {mode} {i}] ended={res.ended} ok={good} lark={in_lark} "
                      f"{res.text[:80]!r}",
                      file=sys.stderr)
        rows[mode] = {"accepted": ok, "accepted_fenced": ok_fenced, "lark": ok_lark,
                      "ended": ended, "outputs": outputs,
                      "steered": steered, "tokens": tokens,
                      "tokens_per_s": tokens / seconds if seconds else 0.0,
                      "mask_us_per_token": 1e6 * mask_seconds / max(1, tokens)}
        print(f"{name} {mode}: {ok}/{len(prompts)} accepted, {ok_lark} in Lark's language, "
              f"{ended} ended, "
              f"{tokens / seconds:.1f} tokens/s", file=sys.stderr)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--python-store")
    ap.add_argument("--sql-store")
    # cfgmask's strict grammar; Lark's own: $CFGMASK_LARK_GRAMMARS/python.lark
    ap.add_argument("--python-grammar", default=str(Path(__file__).resolve().parents[2]
                                                    / "grammar" / "lark" / "python.lark"))
    ap.add_argument("--sql-grammar", default=str(Path(__file__).resolve().parents[2]
                                                 / "grammar" / "lark" / "sql.lark"))
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--answer-prefix", default="",
                    help="opens every answer, both modes (LANG: python or sql), "
                         "e.g. '```LANG\\n' (backslash escapes allowed)")
    ap.add_argument("--steer-tokens", type=int, default=64)
    ap.add_argument("--limit", type=int, default=0, help="first N prompts of each file")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    args.answer_prefix = args.answer_prefix.encode("utf-8").decode("unicode_escape")
    llm = gen.load_model(args.model, n_ctx=1024, n_threads=args.threads)
    results = []
    ap_grammars = {"python": (args.python_grammar, "file_input", True),
                   "sql": (args.sql_grammar, "start", False)}
    for name, path, check, store_path in [
            ("python", "python.txt", gen.python_compiles, args.python_store),
            ("sql", "sql.txt", gen.sqlite_parses, args.sql_store)]:
        lark_ok = lark_checker(*ap_grammars[name])
        prompts = [l.strip() for l in (PROMPTS / path).read_text().splitlines() if l.strip()]
        if args.limit:
            prompts = prompts[:args.limit]
        store = Store.load(store_path) if store_path else None
        if store is not None and gen.vocabulary_mismatches(llm, store):
            sys.exit(f"{store_path}: not compiled for this model's vocabulary")
        results.append(run(llm, name, prompts, check, lark_ok, store, args))
    print("| grammar | mode | accepted | accepted (fenced body) | in Lark's language | ended | "
          "steered | tokens/s | mask µs/token |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for mode in ("unconstrained", "constrained"):
            if mode not in r:
                continue
            m = r[mode]
            n = r["prompts"]
            print(f"| {r['grammar']} | {mode} | {m['accepted']}/{n} | "
                  f"{m['accepted_fenced']}/{n} | {m['lark']}/{n} | {m['ended']}/{n} | {m['steered']} | "
                  f"{m['tokens_per_s']:.1f} | "
                  + (f"{m['mask_us_per_token']:.0f}" if mode == "constrained" else "—") + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
