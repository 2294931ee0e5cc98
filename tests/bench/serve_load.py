"""A bounded load test of `python -m cfgmask serve`, driven by the openai client.

N concurrent clients (threads, each with its own openai.OpenAI) send a fixed
number of chat requests to a server on the loopback interface, all at once
or in turn as each finishes, with and without a grammar.  The run has a time
limit: a request that has not been answered by then is a failure, as is any
error.  Reported per run: concurrency, requests, failures, constrained answers
that sampled into one of the engine's remaining dead ends (they cannot end:
docs/exactness.md), latency p50/p99,
generated tokens per second (all clients together), the server's mean mask
µs per token and steering ms per request (from `usage`), and the server's resident memory before and
after (a warm-up round comes first, so that the stores and the contexts are
loaded before the first reading).

    python tests/bench/serve_load.py --model $CFGMASK_TOK_SMOLLM2 \\
        [--store python=python-smollm2.cfgm] [--grammar python] \\
        [--clients 1,2,4] [--requests 16] [--max-tokens 32] [--parallel 2] [--json OUT]

prints a Markdown table (docs/serving.md has one).  tests/py/test_serve.py
runs it at a small size and asserts 0 failures, every constrained output in
the grammar's language, and no memory growth; CFGMASK_FULL=1 runs it larger.
ServerProcess starts a server and stops it (the tests use it too).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional

PROMPTS = {
    "python": ["Write a Python function that returns the n-th Fibonacci number.",
               "Write a Python function that reverses a string.",
               "Write a Python class Stack with push and pop methods.",
               "Write a Python function that checks whether a number is prime."],
    "sql": ["Write an SQL query that lists the users older than 30.",
            "Write an SQL query that counts the orders per customer.",
            "Write an SQL statement that creates a table of books."],
    "json": ["Describe a cat as a JSON object.", "Give a JSON list of three colours."],
}
_READY = re.compile(r"serving .* on http://([^/\s]+)/v1")


class ServerProcess:
    """`python -m cfgmask serve ARGS --port 0` as a child process: started,
    waited for until it prints where it listens, and stopped (SIGTERM, then
    SIGKILL).  Its stderr is kept in `log`."""

    def __init__(self, args: List[str], timeout: float = 300.0, env: Optional[Dict] = None):
        self.cmd = [sys.executable, "-m", "cfgmask", "serve", "--host", "127.0.0.1",
                    "--port", "0", *args]
        self.timeout = timeout
        self.env = env
        self.log: List[str] = []
        self.proc = None
        self.url = None

    def __enter__(self) -> "ServerProcess":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env=self.env)
        ready = threading.Event()

        def drain():
            for line in self.proc.stderr:
                self.log.append(line.rstrip("\n"))
                m = _READY.search(line)
                if m and not ready.is_set():
                    self.url = f"http://{m.group(1)}/v1"
                    ready.set()
            ready.set()  # the process ended
        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(self.timeout) or self.url is None:
            self.stop()
            raise RuntimeError("the server did not start:\n" + "\n".join(self.log[-20:]))

    def stop(self) -> Optional[int]:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_kib(self) -> int:
        """The server's resident memory (VmRSS), KiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")


def xargs(grammar: Optional[str]) -> Dict:
    return {"vllm_xargs": {"cfgmask_grammar": grammar}} if grammar else {}


