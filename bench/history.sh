#!/bin/sh
# Instructions per op and bytes per pending op at several commits, measured
# in one run (the history table of docs/PERFORMANCE.md):
#
#   bench/history.sh OUTDIR COMMIT...
#
# Each commit is checked out in a worktree beside the repository
# (../vf-history-COMMIT), its benchmark binary and static library built
# there; then bench/callgrind.py (this checkout's) counts the instructions
# per empty op of vf-naive and vf-pooled on W1, W2, W5 (median of 3), and
# bench/history_pending.c, linked with that commit's library, measures the
# bytes a pending op with two dependencies holds (1M ops). Results go to
# OUTDIR/COMMIT.{json,txt,pending}; a line per commit is printed.
set -u
[ $# -ge 2 ] || { echo "usage: bench/history.sh OUTDIR COMMIT..." >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$1
shift
mkdir -p "$out"
for c in "$@"; do
  d="$root/../vf-history-$c"
  [ -d "$d" ] || git -C "$root" worktree add -q --detach "$d" "$c" || continue
  # Commits before the bench stopped building the tools need cJSON else.
  grep -q "VF_BUILD_TOOLS OFF" "$d/bench/CMakeLists.txt" ||
    sed -i 's/set(VF_BUILD_EXAMPLES OFF)/set(VF_BUILD_EXAMPLES OFF)\nset(VF_BUILD_TOOLS OFF)/' \
      "$d/bench/CMakeLists.txt"
  # No CUDA: the figures are the CPU engines', and the probe links plainly.
  if ! { cmake -S "$d/bench" -B "$d/build-bench" -DCMAKE_BUILD_TYPE=Release \
           -DVF_WITH_CUDA=OFF >/dev/null 2>&1 &&
         cmake --build "$d/build-bench" --target vfbench-varflow varflow_static >/dev/null 2>&1; }; then
    echo "$c: build failed"
    continue
  fi
  python3 "$here/callgrind.py" --build "$d/build-bench" --engines vf-naive,vf-pooled \
    --workloads W1,W2,W5 --repeat 3 --out "$out/$c.json" > "$out/$c.txt" 2>&1
  cc -O2 -I"$d/include" "$here/history_pending.c" "$d/build-bench/varflow/libvarflow.a" \
    -lpthread -o "$out/pending-$c" 2>"$out/$c.cc.log" &&
    "$out/pending-$c" 1000000 > "$out/$c.pending"
  echo "$c: $(grep -E '^vf-(naive|pooled) ' "$out/$c.txt" | tr -s ' ' | tr '\n' ';') $(cat "$out/$c.pending")"
done
