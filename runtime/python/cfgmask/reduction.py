"""The figure of `cfgmask reduction` (the seed's figure 6 for any grammar), drawn from its JSON.

    cfgmask reduction GRAMMAR --tokenizer TOK --json > r.json
    python -m cfgmask plot-reduction r.json -o reduction.svg

(`cfgmask reduction ... --plot OUT.svg` runs the second line itself.)  Left:
store rows after each streamlining step, as cfgmask keys its rows (lexer
state x item sequence) and as the seed keys them (lexer state x terminal
sequence), log scale.  Right: incremental-parser checks and ORed rows per
decoding step, without and with streamlining, at terminal boundaries and over
all steps (mean, with the p99 as a tick).
"""
from __future__ import annotations

import json
from typing import Union


def plot(report: Union[dict, str], out: str, title: str = "") -> None:
    """Draws `report` (the JSON object, or a path to it) into `out` (.svg, .png or .pdf)."""
    if isinstance(report, str):
        with open(report, encoding="utf-8") as f:
            report = json.load(f)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = report["steps"]
    names = [s["step"] for s in steps]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    xs = range(len(steps))
    w = 0.38
    ax.bar([x - w / 2 for x in xs], [s["rows"] for s in steps], w, label="rows (cfgmask keys)")
    ax.bar([x + w / 2 for x in xs], [s["seed_keys"] for s in steps], w,
           label="lexer state x terminal sequence (seed keys)")
    for x, s in zip(xs, steps):
        ax.annotate(f"{s['reduction']:.2f}x", (x - w / 2, s["rows"]), ha="center", va="bottom",
                    fontsize=7)
    ax.set_xticks(list(xs), names, rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("store rows")
    ax.legend(fontsize=7)
    ax.set_title("rows after each step", fontsize=9)

    groups = [("checks\nat boundary", "parser_checks_boundary"), ("checks\nall steps", "parser_checks"),
              ("rows ORed\nat boundary", "rows_ored_boundary"), ("rows ORed\nall steps", "rows_ored")]
    for i, (store, label) in enumerate([("no_streamline", "no streamlining"),
                                        ("streamlined", "streamlined")]):
        means = [report[store][k]["mean"] for _, k in groups]
        p99 = [report[store][k]["p99"] for _, k in groups]
        pos = [g + (i - 0.5) * w for g in range(len(groups))]
        bx.bar(pos, means, w, label=label)
        bx.scatter(pos, p99, marker="_", s=120, color="black", zorder=3,
                   label="p99" if i == 1 else None)
    bx.set_xticks(range(len(groups)), [g for g, _ in groups], fontsize=8)
    bx.set_yscale("log")
    bx.set_ylabel("per decoding step (mean; p99 tick)")
    bx.legend(fontsize=7)
    bx.set_title(report["workload"]["what"], fontsize=8)
    tok = report["tokenizer"]
    fig.suptitle(title or f"{report['grammar']} ({report['start']}) x {tok['name']} "
                 f"({tok['vocab_size']:,} tokens)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv=None) -> int:
    import argparse
    import sys
    p = argparse.ArgumentParser(prog="python -m cfgmask plot-reduction")
    p.add_argument("report", help="JSON of `cfgmask reduction --json` ('-': stdin)")
    p.add_argument("-o", "--output", required=True, help="the figure (.svg, .png, .pdf)")
    p.add_argument("--title", default="")
    a = p.parse_args(argv)
    try:
        report = json.load(sys.stdin) if a.report == "-" else a.report
        plot(report, a.output, a.title)
    except (OSError, ValueError, KeyError) as e:
        print(f"cfgmask: {a.report}: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    return 0
