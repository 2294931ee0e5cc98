"""A real model is never blocked from valid code: SmolLM2-135M-Instruct (the
model of `./setup.sh demo`) answers the prompts of tests/prompts/python.txt
without constraint; every answer whose code CPython compiles is teacher-forced
through the strict grammar's store (scope layer included) with the model's
tokenizer's own encoding, and none may be refused.

  python tests/pycorpus/model_check.py STORE.cfgm OUT_DIR [N]
      (STORE: python.lark compiled with $CFGMASK_TOK_SMOLLM2; N prompts, default
       all 50, 5 when CFGMASK_QUICK=1; answers already in OUT_DIR are reused)

Exit status 1 if any compiling answer is refused.  Needs $CFGMASK_TOK_SMOLLM2
and $CFGMASK_BIN (the cfgmask command), and llama-cpp-python for `generate`.
"""
from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def code_of(answer: str) -> str:
    """The answer's first code block (the answer starts inside ```python)."""
    return answer.split("```")[0]


def compiles(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<answer>", "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError):
        return False


def main() -> int:
    store, out = sys.argv[1], Path(sys.argv[2])
    quick = os.environ.get("CFGMASK_QUICK") == "1" and os.environ.get("CFGMASK_FULL") != "1"
    n = int(sys.argv[3]) if len(sys.argv) > 3 else (5 if quick else 50)
    model = os.environ["CFGMASK_TOK_SMOLLM2"]
    cfgmask = os.environ.get("CFGMASK_BIN", str(ROOT / "build" / "cfgmask"))
    out.mkdir(parents=True, exist_ok=True)
    prompts = (ROOT / "tests" / "prompts" / "python.txt").read_text().splitlines()[:n]
    kept = []
    for i, prompt in enumerate(prompts, 1):
        ans = out / f"ans_{i}.txt"
        if not ans.exists():
            subprocess.run([sys.executable, "-m", "cfgmask", "generate", "--grammar",
                            str(ROOT / "grammar" / "lark" / "python.lark"), "--start", "file_input",
                            "--model", model, "--prompt", prompt, "--answer-prefix", "```python\\n",
                            "--max-tokens", "200", "--no-constrain", "--seed", str(i), "--quiet",
                            "-o", str(ans)], check=True, capture_output=True)
        code = code_of(ans.read_text(encoding="utf-8"))
        if code.strip() and compiles(code):
            p = out / f"code_{i}.py"
            p.write_text(code, encoding="utf-8", newline="")
            kept.append(p)
    if not kept:
        print(f"{n} answers, none compiles")
        return 1
    subprocess.run([sys.executable, str(ROOT / "tests" / "tools" / "canonical_ids.py"), model,
                    *map(str, kept)], check=True)
    r = subprocess.run([cfgmask, "check", store, *map(str, kept), "--segment", "canonical"],
                       capture_output=True, text=True)
    refused = [line for line in r.stdout.splitlines() if ": ok" not in line and "passed" not in line]
    print(f"{n} answers, {len(kept)} compile; teacher-forced with the model's encoding: "
          f"{len(kept) - len(refused)} accepted, {len(refused)} refused")
    for line in refused:
        print("  " + line)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
