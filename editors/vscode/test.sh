#!/usr/bin/env bash
# The VS Code extension's tests, as ctest runs them: test.sh [BIN]
#   compiles the TypeScript, runs the unit tests (with BIN, also a real `firstfault diagnose -` through
#   run.ts; without it that test is skipped), packages the extension with vsce into a temporary
#   directory and checks the package's file list. Needs node_modules (scripts/install-deps.sh runs
#   `npm ci` here); uses no network.
set -euo pipefail
bin="${1:-}"
# A relative BIN is taken from the caller's directory (a bare name is looked up on PATH).
if [ -n "$bin" ] && [ "${bin#*/}" != "$bin" ] && [ -e "$bin" ]; then bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"; fi
cd "$(dirname "$0")"

if [ ! -d node_modules/vscode-languageclient ] || [ ! -x node_modules/.bin/vsce ] || [ ! -x node_modules/.bin/tsc ]; then
  echo "editors/vscode/test.sh: node_modules is missing or incomplete; scripts/install-deps.sh runs 'npm ci' in editors/vscode (or run it there yourself)" >&2
  exit 1
fi

npm run --silent compile

FF_BIN="$bin" node --test test/

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
vsix="$tmp/firstfault.vsix"
# Offline: no prompts (stdin closed), no version bump, no link rewriting that could need a git remote.
npx --no-install vsce package --no-update-package-json --no-git-tag-version --no-rewrite-relative-links \
  --out "$vsix" </dev/null >"$tmp/package.log" 2>&1 || { cat "$tmp/package.log" >&2; echo "test.sh: vsce package failed" >&2; exit 1; }
[ -s "$vsix" ] || { echo "test.sh: vsce made no $vsix" >&2; exit 1; }

# The file list from the archive itself (python's zipfile: no unzip needed).
python3 - "$vsix" >"$tmp/files" <<'PY'
import sys, zipfile
for name in zipfile.ZipFile(sys.argv[1]).namelist():
    print(name)
PY
echo "test.sh: $(wc -l <"$tmp/files") files in the package"
fail=0
for want in extension/out/extension.js extension/package.json extension/node_modules/vscode-languageclient/package.json \
            extension/readme.md extension/LICENSE.txt; do
  if ! grep -qxF "$want" "$tmp/files"; then echo "test.sh: the package lacks $want" >&2; fail=1; fi
done
for unwanted in '^extension/src/' '^extension/test/' '^extension/tsconfig\.json$' '^extension/test\.sh$' \
                '^extension/node_modules/(typescript|@vscode/vsce|@types)/'; do
  if grep -qE "$unwanted" "$tmp/files"; then echo "test.sh: the package holds files matching $unwanted" >&2; fail=1; fi
done
cat "$tmp/files"
if [ "$fail" -ne 0 ]; then exit 1; fi

# The packaged main module loads, with a stand-in for the `vscode` module, from the package's own files
# alone: a dependency file that .vscodeignore left out would fail here, not in the user's editor.
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$vsix" "$tmp/unpacked"
node - "$tmp/unpacked/extension" <<'JS'
'use strict';
const Module = require('module');
const path = require('path');
const stub = () => new Proxy(function () {}, {
  get: (_t, p) => (p === 'then' ? undefined : p === Symbol.toPrimitive ? () => '' : stub()),
  apply: () => stub(),
  construct: () => stub(),
});
const load = Module._load;
Module._load = function (request, parent, isMain) {
  return request === 'vscode' ? stub() : load.call(this, request, parent, isMain);
};
const root = path.resolve(process.argv[2]);
const ext = require(path.join(root, require(path.join(root, 'package.json')).main));
if (typeof ext.activate !== 'function' || typeof ext.deactivate !== 'function') {
  console.error('test.sh: the packaged extension exports no activate/deactivate');
  process.exit(1);
}
const outside = Object.keys(require.cache).filter((f) => !f.startsWith(root + path.sep));
if (outside.length > 0) {
  console.error('test.sh: modules loaded from outside the package:\n' + outside.join('\n'));
  process.exit(1);
}
console.log(`test.sh: the packaged extension loads (${Object.keys(require.cache).length} modules, all from the package)`);
JS
echo "test.sh: package ok"
