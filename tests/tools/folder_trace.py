#!/usr/bin/env python3
"""Folder trace of a cfgmask run: which engine folders control passes through.

The recording is done by tests/tools/folder_trace_hook.cc in a binary built
with -finstrument-functions (tests/tools/folder_trace.sh builds both and runs
one compile and one decoding step); this script writes the map the hook reads
and reads what the hook wrote.

  folder_trace.py map BINARY SOURCE_ROOT [BUILD_DIR] > MAP
      every function of BINARY (its line table: nm --line-numbers) mapped
      to the engine folder of the file defining it, as check_layers.py names
      layers (grammar/base, runtime/compile, ...).  The ground floor
      (grammar/base, and grammar/{status,check,utf8}.h of trees older than
      it) and code outside the engine are left out: they never open a
      stretch.  Files generated into BUILD_DIR/FOLDER count as FOLDER.
  folder_trace.py report TRACE [--depth N] [--binary BINARY]
      per thread with engine code: the tree of stretches (a stretch is a run
      of frames in one folder; its children are the folders it calls into,
      consecutive calls into one folder shown once with their count), then
        folders entered    -- every folder with a stretch;
        calls up a floor   -- calls into a folder the caller's folder does not
                              depend on (callbacks: a lower floor calling up);
        returns to a folder left -- a stretch whose calls down (into folders
                              it depends on) go into folder X, then elsewhere,
                              then X again: control came back to a folder it
                              had left (one count per re-entry, by caller);
        path               -- for the stretches near the top (depth <= 2: the
                              command, the driver), their calls down in order,
                              consecutive ones into one folder shown once, and
                              the folders re-entered; with --binary, each
                              step named by the function that opened it.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import DEPENDS, allowed, layer_of  # noqa: E402

GROUND = "grammar/base"
OLD_GROUND = re.compile(r"^grammar/(status|check|utf8)\.h$")


def folder_of(path, roots):
    path = os.path.normpath(path)
    for root, prefix in roots:
        if path.startswith(root + os.sep):
            rel = prefix + os.path.relpath(path, root).replace(os.sep, "/")
            if OLD_GROUND.match(rel):
                return GROUND
            return layer_of(rel)
    return None


def cmd_map(binary, source_root, build_dir=None):
    roots = []
    if build_dir:
        roots.append((os.path.normpath(os.path.abspath(build_dir)), ""))
    roots.append((os.path.normpath(os.path.abspath(source_root)), ""))
    out = subprocess.run(["nm", "--defined-only", "--line-numbers", "-S", binary],
                         check=True, capture_output=True, text=True).stdout
    folders = sorted(f for f in DEPENDS if f != GROUND)
    index = {f: i for i, f in enumerate(folders)}
    lines = [f"F {f}" for f in folders]
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) < 4 or parts[2] not in "tTwW":
            continue
        rest = parts[3]
        tab = rest.rfind("\t")
        if tab < 0:
            continue
        where = rest[tab + 1:].rsplit(":", 1)[0]
        folder = folder_of(where, roots)
        if folder is None or folder == GROUND:
            continue
        lines.append(f"R {parts[0]} {parts[1]} {index[folder]}")
    sys.stdout.write("\n".join(lines) + "\n")


def read_trace(path):
    folders = {}
    threads = []
    with open(path) as f:
        for line in f:
            w = line.split()
            if w[0] == "F":
                folders[int(w[1])] = w[2]
            elif w[0] == "T":
                threads.append((int(w[1]), []))
            elif w[0] == "N":
                _, _i, parent, depth, folder, count, merged = w[:7]
                threads[-1][1].append({"parent": int(parent), "depth": int(depth),
                                       "folder": folders.get(int(folder)), "count": int(count),
                                       "merged": merged == "1", "children": [],
                                       "fn": int(w[7], 16) if len(w) > 7 else 0})
    for _, nodes in threads:
        for i, n in enumerate(nodes):
            if n["parent"] >= 0:
                nodes[n["parent"]]["children"].append(i)
    return threads


def symbols(binary):
    """Sorted (address, demangled name) of BINARY's functions."""
    out = subprocess.run(["nm", "-C", "--defined-only", binary], check=True,
                         capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            syms.append((int(parts[0], 16), parts[2]))
    syms.sort()
    return syms


def name_of(syms, addr):
    import bisect
    i = bisect.bisect_right(syms, (addr, "\U0010ffff")) - 1
    if i < 0:
        return "?"
    name = syms[i][1]
    name = re.sub(r"\(.*", "", name)
    return name.replace("cfgmask::", "")


def report(path, depth, binary=None):
    syms = symbols(binary) if binary else None
    for tid, nodes in read_trace(path):
        if len(nodes) <= 1:
            continue
        print(f"== thread {tid}: {len(nodes)} stretches")

        def show(i, indent):
            n = nodes[i]
            if n["depth"] > depth:
                return
            if i:
                extra = " (children merged by folder past 64)" if n["merged"] else ""
                print(f"{'  ' * indent}{n['folder']}  x{n['count']}{extra}")
            for c in n["children"]:
                show(c, indent + (1 if i else 0))

        show(0, 0)
        entered = sorted({n["folder"] for n in nodes[1:]})
        up = {}
        back = {}
        paths = []
        for i, n in enumerate(nodes):
            here = n["folder"]
            down = []
            named = []
            for c in n["children"]:
                to = nodes[c]["folder"]
                if here is not None and to not in allowed(here):
                    up[(here, to)] = up.get((here, to), 0) + nodes[c]["count"]
                    continue
                if not down or down[-1] != to:
                    down.append(to)
                    named.append(f"{to}({name_of(syms, nodes[c]['fn'])})" if syms else to)
            here = here or "(start)"
            seen = set()
            again = []
            for f in down:
                if f in seen:
                    again.append(f)
                    back[(here, f)] = back.get((here, f), 0) + 1
                seen.add(f)
            if n["depth"] <= 2 and down:
                paths.append((n["depth"], here, named, again))
        print(f"folders entered ({len(entered)}): {', '.join(entered)}")
        print(f"calls up a floor: {sum(up.values())}"
              + "".join(f"\n  {a} -> {b}: {k}" for (a, b), k in sorted(up.items())))
        print(f"returns to a folder left: {sum(back.values())}"
              + "".join(f"\n  {a} back into {b}: {k}" for (a, b), k in sorted(back.items())))
        print("path:")
        for d, here, down, again in paths:
            note = f"   (re-entered: {', '.join(sorted(set(again)))})" if again else ""
            print(f"  {'  ' * d}{here}: {' -> '.join(down)}{note}")


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "map":
        cmd_map(*sys.argv[2:5])
    elif len(sys.argv) >= 3 and sys.argv[1] == "report":
        depth = 99
        if "--depth" in sys.argv:
            depth = int(sys.argv[sys.argv.index("--depth") + 1])
        binary = None
        if "--binary" in sys.argv:
            binary = sys.argv[sys.argv.index("--binary") + 1]
        report(sys.argv[2], depth, binary)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
