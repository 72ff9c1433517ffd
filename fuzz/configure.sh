#!/usr/bin/env bash
# Configures the sanitizer build (default build-san, or $FF_SAN_BUILD): clang, AddressSanitizer +
# UndefinedBehaviorSanitizer, libFuzzer coverage, optimised with debug info. The same tree holds the test
# suite (make test-sanitize runs it) and the fuzz targets (fuzz/run.sh), so `make test` compiles the
# sources twice (release and this), not three times. Unity builds: 8 sources per compiler run.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${FF_SAN_BUILD:-build-san}
if ! command -v clang++ >/dev/null; then
  echo "sanitizer build: needs clang++ (Debian packages clang, libclang-rt-14-dev; scripts/install-deps.sh installs them)" >&2
  exit 2
fi
cmake -S . -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFF_FUZZ=ON \
  -DFF_DEVELOPER_MODE=ON -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 >/dev/null
