#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each (default 30), seeded from the test logs and the knowledge
# base. Crashes are written to fuzz/regressions/<target>/ (commit them: tests/unit/fuzz_regress_test.cpp
# replays them). Usage: fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_normalize fuzz_extract fuzz_kb_loader fuzz_pipeline fuzz_mask fuzz_ingest fuzz_lsp fuzz_events)
bdir=${FF_SAN_BUILD:-build-san}  # shared with make test-sanitize (fuzz/configure.sh)
./fuzz/configure.sh
cmake --build "$bdir" -j"$(nproc)" --target firstfault "${targets[@]}" >/dev/null
seeds=$bdir/seeds
if [ ! -d "$seeds" ]; then
  mkdir -p "$seeds"/{normalize,extract,kb_loader,pipeline,mask,ingest}
  i=0
  while IFS= read -r -d '' f; do
    i=$((i + 1))
    head -c 4000 "$f" >"$seeds/pipeline/s$i"
    head -c 2000 "$f" >"$seeds/extract/s$i"
  done < <(find tests/corpus -type f -size +0 -print0)
  grep -h -o "line: '.*'" kb/*/*.yaml | split -l 1 - "$seeds/normalize/l_"
  split -l 4 tests/mask/planted.log "$seeds/mask/p_"
  # ingest seeds: the first byte picks the name fuzz_ingest gives the file (see fuzz_ingest.cpp).
  sample=tests/mask/planted.log
  { printf '\x01'; gzip -c "$sample"; } >"$seeds/ingest/gz"
  { printf '\x02'; zstd -q -c "$sample"; } >"$seeds/ingest/zst"
  { printf '\x03'; xz -c "$sample"; } >"$seeds/ingest/xz"
  { printf '\x04'; bzip2 -c "$sample"; } >"$seeds/ingest/bz2"
  tmpd=$(mktemp -d); cp "$sample" "$tmpd/rank0.log"; gzip -c "$sample" >"$tmpd/rank1.log.gz"
  { printf '\x05'; tar -C "$tmpd" -cf - rank0.log rank1.log.gz; } >"$seeds/ingest/tar"
  { printf '\x06'; tar -C "$tmpd" -czf - rank0.log rank1.log.gz; } >"$seeds/ingest/tgz"
  (cd "$tmpd" && zip -q -X z.zip rank0.log rank1.log.gz) && { printf '\x07'; cat "$tmpd/z.zip"; } >"$seeds/ingest/zip"
  head -c 300000 /dev/zero | tr '\0' '\n' | gzip -c >"$tmpd/bomb.log.gz"
  { printf '\x06'; tar -C "$tmpd" -czf - bomb.log.gz; } >"$seeds/ingest/nested_bomb"
  rm -rf "$tmpd"
  n=0  # no `| head` here: with pipefail, find's SIGPIPE would fail the script
  while IFS= read -r -d '' f; do
    n=$((n + 1)); [ $n -le 60 ] && cp "$f" "$seeds/kb_loader/"
  done < <(find kb -name '*.yaml' -not -path '*/_*' -print0)
fi
if [ ! -d "$seeds/lsp" ]; then  # LSP frames: what an editor sends, and a log as the text
  mkdir -p "$seeds/lsp"
  frame() { printf 'Content-Length: %d\r\n\r\n%s' "${#1}" "$1"; }
  frame '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}' >"$seeds/lsp/init"
  frame '{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":{"uri":"file:///a%20b/r.log","languageId":"log","version":1,"text":"[rank0]: x\r\n"}}}' >"$seeds/lsp/open"
  cp tests/mask/planted.log "$seeds/lsp/log"
fi
if [ ! -d "$seeds/events" ]; then  # events files as scan writes them, decompressed (first byte 1: compress them again)
  mkdir -p "$seeds/events"
  tmpe=$(mktemp -d)
  i=0
  for d in tests/corpus/run2-torchrun-cgroup-oom-rank0/logs tests/corpus/run-c_rank_exception/logs; do
    i=$((i + 1))
    if "$bdir/firstfault" scan --quiet --mask-key fuzz -o "$tmpe/$i.ffev" "$d" 2>/dev/null ||
       build/firstfault scan --quiet --mask-key fuzz -o "$tmpe/$i.ffev" "$d" 2>/dev/null; then
      { printf '\x01'; zstd -q -dc "$tmpe/$i.ffev"; } >"$seeds/events/s$i"
      { printf '\x00'; cat "$tmpe/$i.ffev"; } >"$seeds/events/z$i"
    fi
  done
  rm -rf "$tmpe"
fi
export FIRSTFAULT_CACHE_DIR=off ASAN_OPTIONS=detect_leaks=0
# As many targets at once as there are cores (each fuzzer is one process on one core); each target's output
# goes to $bdir/work/<name>.log and its last lines are printed when it ends. Any target that fails
# (a crash, a leak, a timeout: libFuzzer exits non-zero) fails the run, after the others have finished.
par=$(nproc 2>/dev/null || echo 1)
pids=() names=() failed=0
finish_one() {  # waits for the oldest running target and prints its tail
  local pid=${pids[0]} name=${names[0]}
  if ! wait "$pid"; then failed=1; echo "== fuzz_$name FAILED (artifacts in fuzz/regressions/$name/)"; fi
  echo "== fuzz_$name"; tail -3 "$bdir/work/$name.log"
  pids=("${pids[@]:1}") names=("${names[@]:1}")
}
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  mkdir -p "fuzz/regressions/$name" "$bdir/work/$name"
  echo "== $t for ${secs}s"
  "$bdir/fuzz/$t" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="fuzz/regressions/$name/" "$bdir/work/$name" "$seeds/$name" >"$bdir/work/$name.log" 2>&1 &
  pids+=($!) names+=("$name")
  [ ${#pids[@]} -lt "$par" ] || finish_one
done
while [ ${#pids[@]} -gt 0 ]; do finish_one; done
exit $failed
