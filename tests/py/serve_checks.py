"""Client-side checks of an OpenAI-compatible server constrained by cfgmask,
written against the `openai` package only, so that they run against
`python -m cfgmask serve` (tests/py/test_serve.py) and against
`vllm serve ... --logits-processors cfgmask.vllm:CfgmaskLogitsProcessor`
(tests/py/test_serve_vllm.py) alike: a request names its grammar by store
path in ``vllm_xargs`` (cfgmask_store), the fields both servers read.

Every constrained output is checked to be in the grammar's language (Lark,
as the engine's contract defines it: LALR, contextual lexer, PythonIndenter
for Python) and, for Python and SQL, accepted by CPython's compile() and by
SQLite's parser.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from cfgmask import generate as gen

ROOT = Path(__file__).resolve().parents[2]
GRAMMARS = ROOT / "grammar" / "lark"


@lru_cache(maxsize=None)
def _lark(lang: str):
    from lark import Lark
    text = (GRAMMARS / f"{lang}.lark").read_text(encoding="utf-8")
    if lang == "python":
        from lark.indenter import PythonIndenter
        return Lark(text, parser="lalr", lexer="contextual", postlex=PythonIndenter(),
                    start="file_input")
    return Lark(text, parser="lalr", lexer="contextual", start="start")


def in_language(lang: str, text: str) -> Tuple[bool, str]:
    """(True, '') if `text` is in the shipped grammar's language and the real
    parser accepts it; else (False, why)."""
    from lark.exceptions import LarkError
    try:
        _lark(lang).parse(text)
    except LarkError as e:
        return False, f"Lark refuses it: {' '.join(str(e).split())[:200]}"
    if lang == "python" and not gen.python_compiles(text):
        return False, "CPython's compile() refuses it"
    if lang == "sql" and not gen.sqlite_parses(text):
        return False, "SQLite's parser refuses it"
    if lang == "json":
        try:
            json.loads(text)
        except ValueError as e:
            return False, f"json.loads refuses it: {e}"
    return True, ""


def assert_in_language(lang: str, text: str, what: str = "output") -> None:
    ok, why = in_language(lang, text)
    assert ok, f"{what} not in the {lang} language ({why}): {text!r}"


def check_answer(lang: str, text: str, finish: Optional[str], cut_ok, what: str) -> None:
    """An answer that ended is in the language.  `cut_ok`: None (every answer
    must end: cfgmask's server steers to an end), or the Store of the
    request, for a server that does not steer (vLLM): an answer cut by
    max_tokens must then be a prefix of the language."""
    if finish == "length" and cut_ok is not None:
        import cfgmask
        assert cfgmask.GrammarMatcher(cut_ok).accept_string(text), \
            f"{what} cut by max_tokens is no prefix of the {lang} language: {text!r}"
        return
    assert finish == "stop", f"{what} did not end ({finish}): {text!r}"
    assert_in_language(lang, text, what)


def xargs(store: str, suffix: Optional[str] = None) -> Dict:
    args = {"cfgmask_store": store}
    if suffix is not None:
        args["cfgmask_suffix"] = suffix
    return {"vllm_xargs": args}


CHAT_PROMPTS = {
    "python": ["Write a Python function that returns the factorial of n.",
               "Write a Python class Point with x and y and a method that adds two points."],
    "sql": ["Write an SQL query that lists the names of the employees older than 40."],
    "json": ["Describe a book (title, author, year) as a JSON object."],
}


def chat(client, model: str, store: str, lang: str, max_tokens: int, stream: bool = False,
         cut_ok=None) -> List[str]:
    """Chat requests under `store`; each answer must end (finish_reason
    "stop") in the language (check_answer).  Returns the texts."""
    texts = []
    for prompt in CHAT_PROMPTS[lang]:
        messages = [{"role": "user", "content": prompt}]
        if stream:
            parts, finish = [], None
            for chunk in client.chat.completions.create(
                    model=model, messages=messages, max_tokens=max_tokens, temperature=0,
                    stream=True, extra_body=xargs(store)):
                for choice in chunk.choices:
                    parts.append(choice.delta.content or "")
                    finish = choice.finish_reason or finish
            text = "".join(parts)
            assert len(parts) > 1, "the answer came in one chunk: not streamed"
        else:
            r = client.chat.completions.create(model=model, messages=messages,
                                               max_tokens=max_tokens, temperature=0,
                                               extra_body=xargs(store))
            text, finish = r.choices[0].message.content, r.choices[0].finish_reason
        check_answer(lang, text, finish, cut_ok, f"the answer to {prompt!r}")
        texts.append(text)
    return texts


def completion(client, model: str, store: str, lang: str, prompt: str, max_tokens: int,
               stream: bool = False, cut_ok=None) -> str:
    """A completion under `store` (the prompt goes to the model only)."""
    if stream:
        parts, finish = [], None
        for chunk in client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens,
                                               temperature=0, stream=True,
                                               extra_body=xargs(store)):
            for choice in chunk.choices:
                parts.append(choice.text or "")
                finish = choice.finish_reason or finish
        text = "".join(parts)
        assert len(parts) > 1, "the completion came in one chunk: not streamed"
    else:
        r = client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens,
                                      temperature=0, extra_body=xargs(store))
        text, finish = r.choices[0].text, r.choices[0].finish_reason
    check_answer(lang, text, finish, cut_ok, "the completion")
    return text


# Text before and after a cursor in Python code: (prefix, suffix).
FIM_CASES = [
    ("def add(a, b):\n    ", "\n\nprint(add(1, 2))\n"),
    ("import math\n\n\ndef area(r):\n    return ", "\n\n\ndef perimeter(r):\n    return 2 * math.pi * r\n"),
    ("def total(xs):\n    s = 0\n    for x in xs:\n", "    return s\n"),
]


def fim_by_cfgmask_suffix(client, model: str, store: str, max_tokens: int, cut_ok=None
                          ) -> List[str]:
    """The text after the cursor as vLLM's processor takes it
    (vllm_xargs.cfgmask_suffix): the grammar sees the generated text and the
    suffix, the model the prompt.  The middle followed by the suffix must be
    Python (a file that starts at the cursor)."""
    out = []
    for _, suffix in FIM_CASES:
        prompt = ("# A Python module.\n# The code that comes before the following lines:\n"
                  + "".join("# " + line + "\n" for line in suffix.splitlines()) + "\n")
        r = client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens,
                                      temperature=0, extra_body=xargs(store, suffix))
        text, finish = r.choices[0].text, r.choices[0].finish_reason
        if finish == "length" and cut_ok is not None:
            check_answer("python", text, finish, cut_ok, "the middle")
        else:
            check_answer("python", text + suffix, finish, None, "middle + suffix")
        out.append(text)
    return out
