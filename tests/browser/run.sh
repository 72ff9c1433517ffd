#!/usr/bin/env bash
# Browser tests of `firstfault serve` in Debian's headless Chromium, driven by playwright-core (installed
# from tests/browser/package-lock.json by scripts/install-deps.sh; no browser download). Usage:
# run.sh BIN TESTS_DIR ARTIFACTS_DIR. Screenshots are kept in ARTIFACTS_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x /usr/bin/chromium ]; then echo "browser: /usr/bin/chromium is missing (scripts/install-deps.sh installs it)" >&2; exit 1; fi
if [ ! -d "$here/node_modules/playwright-core" ]; then
  echo "browser: tests/browser/node_modules is missing (scripts/install-deps.sh runs npm ci there)" >&2; exit 1
fi
mkdir -p "$3"
cd "$here"
FF_BIN=$1 FF_TESTS=$2 FF_ARTIFACTS=$3 FF_REPO=$(cd "$2/.." && pwd) node --test --test-reporter=spec serve.test.mjs
