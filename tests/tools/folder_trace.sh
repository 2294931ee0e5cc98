#!/usr/bin/env bash
# Folder trace of one compile and one decoding step (tests/tools/folder_trace.py
# says what is counted).  Builds SOURCE_ROOT's cfgmask into WORK/build with
# -finstrument-functions (RelWithDebInfo: the line table maps functions to
# folders; a separate build, so release builds carry nothing of it), builds
# the recording hook (folder_trace_hook.cc) as a preloaded library, then runs
#   cfgmask compile GRAMMAR --tokenizer TOKENIZER --threads 1
#   cfgmask sample STORE -n 1 --max-tokens 1       (load, one decoding step)
# and writes WORK/{compile,step}.txt.  Works on older trees too (the layer
# names are this tree's tests/tools/check_layers.py).
#
#   tests/tools/folder_trace.sh SOURCE_ROOT WORK GRAMMAR TOKENIZER [START]
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2 grammar=$3 tok=$4 start=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
py=${CFGMASK_PYTHON:-python3}
mkdir -p "$work"
work=$(cd "$work" && pwd)
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCFGMASK_CUDA=OFF \
  -DPython3_EXECUTABLE="$py" \
  -DCMAKE_CXX_FLAGS="-finstrument-functions -finstrument-functions-exclude-file-list=/usr/" \
  > "$work/configure.log"
cmake --build "$work/build" -j2 --target cfgmask > "$work/build.log"
g++ -O2 -std=c++17 -shared -fPIC -o "$work/folder_trace_hook.so" "$here/folder_trace_hook.cc" -ldl
python3 "$here/folder_trace.py" map "$work/build/cfgmask" "$src" "$work/build" > "$work/folders.map"
run() {
  CFGMASK_FOLDER_MAP="$work/folders.map" CFGMASK_FOLDER_TRACE="$1" \
    LD_PRELOAD="$work/folder_trace_hook.so" "${@:2}"
}
start_args=()
[ -n "$start" ] && start_args=(--start "$start")
run "$work/compile.trace" "$work/build/cfgmask" compile "$grammar" --tokenizer "$tok" \
  "${start_args[@]}" --threads 1 --quiet -o "$work/store.cfgm"
run "$work/step.trace" "$work/build/cfgmask" sample "$work/store.cfgm" -n 1 --max-tokens 1 \
  --seed 1 -o "$work/step.samples" > /dev/null
for k in compile step; do
  python3 "$here/folder_trace.py" report "$work/$k.trace" --binary "$work/build/cfgmask" \
    > "$work/$k.txt"
done
echo "$work/compile.txt $work/step.txt"
