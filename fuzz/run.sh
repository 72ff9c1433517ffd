#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each (default 30), seeded from the test logs and the knowledge
# base. Crashes are written to fuzz/regressions/<target>/ (commit them: tests/unit/fuzz_regress_test.cpp
# replays them). Usage: fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_normalize fuzz_extract fuzz_kb_loader fuzz_pipeline)
if ! command -v clang++ >/dev/null; then echo "fuzz: needs clang++ (Debian packages clang, libclang-rt-14-dev)"; exit 2; fi
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFF_FUZZ=ON -DFF_DEVELOPER_MODE=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" >/dev/null
seeds=build-fuzz/seeds
if [ ! -d "$seeds" ]; then
  mkdir -p "$seeds"/{normalize,extract,kb_loader,pipeline}
  i=0
  while IFS= read -r -d '' f; do
    i=$((i + 1))
    head -c 4000 "$f" >"$seeds/pipeline/s$i"
    head -c 2000 "$f" >"$seeds/extract/s$i"
  done < <(find tests/corpus -type f -size +0 -print0)
  grep -h -o "line: '.*'" kb/*/*.yaml | split -l 1 - "$seeds/normalize/l_"
  n=0  # no `| head` here: with pipefail, find's SIGPIPE would fail the script
  while IFS= read -r -d '' f; do
    n=$((n + 1)); [ $n -le 60 ] && cp "$f" "$seeds/kb_loader/"
  done < <(find kb -name '*.yaml' -not -path '*/_*' -print0)
fi
export FIRSTFAULT_CACHE_DIR=off ASAN_OPTIONS=detect_leaks=0
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  mkdir -p "fuzz/regressions/$name" "build-fuzz/work/$name"
  echo "== $t for ${secs}s"
  build-fuzz/fuzz/$t -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="fuzz/regressions/$name/" "build-fuzz/work/$name" "$seeds/$name" 2>&1 | tail -3
done
