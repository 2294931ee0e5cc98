"""Reference oracle: does Lark (parser='lalr', lexer='contextual', plus
PythonIndenter when asked) accept each text in full?

usage: lark_accepts.py GRAMMAR START INDENTER(python|none) < texts.jsonl > verdicts
Each input line is a JSON string; each output line is 1 or 0.
"""
import json
import sys

from lark import Lark
from lark.indenter import PythonIndenter


def main():
    grammar, start, indenter = sys.argv[1], sys.argv[2], sys.argv[3]
    kwargs = dict(parser="lalr", lexer="contextual", start=start)
    if indenter == "python":
        kwargs["postlex"] = PythonIndenter()
    parser = Lark.open(grammar, **kwargs)
    out = []
    for line in sys.stdin:
        text = json.loads(line)
        try:
            parser.parse(text)
            out.append("1")
        except Exception:
            out.append("0")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
