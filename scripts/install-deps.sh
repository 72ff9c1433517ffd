#!/usr/bin/env bash
# Installs the Debian 12 packages firstfault needs to build and test. Idempotent: a package that is
# already installed is not fetched again, so a second run costs one dpkg query.
set -euo pipefail
# --bench-faults: also the packages the fault matrix of real runs needs (bench/faults/README.md): PyTorch
# (CPU, gloo), Open MPI's mpirun and tqdm. Only that target asks for them; `make test` needs no torch.
bench_faults=0
for a in "$@"; do
  case "$a" in
    --bench-faults) bench_faults=1 ;;
    *) echo "usage: $0 [--bench-faults]" >&2; exit 2 ;;
  esac
done
pkgs=(
  build-essential cmake ninja-build pkg-config python3 python3-jsonschema gzip zstd xz-utils bzip2 zip time
  libvectorscan-dev libre2-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  zlib1g-dev libzstd-dev libarchive-dev libgtest-dev libgmock-dev
  clang libclang-rt-14-dev libsqlite3-dev libcpp-httplib-dev libssl-dev curl prometheus
  chromium nodejs npm neovim libpq-dev postgresql prometheus-alertmanager libsystemd-dev systemd-journal-remote slurm-wlm munge
)
if [ "$bench_faults" = 1 ]; then pkgs+=(python3-torch openmpi-bin python3-tqdm); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The browser tests' driver (playwright-core) comes from tests/browser/package-lock.json; it drives Debian's
# /usr/bin/chromium and downloads no browser. The VS Code extension's client library, compiler and
# packager (vsce) come from editors/vscode/package-lock.json.
npm_deps() {
  local d root
  root="$(cd "$(dirname "$0")/.." && pwd)"
  d="$root/tests/browser"
  if [ ! -d "$d/node_modules/playwright-core" ]; then
    echo "install-deps: npm ci in tests/browser" >&2
    (cd "$d" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
  d="$root/editors/vscode"
  if [ ! -d "$d/node_modules/vscode-languageclient" ]; then
    echo "install-deps: npm ci in editors/vscode" >&2
    (cd "$d" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
}
# node and npm may come from elsewhere than Debian (NodeSource): a working `npm` is enough.
if command -v npm >/dev/null 2>&1; then
  kept=()
  for p in "${missing[@]}"; do [ "$p" = nodejs ] || [ "$p" = npm ] || kept+=("$p"); done
  missing=("${kept[@]}")
fi
if [ ${#missing[@]} -eq 0 ]; then
  npm_deps
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_deps
