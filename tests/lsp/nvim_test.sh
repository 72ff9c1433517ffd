#!/usr/bin/env bash
# Headless Neovim (Debian 12: apt-get install neovim, 0.7) as a real LSP client of `firstfault lsp` on a
# copy of a real corpus log. Usage: nvim_test.sh BIN TESTS_DIR.
set -euo pipefail
bin=$1 tests=$2
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v nvim >/dev/null; then echo "nvim_test: nvim is missing (scripts/install-deps.sh installs neovim)" >&2; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$tests/corpus/gh-funasr-2006/logs/pasted.log" "$tmp/pasted.log"
# A private home: no user config, shada or swap files leak in or out (the compiled-database cache is kept).
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$HOME/.cache}
HOME=$tmp XDG_CONFIG_HOME=$tmp/config XDG_DATA_HOME=$tmp/data XDG_STATE_HOME=$tmp/state FF_BIN=$bin FF_LOG=$tmp/pasted.log \
  timeout 600 nvim --headless --clean -u NONE -i NONE -n -c "luafile $here/nvim_client.lua"
