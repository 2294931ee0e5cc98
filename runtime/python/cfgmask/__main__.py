"""python -m cfgmask generate: a GGUF model, a prompt, a grammar, constrained text out.
python -m cfgmask serve: an OpenAI-compatible HTTP endpoint, a grammar per request
(cfgmask/serve.py).
python -m cfgmask plot-reduction REPORT.json -o OUT.svg: the figure of `cfgmask reduction`
(cfgmask/reduction.py).

    python -m cfgmask generate --grammar grammar/lark/python.lark --start file_input \
        --model SmolLM2.gguf --prompt "Write a function that reverses a list."

Fill-in-the-middle: --prefix-file and --suffix-file instead of a prompt; the
model reads its FIM template (from its vocabulary's special tokens,
cfgmask/fim.py), the grammar reads the prefix and lets the middle end only
where the suffix follows; the middle is written.

The store is compiled from the grammar with the model file as tokenizer (or
read with --store, or written with --save-store for the next run).  The text
goes to stdout; a progress line (tokens/s, mask µs per token) to stderr.
Errors are one line "cfgmask: what is wrong", exit status 2.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# The server runs llama.cpp only: cfgmask.processors would otherwise import
# transformers (and torch) for HFLogitsProcessor's base class, 4 s and about
# 0.5 GiB of resident memory per server process.
if __name__ == "__main__" and sys.argv[1:2] == ["serve"]:
    sys.modules.setdefault("transformers", None)

from . import Error, GrammarMatcher, Store, compile_grammar  # noqa: E402
from . import generate as gen  # noqa: E402

CHECKS = {"python": ("compile()", gen.python_compiles), "sql": ("sqlite3", gen.sqlite_parses)}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        sys.stderr.write(f"cfgmask: {message}\n")
        sys.exit(2)


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return f.read()


def _generate(args) -> int:
    if not os.path.exists(args.model):
        raise Error(f"{args.model}: no such model file")
    store = None
    if not args.no_constrain:
        t0 = time.perf_counter()
        if args.store:
            store = Store.load(args.store)
            what = f"loaded {args.store}"
        else:
            store = compile_grammar(args.grammar, args.model, start=args.start or "")
            what = f"compiled {args.grammar}"
            if args.save_store:
                store.save(args.save_store)
        print(f"cfgmask: {what} in {time.perf_counter() - t0:.1f} s "
              f"({store.stats()['rows']} store rows)", file=sys.stderr)
    prompt = args.prompt
    if args.prompt_file:
        with open(args.prompt_file, encoding="utf-8") as f:
            prompt = f.read()
    fim_prefix = fim_suffix = None
    if args.prefix_file or args.suffix_file:
        # Completion in the middle of a file: the model reads its FIM prompt,
        # the grammar reads the prefix and ends only where the suffix follows.
        if prompt is not None:
            raise Error("give either --prompt/--prompt-file or --prefix-file/--suffix-file")
        fim_prefix = _read_text(args.prefix_file) if args.prefix_file else ""
        fim_suffix = _read_text(args.suffix_file) if args.suffix_file else ""
        if store is not None and args.prefix_file:
            # A refused prefix is reported, at its place in the file, before
            # the model loads.
            try:
                GrammarMatcher(store, prefix=fim_prefix.encode("utf-8", "surrogateescape"))
            except Error as e:
                raise Error(args.prefix_file + str(e)[len("prefix"):]) from None
    elif prompt is None:
        raise Error("give --prompt TEXT or --prompt-file FILE (or --prefix-file FILE)")
    llm = gen.load_model(args.model, n_ctx=args.ctx, n_threads=args.threads, seed=args.seed)
    if store is not None:
        bad = gen.vocabulary_mismatches(llm, store)
        if bad:
            raise Error("the store was not compiled for this model's vocabulary: " + bad[0])
    tty = sys.stderr.isatty() and not args.quiet

    def progress(tok, piece, partial):
        if tty:
            sys.stderr.write(f"\r\033[Kcfgmask: {len(partial.tokens)} tokens  "
                             f"{partial.tokens_per_second:.1f} tokens/s  "
                             f"mask {partial.mask_us_per_token:.0f} µs/token")
            sys.stderr.flush()

    if fim_prefix is not None:
        from . import fim
        template = fim.template_of_llama(llm)
        print("cfgmask: fill-in-the-middle with " +
              (template.describe() if template else
               "no FIM tokens in this model's vocabulary: the model reads the prefix alone"),
              file=sys.stderr)
        res = gen.generate(llm, "", store, max_tokens=args.max_tokens,
                           steer_tokens=args.steer_tokens, temperature=args.temperature,
                           seed=args.seed, on_token=progress,
                           prefix=fim_prefix.encode("utf-8", "surrogateescape"),
                           suffix=fim_suffix.encode("utf-8", "surrogateescape"),
                           prompt_tokens=fim.llama_prompt_ids(llm, template, fim_prefix,
                                                              fim_suffix))
    else:
        prefix = args.answer_prefix.encode("utf-8").decode("unicode_escape")
        res = gen.generate(llm, gen.format_prompt(prompt, args.template, answer_prefix=prefix),
                           store, max_tokens=args.max_tokens, steer_tokens=args.steer_tokens,
                           temperature=args.temperature, seed=args.seed, on_token=progress)
    if tty:
        sys.stderr.write("\r\033[K")
    sys.stdout.write(res.text)
    if not res.text.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(res.text)
    end = ("ended" if not res.steered else "ended after steering") if res.ended else "incomplete"
    line = (f"cfgmask: {len(res.tokens)} tokens in {res.seconds:.2f} s "
            f"({res.tokens_per_second:.1f} tokens/s), ")
    line += (f"mask {res.mask_us_per_token:.0f} µs/token, " if store is not None
             else "unconstrained, ")
    line += end
    if args.check != "none":
        name, ok = CHECKS[args.check]
        whole = res.text if fim_prefix is None else fim_prefix + res.text + fim_suffix
        line += f"; {name}: {'ok' if ok(whole) else 'rejected'}"
    print(line, file=sys.stderr)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["plot-reduction"]:
        from .reduction import main as plot_main
        return plot_main(argv[1:])
    p = _Parser(prog="python -m cfgmask")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    g = sub.add_parser("generate", help="constrained generation with a GGUF model")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--grammar", help=".lark file (compiled with the model as tokenizer)")
    src.add_argument("--store", help="a store compiled for the model (cfgmask compile)")
    g.add_argument("--start", help="start rule (default: start)")
    g.add_argument("--save-store", help="write the compiled store here")
    g.add_argument("--model", required=True, help="GGUF model file")
    g.add_argument("--prompt", help="the user's request")
    g.add_argument("--prompt-file", help="read the request from a file")
    g.add_argument("--prefix-file",
                   help="fill-in-the-middle: the text before the cursor (read by the grammar "
                        "and, in the model's FIM template, by the model); the middle is written")
    g.add_argument("--suffix-file",
                   help="fill-in-the-middle: the text after the cursor; the middle ends only "
                        "where it is followed by it")
    g.add_argument("--template", default="chatml", choices=["chatml", "raw"])
    g.add_argument("--answer-prefix", default="",
                   help="text that opens the model's answer, outside the grammar "
                        "(backslash escapes allowed, e.g. '```python\\n')")
    g.add_argument("--max-tokens", type=int, default=256)
    g.add_argument("--steer-tokens", type=int, default=32,
                   help="after the budget, tokens allowed to reach an end")
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--threads", type=int, default=None)
    g.add_argument("--ctx", type=int, default=2048)
    g.add_argument("--no-constrain", action="store_true", help="generate without the grammar")
    g.add_argument("--check", default="none", choices=["none", "python", "sql"],
                   help="report whether CPython / SQLite accepts the output")
    g.add_argument("-o", "--output", help="also write the text to this file")
    g.add_argument("--quiet", action="store_true", help="no progress line")
    s = sub.add_parser("serve", help="an OpenAI-compatible server, a grammar per request")
    from .serve import add_arguments
    add_arguments(s)
    args = p.parse_args(argv)
    if args.command == "serve":
        from .serve import serve
        try:
            return serve(args)
        except (Error, OSError) as e:
            print(f"cfgmask: {' '.join(str(e).split())}", file=sys.stderr)
            return 2
    if args.command == "generate" and not args.no_constrain and not (args.grammar or args.store):
        p.error("give --grammar FILE or --store FILE (or --no-constrain)")
    try:
        return _generate(args)
    except (Error, OSError) as e:
        print(f"cfgmask: {' '.join(str(e).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