def run_load(url: str, clients: int, requests: int, max_tokens: int, grammar: Optional[str],
             time_limit: float, prompts: Optional[List[str]] = None, seed: int = 0) -> Dict:
    """`requests` chat requests from `clients` threads; returns the figures
    and every answer (text, finish reason) for checking."""
    import openai
    prompts = prompts or PROMPTS.get(grammar or "python", PROMPTS["python"])
    deadline = time.monotonic() + time_limit
    local = threading.local()

    def one(i: int) -> Dict:
        left = deadline - time.monotonic()
        if left <= 0:
            return {"error": "time limit reached before the request was sent"}
        if not hasattr(local, "client"):
            local.client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        t0 = time.perf_counter()
        try:
            r = local.client.chat.completions.create(
                model="served", messages=[{"role": "user", "content": prompts[i % len(prompts)]}],
                max_tokens=max_tokens, temperature=0.7, seed=seed + i, timeout=left,
                extra_body=xargs(grammar))
        except Exception as e:  # noqa: BLE001 - every error is a failed request
            return {"error": f"{type(e).__name__}: {e}"}
        extra = r.usage.model_extra or {}
        return {"seconds": time.perf_counter() - t0, "text": r.choices[0].message.content,
                "finish_reason": r.choices[0].finish_reason,
                "tokens": r.usage.completion_tokens,
                "mask_us_per_token": extra.get("mask_us_per_token"),
                "steer_ms": extra.get("steer_ms"), "dead_end": extra.get("dead_end"),
                "model_us_per_token": extra.get("model_us_per_token")}

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        answers = list(pool.map(one, range(requests)))
    wall = time.perf_counter() - t0
    ok = [a for a in answers if "error" not in a]
    lat = sorted(a["seconds"] for a in ok)
    tokens = sum(a["tokens"] for a in ok)

    def pct(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")

    def mean(key):
        vals = [a[key] for a in ok if a.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    return {"grammar": grammar, "clients": clients, "requests": requests,
            "failures": len(answers) - len(ok), "dead_ends": sum(bool(a.get("dead_end")) for a in ok),
            "p50_s": pct(0.50), "p99_s": pct(0.99),
            "tokens": tokens, "seconds": wall, "tokens_per_s": tokens / wall if wall else 0.0,
            "mask_us_per_token": mean("mask_us_per_token"), "steer_ms": mean("steer_ms"),
            "model_us_per_token": mean("model_us_per_token"), "answers": answers}


def table(rows: List[Dict]) -> str:
    out = ["| grammar | clients | requests | failures | dead ends | p50 s | p99 s | tokens/s | "
           "mask µs/token | of it steering, ms/request | model µs/token | RSS before MiB | "
           "RSS after MiB |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mask = "" if r["mask_us_per_token"] is None else f"{r['mask_us_per_token']:.0f}"
        steer = "" if r["steer_ms"] is None else f"{r['steer_ms']:.1f}"
        out.append(f"| {r['grammar'] or 'none'} | {r['clients']} | {r['requests']} | "
                   f"{r['failures']} | {r['dead_ends'] if r['grammar'] else ''} | {r['p50_s']:.2f} | {r['p99_s']:.2f} | "
                   f"{r['tokens_per_s']:.1f} | {mask} | {steer} | {r['model_us_per_token']:.0f} | "
                   f"{r['rss_before_kib'] / 1024:.0f} | {r['rss_after_kib'] / 1024:.0f} |")
    return "\n".join(out)


def measure(server: ServerProcess, grammars: List[Optional[str]], clients: List[int],
            requests: int, max_tokens: int, time_limit: float) -> List[Dict]:
    """A warm-up round per grammar, then each (grammar, clients) run, with
    the server's RSS read before and after each."""
    for g in grammars:
        warm = run_load(server.url, max(clients), max(clients), max_tokens, g, time_limit)
        if warm["failures"]:
            raise RuntimeError(f"warm-up failed: {warm['answers']}")
    rows = []
    for g in grammars:
        for n in clients:
            before = server.rss_kib()
            row = run_load(server.url, n, requests, max_tokens, g, time_limit)
            row["rss_before_kib"], row["rss_after_kib"] = before, server.rss_kib()
            rows.append(row)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--store", action="append", default=[], metavar="NAME=PATH")
    p.add_argument("--grammar", action="append", default=None,
                   help="grammar names to load with (default: python); 'none' for none")
    p.add_argument("--clients", default="1,2,4")
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--time-limit", type=float, default=600.0)
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--json", help="write the rows here")
    a = p.parse_args(argv)
    grammars = [None if g == "none" else g for g in (a.grammar or ["none", "python"])]
    args = ["--model", a.model, "--parallel", str(a.parallel)]
    for s in a.store:
        args += ["--store", s]
    if a.cache_dir:
        args += ["--cache-dir", a.cache_dir]
    with ServerProcess(args) as server:
        rows = measure(server, grammars, [int(c) for c in a.clients.split(",")], a.requests,
                       a.max_tokens, a.time_limit)
    print(table(rows))
    print(f"(load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores, "
          f"--parallel {a.parallel}, max_tokens {a.max_tokens})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{k: v for k, v in r.items() if k != "answers"} for r in rows], f, indent=1)
    return 0 if all(r["failures"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
