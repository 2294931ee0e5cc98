#!/usr/bin/env python3
"""Markdown tables from a GPU kit run (tests/gpu/run.sh's $OUT folder), for
docs/gpu.md and the README:

    tests/gpu/report.py OUT_DIR

Prints: the machine and the steps, the kernel tests and the processor tests
(counts), the engine's per-step costs (cuda_batch_bench: CPU path against
GPU path, every core and one core) and the processor's (processor_batch_bench:
the whole HFLogitsProcessor call, its CPU share, the device masking beside
xgrammar's kernel).  Not a test.
"""
from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def us(r, key, stat="mean_us"):
    v = r.get(key, {}).get(stat)
    return "–" if v is None else f"{v:,.0f}"


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: report.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    s = json.loads((out / "summary.json").read_text())
    print(f"Machine: {s['gpu']}; {s['cpus']} CPU cores; Python {s['python']}, torch "
          f"{s.get('torch', '?')}; {' '.join(s.get('nvcc', []))}; run {s['when']}, load "
          f"{s['load'][0]:.1f}.\n")
    print("| step | seconds | exit |\n|---|---:|---:|")
    for st in s["steps"]:
        print(f"| {st['step']} | {st['seconds']:.1f} | {st['exit']} |")
    total = sum(st["seconds"] for st in s["steps"])
    print(f"| **all** | **{total:.0f}** | |\n")
    print("| test binary | tests | failed | skipped |\n|---|---:|---:|---:|")
    for name, k in s["kernel_tests"].items():
        print(f"| {name} | {k['tests']} | {k['failed']} | {k['skipped']} |")
    hf = out / "hf.xml"
    if hf.exists():
        suite = ET.parse(hf).getroot().find("testsuite")
        print(f"| test_hf_device.py | {suite.get('tests')} | "
              f"{int(suite.get('failures')) + int(suite.get('errors'))} | {suite.get('skipped')} |")
    san = out / "sanitizer.txt"
    if san.exists():
        lines = [ln.strip("= ").strip() for ln in san.read_text().splitlines()
                 if "SUMMARY" in ln]
        print(f"\ncompute-sanitizer (SanitizerSmallCase): {'; '.join(lines)}.")
    eng = out / "bench_engine.json"
    if eng.exists():
        j = json.loads(eng.read_text())
        print("\nEngine, per step (µs, mean; p99 in brackets), cuda_batch_bench:\n")
        print("| vocab | B | CPU threads | CPU fill | + H2D | + mask fp32 | CPU path | parser | "
              "GPU OR | GPU path | CPU mask fp32 | CPU-fill share |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in j["runs"]:
            if not r.get("gpu"):
                continue
            print(f"| {r['store']} | {r['batch']} | {r['threads']} | {us(r, 'cpu_fill')} "
                  f"({us(r, 'cpu_fill', 'p99_us')}) | {us(r, 'h2d')} | {us(r, 'apply_f32')} | "
                  f"{r['cpu_path_step_us']:,.0f} | {us(r, 'parser')} | {us(r, 'gpu_or')} "
                  f"({us(r, 'gpu_or', 'p99_us')}) | {r['gpu_path_step_us']:,.0f} | "
                  f"{us(r, 'cpu_apply')} | {r['cpu_fill_share']:.2f} |")
        bad = j.get("gpu_or_mismatched_steps", 0)
        print(f"\nGPU OR-reduction against the CPU fill: {bad} mismatched steps.")
    proc = out / "bench_processor.json"
    if proc.exists():
        j = json.loads(proc.read_text())
        print(f"\nHFLogitsProcessor on {j['device']} float32 logits, per step (µs, mean; p99 "
              f"in brackets), processor_batch_bench, xgrammar {j.get('xgrammar')}:\n")
        print("| vocab | B | whole call | engine accept + fill | CPU share | H2D + cfgmask "
              "kernel | H2D + torch ops | xgrammar kernel alone | H2D alone |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in j["runs"]:
            engine = r["accept"]["mean_us"] + r["fill"]["mean_us"]
            print(f"| {r['store']} | {r['batch']} | {us(r, 'call')} ({us(r, 'call', 'p99_us')}) | "
                  f"{engine:,.0f} | {r['cpu_share']:.2f} | {us(r, 'device_mask')} | "
                  f"{us(r, 'device_mask_torch')} | {us(r, 'xgrammar')} | {us(r, 'h2d')} |")
        bad = sum(r.get("mismatched_steps", 0) for r in j["runs"])
        print(f"\nDevice masks (processor, its two device paths, xgrammar's kernel): {bad} "
              "mismatched steps.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
