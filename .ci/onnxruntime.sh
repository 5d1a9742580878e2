#!/usr/bin/env bash
# Installs onnxruntime-node, the peer of `npm run bench -- embed` (transformers.js's
# Node backend), into .ci/cache/onnxruntime/node_modules, outside package.json and
# the lock file. Used by `npm run onnxruntime:install`; bench/suites/embed.ts looks
# there.
#
# Why not a devDependency: the package is ~290 MB unpacked, which every `npm install`
# of the repo would fetch for one bench row, and its install script downloads CUDA
# libraries from GitHub (unreachable on many machines, and not needed: the CPU
# build ships inside the package). Here:
#   --ignore-scripts   no download of the CUDA execution provider;
#   --no-save          no package.json or lock file is written.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.30.0
dir=.ci/cache/onnxruntime
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{ "name": "kvflash-onnxruntime-peer", "private": true }' > "$dir/package.json"
installed="$(node -p "require('./$dir/node_modules/onnxruntime-node/package.json').version" 2>/dev/null || true)"
if [ "$installed" = "$version" ]; then
  echo "onnxruntime-node $version already installed in $dir"
  exit 0
fi
(cd "$dir" && npm install --no-save --no-package-lock --ignore-scripts --no-audit --no-fund "onnxruntime-node@$version")
echo "onnxruntime-node: installed $version in $dir"
