#!/usr/bin/env bash
# Headless Neovim (Debian 12: apt-get install neovim, 0.7) as a real LSP client of `firstfault lsp`, set up
# exactly as docs/editors.md tells users: the Lua block between the nvim-snippet markers becomes the init.lua
# of a private config, `firstfault` on PATH is the binary under test, and a copy of a real corpus log is
# opened by name, as a user would. Nothing here starts the server: when the documented setup does not attach
# (no filetype for *.log on 0.7, say), the client script fails. Usage: nvim_test.sh BIN TESTS_DIR.
set -euo pipefail
bin=$1 tests=$2
here=$(cd "$(dirname "$0")" && pwd)
doc=${FF_EDITORS_DOC:-$tests/../docs/editors.md}  # another copy of the page, to try a changed snippet
if ! command -v nvim >/dev/null; then echo "nvim_test: nvim is missing (scripts/install-deps.sh installs neovim)" >&2; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/config/nvim" "$tmp/bin"
# The fenced lua block between the markers, without the fences.
awk '/<!-- nvim-snippet:start -->/ { on = 1; next } /<!-- nvim-snippet:end -->/ { on = 0 }
     on && /^```/ { next } on { print }' "$doc" > "$tmp/config/nvim/init.lua"
if [ ! -s "$tmp/config/nvim/init.lua" ]; then echo "nvim_test: no nvim-snippet block in $doc" >&2; exit 1; fi
ln -s "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" "$tmp/bin/firstfault"
cp "$tests/corpus/gh-funasr-2006/logs/pasted.log" "$tmp/pasted.log"
cp "$tests/corpus/gh-funasr-2006/logs/pasted.log" "$tmp/second.log"
# A private home: no user config but the snippet, no shada or swap files leak in or out (the compiled-database
# cache is kept).
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$HOME/.cache}
cd "$tmp"
HOME=$tmp XDG_CONFIG_HOME=$tmp/config XDG_DATA_HOME=$tmp/data XDG_STATE_HOME=$tmp/state PATH=$tmp/bin:$PATH \
  FF_SECOND_LOG=$tmp/second.log timeout 600 nvim --headless -i NONE -n "$tmp/pasted.log" -c "luafile $here/nvim_client.lua"
