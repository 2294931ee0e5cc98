#!/usr/bin/env python3
"""The whole HFLogitsProcessor call per decoding step, on a batch of logits
on the GPU, at serving sizes (the GPU kit's benchmark; docs/gpu.md).

For each store (one per vocabulary) and batch size B, B matchers are
teacher-forced on standard-library modules (``tokenize_forced``: every token
in its step's mask), each from a different module and offset, and the
processor is called once per step with the growing ``input_ids`` and fresh
B x V float32 logits on the device (written before each call, outside the
timing).  Per step it records:

  call         the processor call, device work included (synchronised)
  accept/fill  the engine's share of the call (BatchMatcher.step_times): the
               new tokens accepted and the B bitmasks filled, on the CPU
  device_mask  the processor's device masking alone, from the step's bitmask:
               pinned copy of the int32 words, then cfgmask._cuda's kernel
               (where built) or, as device_mask_torch, torch operations
  xgrammar     ``xgrammar.apply_token_bitmask_inplace`` on the same logits and
               the same bitmask already on the device (its own kernel), when
               the xgrammar wheel is importable
  h2d          the bitmask's copy to the device alone

and checks that the logits the processor leaves are -inf exactly where its
two device paths and xgrammar's kernel put -inf.  cpu_share = (accept + fill) / call is the
number that says whether the engine keeps up with the GPU.

    processor_batch_bench.py --store 152k=PY_QWEN2.cfgm [--store 262k=...]
        [--batches 1,16,64,256] [--steps 48] [--device cuda] [--json OUT]

Not a test; the processor is tested by tests/gpu/test_hf_device.py.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def summary(xs):
    if not xs:
        return {}
    v = np.sort(np.asarray(xs, dtype=np.float64))
    return {"n": int(v.size), "mean_us": float(v.mean()), "p50_us": float(v[v.size // 2]),
            "p99_us": float(v[min(v.size - 1, int(0.99 * v.size))]), "max_us": float(v[-1])}


def forced_streams(cfgmask, store, need, limit=24):
    """Token streams of standard-library modules the store accepts whole, at
    least `need` tokens long."""
    stdlib = Path(os.environ.get("CFGMASK_STDLIB") or sysconfig.get_paths()["stdlib"])
    out = []
    for path in sorted(stdlib.glob("*.py")):
        size = path.stat().st_size
        if not 2000 <= size <= 40000:
            continue
        m = cfgmask.GrammarMatcher(store)
        try:
            toks = m.tokenize_forced(path.read_bytes())
        except cfgmask.Error:
            continue
        if len(toks) >= need:
            out.append(toks)
            if len(out) == limit:
                break
    return out


def run(torch, cfgmask, HFLogitsProcessor, xgr, name, store, batch, steps, warmup, device):
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    total = warmup + steps
    streams = forced_streams(cfgmask, store, total + 64)
    if not streams:
        raise SystemExit(f"processor_batch_bench: no standard-library module is accepted by {name}")
    vocab = store.vocab_size
    matchers, rows = [], []
    for b in range(batch):
        toks = streams[b % len(streams)]
        off = (b * 7) % 64
        m = cfgmask.GrammarMatcher(store)
        for t in toks[:off]:
            assert m.accept_token(t)
        matchers.append(m)
        rows.append([0] + toks[off:off + total])
    ids_all = torch.tensor(rows, dtype=torch.int64, device=device)
    proc = HFLogitsProcessor(matchers=matchers)
    gen = torch.Generator(device=device).manual_seed(0)
    base = torch.randn((batch, vocab), generator=gen, device=device, dtype=torch.float32)
    scores = torch.empty_like(base)
    xscores = torch.empty_like(base)
    t = {k: [] for k in ("call", "accept", "fill", "engine_mask", "device_mask",
                         "device_mask_torch", "xgrammar", "h2d")}
    mismatched = 0
    for k in range(total):
        scores.copy_(base)
        sync()
        t0 = time.perf_counter()
        proc(ids_all[:, :1 + k], scores)
        sync()
        t1 = time.perf_counter()
        accept, fill, mask = proc.batch._batch.step_times
        timed = k >= warmup
        if timed:
            t["call"].append((t1 - t0) * 1e6)
            t["accept"].append(accept / 1e3)
            t["fill"].append(fill / 1e3)
            t["engine_mask"].append(mask / 1e3)
        if device.startswith("cuda"):
            # The device masking alone (the kernel, then torch operations where
            # the kernel is the default), then xgrammar's kernel, on the same bitmask.
            def device_mask():
                again = base.clone()
                sync()
                d0 = time.perf_counter()
                proc._mask_on_device(again)
                sync()
                d1 = time.perf_counter()
                proc._wait_for_copy()
                return (d1 - d0) * 1e6, torch.equal(torch.isneginf(again), torch.isneginf(scores))
            us, same = device_mask()
            mismatched += not same
            if timed:
                t["device_mask"].append(us)
            if proc.use_cuda_kernel:
                proc.use_cuda_kernel = False
                torch_us, same = device_mask()
                proc.use_cuda_kernel = True
                mismatched += not same
                if timed:
                    t["device_mask_torch"].append(torch_us)
            words = torch.from_numpy(proc.bitmask.copy()).pin_memory()
            sync()
            h0 = time.perf_counter()
            dwords = words.to(device, non_blocking=True)
            sync()
            h1 = time.perf_counter()
            if timed:
                t["h2d"].append((h1 - h0) * 1e6)
            if xgr is not None:
                xscores.copy_(base)
                sync()
                x0 = time.perf_counter()
                xgr.apply_token_bitmask_inplace(xscores, dwords)
                sync()
                x1 = time.perf_counter()
                if timed:
                    t["xgrammar"].append((x1 - x0) * 1e6)
                if not torch.equal(torch.isneginf(xscores), torch.isneginf(scores)):
                    mismatched += 1
    r = {"store": name, "vocab": vocab, "batch": batch, "device": device,
         "streams": len(streams), "cuda_kernel": proc.use_cuda_kernel,
         "mismatched_steps": mismatched}
    r.update({k: summary(v) for k, v in t.items() if v})
    engine = np.asarray(t["accept"]) + np.asarray(t["fill"])
    r["cpu_share"] = float(engine.mean() / np.mean(t["call"]))
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", action="append", required=True, help="NAME=FILE.cfgm")
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--device", default="")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    import torch
    import cfgmask
    from cfgmask.processors import HFLogitsProcessor
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        import xgrammar as xgr
    except Exception as e:  # the wheel is optional: the kit carries it when it fits
        print(f"processor_batch_bench: no xgrammar ({type(e).__name__}: {e})", file=sys.stderr)
        xgr = None
    from importlib.metadata import PackageNotFoundError, version
    try:
        xgr_version = version("xgrammar") if xgr is not None else None
    except PackageNotFoundError:
        xgr_version = "?"
    out = {"device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
           "torch": torch.__version__, "xgrammar": xgr_version,
           "cpu_threads": os.cpu_count(), "runs": []}
    mismatched = 0
    for spec in args.store:
        name, _, path = spec.partition("=")
        store = cfgmask.Store.load(path)
        for b in (int(x) for x in args.batches.split(",")):
            r = run(torch, cfgmask, HFLogitsProcessor, xgr, name, store, b, args.steps,
                    args.warmup, device)
            mismatched += r["mismatched_steps"]
            out["runs"].append(r)
            line = (f"{name} B={b}: call mean {r['call']['mean_us']:.0f} µs p99 "
                    f"{r['call']['p99_us']:.0f} | fill {r['fill']['mean_us']:.0f} | cpu share "
                    f"{r['cpu_share']:.2f}")
            if "device_mask" in r:
                line += f" | device mask {r['device_mask']['mean_us']:.0f}"
            if "device_mask_torch" in r:
                line += f" (torch ops {r['device_mask_torch']['mean_us']:.0f})"
            if "xgrammar" in r:
                line += f" | xgrammar {r['xgrammar']['mean_us']:.0f}"
            print(line, file=sys.stderr, flush=True)
    text = json.dumps(out, indent=1)
    if args.json:
        Path(args.json).write_text(text + "\n")
    else:
        print(text)
    if mismatched:
        print(f"processor_batch_bench: the device masks differed (processor, its two device "
              f"paths, xgrammar's kernel) on {mismatched} steps", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
