#!/usr/bin/env bash
# Runs on a lent GPU machine (the `device` tool), in a copy of the working
# tree with .gpu/ and .gl/ carried (tools/gpu-device/pack.sh makes them):
#   1. the Vulkan loader (.gl/*.deb) and Node 24 (.gpu/node.xz) set up; the
#      bundle (build/, dist/, runtime node_modules, the llama.cpp Vulkan
#      harness) unpacked;
#   2. a record of what the machine exposes: nvidia-smi, the Vulkan ICD
#      manifests, Dawn's adapters (tools/gpu-device/adapters.mjs);
#   3. `node dist/bench/run.js webgpu` on the GPU: ceilings, attention,
#      GEMV/GEMM, the Qwen2.5-0.5B-shaped model against the wasm decoder, and
#      llama.cpp's Vulkan backend on the same GGUF file;
#   4. the WebGPU conformance suites (test/gpu) on the GPU instead of SwiftShader;
#   5. `kvflash generate` on the default model, greedy, on the CPU and on the GPU:
#      the same text is expected (e2e.txt).
# Everything goes to $OUT (env.txt, adapters.json, webgpu.json, bench.log,
# gpu-tests.log); each step has its own time limit, and a failed step does not
# stop the next. GPU_RUN_STEPS (default "bench tests e2e") picks steps 3 to 5,
# GPU_TESTS_FILES (default test/gpu) the test files; "e2e" is step 5.
set -u
OUT="${OUT:-/tmp/gpu-out}"
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/run.log") 2>&1
t0=$(date +%s)
stamp() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }

stamp "setup"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
mkdir -p /tmp/kvnode && xz -dc .gpu/node.xz > /tmp/kvnode/node && chmod +x /tmp/kvnode/node
export PATH="/tmp/kvnode:$PATH"
tar -xJf .gpu/bundle.tar.xz
node --version

stamp "record"
{
  echo "## nvidia-smi"; nvidia-smi 2>&1 | head -20
  echo "## cpu"; lscpu 2>&1 | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-400
  echo "## vulkan loader"; ldconfig -p | grep -i vulkan
  for d in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/nvidia/share/vulkan/icd.d /usr/local/share/vulkan/icd.d; do
    echo "## ICDs in $d"; ls -la "$d" 2>&1; for j in "$d"/*.json; do [ -f "$j" ] && { echo "# $j"; cat "$j"; }; done
  done
} > "$OUT/env.txt" 2>&1
grep -A3 "ICDs in" "$OUT/env.txt" | head -30
timeout 60 node tools/gpu-device/adapters.mjs > "$OUT/adapters.json" 2> "$OUT/adapters.err"
nv_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if ! grep -q '"vendor": "nvidia"' "$OUT/adapters.json" && [ -f "$nv_icd" ]; then
  stamp "no NVIDIA adapter by default; retrying with the driver's ICD named (VK_DRIVER_FILES)"
  export VK_DRIVER_FILES="$nv_icd" VK_ICD_FILENAMES="$nv_icd"
  timeout 60 node tools/gpu-device/adapters.mjs > "$OUT/adapters.json" 2>> "$OUT/adapters.err"
fi
node -e 'for (const a of JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))) console.log(JSON.stringify(a.flags), a.error ?? (a.info ? `${a.info.vendor} ${a.info.architecture} ${a.info.device} | ${a.info.description} | fallback ${a.info.isFallbackAdapter} | ${a.features.join(",")} | binding ${a.limits.maxStorageBufferBindingSize} buffer ${a.limits.maxBufferSize}` : "no adapter"))' "$OUT/adapters.json"
head -c 2000 "$OUT/adapters.err"

export KVFLASH_LLAMACPP_VULKAN="$PWD/llamacpp-vulkan" KVFLASH_REQUIRE_WEBGPU=1
steps="${GPU_RUN_STEPS:-bench tests e2e}"
if [[ " $steps " == *" bench "* ]]; then
  stamp "bench webgpu"
  # The wasm baseline (over_cpu) on up to 16 of the machine's cores.
  threads=$(nproc); [ "$threads" -gt 16 ] && threads=16
  timeout "${GPU_BENCH_TIMEOUT:-300}" node dist/bench/run.js webgpu --threads "$threads" --out "$OUT/webgpu.json" > "$OUT/bench.log" 2>&1
  stamp "bench exited $?"
  grep -v "^|" "$OUT/bench.log" | tail -40
fi
if [[ " $steps " == *" tests "* ]]; then
  stamp "test/gpu on the GPU"
  # shellcheck disable=SC2086
  timeout "${GPU_TESTS_TIMEOUT:-120}" node scripts/run-tests.mjs ${GPU_TESTS_FILES:-test/gpu} > "$OUT/gpu-tests.log" 2>&1
  stamp "tests exited $?"
  grep -E "^# (tests|pass|fail|skip)|not ok|failed|test files" "$OUT/gpu-tests.log" | tail -25
fi
if [[ " $steps " == *" e2e "* ]]; then
  stamp "kvflash generate on the CPU and on the GPU"
  for device in cpu webgpu; do
    echo "## --device $device" >> "$OUT/e2e.txt"
    timeout 60 node dist/src/cli/main.js generate --device "$device" --chat --prompt "What is a river?" --max-tokens 32 --temperature 0 >> "$OUT/e2e.txt" 2>&1
    echo "## exit $?" >> "$OUT/e2e.txt"
  done
  grep -v "^$" "$OUT/e2e.txt" | head -20
fi
stamp "done"
[ -f "$OUT/bench.log" ] && grep "^|" "$OUT/bench.log" | cut -c1-400 | head -60
