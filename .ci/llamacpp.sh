#!/usr/bin/env bash
# Installs llama.cpp for the GGUF oracle tests (test/model/gguf-oracle.test.ts)
# and `npm run bench -- gguf`: node-llama-cpp and its prebuilt CPU package
# @node-llama-cpp/linux-<arch>, at the version src/testing/llamacpp.ts pins,
# into .ci/cache/llamacpp/node_modules, outside package.json and the lock file.
# Used by .ci/run after `npm ci`, and by `npm run llamacpp:install`.
# `bash .ci/llamacpp.sh vulkan` adds @node-llama-cpp/linux-x64-vulkan (llama.cpp's
# Vulkan build, ~90 MB: the `webgpu` benchmark's peer on a real GPU); CI never does.
#
# Why not a devDependency: node-llama-cpp lists 14 platform packages as
# optionalDependencies, and on linux-x64 npm installs six of them (CUDA, CUDA
# ext, Vulkan, arm64, armv7l: ~640 MB), so every `npm install` of the repo
# would fetch them; `omit=optional` would keep them out, but then the CPU
# package must be a direct devDependency, which fails `npm install` with
# EBADPLATFORM on any other platform. Here:
#   --ignore-scripts   no node-llama-cpp postinstall (it would probe, then try
#                      to download or compile llama.cpp), and no `prepare` of ours;
#   --omit=optional    only the CPU package named below, none of the GPU ones
#                      (it also drops dompurify's optional @types/trusted-types,
#                      which nothing here needs: tsc builds without it);
#   --no-save          package.json and package-lock.json stay as they are
#                      (the next plain `npm install` removes both packages).
set -euo pipefail
cd "$(dirname "$0")/.."
version="$(sed -n 's/^export const LLAMACPP_NPM_VERSION = "\(.*\)";$/\1/p' src/testing/llamacpp.ts)"
[ -n "$version" ] || { echo ".ci/llamacpp.sh: no LLAMACPP_NPM_VERSION in src/testing/llamacpp.ts" >&2; exit 2; }
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) platform=linux-x64 ;;
  Linux-aarch64) platform=linux-arm64 ;;
  *) echo ".ci/llamacpp.sh: llama.cpp's prebuilt CPU package is wired up for Linux x64 and arm64 only, not $(uname -s)-$(uname -m)" >&2; exit 2 ;;
esac
# Into a folder of its own (.ci/cache/llamacpp, ignored by git), not the
# project's node_modules: an unsaved install there would prune the project's
# optional "webgpu" (--omit=optional) and leave extraneous packages beside its
# dependencies. src/testing/llamacpp.ts looks here first.
extra=()
if [ "${1:-}" = vulkan ]; then
  [ "$platform" = linux-x64 ] || { echo ".ci/llamacpp.sh: llama.cpp's Vulkan package is linux-x64 only, not $platform" >&2; exit 2; }
  extra=("@node-llama-cpp/$platform-vulkan@$version")
elif [ -n "${1:-}" ]; then
  echo ".ci/llamacpp.sh: the only argument is \"vulkan\", got \"$1\"" >&2; exit 2
fi
dir=.ci/cache/llamacpp
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{ "name": "kvflash-llamacpp-oracle", "private": true }' > "$dir/package.json"
installed="$(node -p "require('./$dir/node_modules/node-llama-cpp/package.json').version" 2>/dev/null || true)"
if [ "$installed" = "$version" ] && [ -d "$dir/node_modules/@node-llama-cpp/$platform/bins/$platform" ] && { [ ${#extra[@]} -eq 0 ] || [ -d "$dir/node_modules/@node-llama-cpp/$platform-vulkan/bins/$platform-vulkan" ]; }; then
  echo "llama.cpp: node-llama-cpp $version and @node-llama-cpp/$platform already installed in $dir"
  exit 0
fi
(cd "$dir" && npm install --no-save --no-package-lock --ignore-scripts --omit=optional --no-audit --no-fund "node-llama-cpp@$version" "@node-llama-cpp/$platform@$version" "${extra[@]}")
echo "llama.cpp: installed node-llama-cpp $version and @node-llama-cpp/$platform ${extra[*]} in $dir"
