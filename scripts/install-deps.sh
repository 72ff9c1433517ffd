#!/usr/bin/env bash
# Installs the Debian 12 packages firstfault needs to build and test. Idempotent: a package that is
# already installed is not fetched again, so a second run costs one dpkg query.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config python3 python3-jsonschema gzip zstd xz-utils bzip2 zip time
  libvectorscan-dev libre2-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  zlib1g-dev libzstd-dev libarchive-dev libgtest-dev libgmock-dev
  clang libclang-rt-14-dev libsqlite3-dev libcpp-httplib-dev libssl-dev curl prometheus
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
