// bench/llamacpp-harness.ts: the llama.cpp peer limited to one CPU backend variant
// ($KVFLASH_LLAMACPP_CPU_BACKEND, withCpuBackend) and the llama.cpp rows' label
// (llamaCppLabel), with no llama.cpp: a folder of stand-in library files. The real
// thing is measured by `npm run bench -- gguf` and `serve` (BENCHMARKS.md "gguf":
// x64 without AVX-VNNI on an AVX-VNNI CPU), whose log names the features the
// loaded backend was built for.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { llamaCppLabel, withCpuBackend } from "../../bench/llamacpp-harness.js";
import { ArgumentError } from "../../src/errors.js";

/** A libDir as node-llama-cpp ships it (two CPU variants beside the other libraries), and a cache folder, in a fresh temporary folder. */
function standIn(): { libDir: string; cache: string; root: string } {
  const root = mkdtempSync(join(tmpdir(), "kvflash-cpu-backend-"));
  const libDir = join(root, "lib");
  mkdirSync(libDir);
  for (const f of ["libggml-cpu-haswell.so", "libggml-cpu-zen4.so", "libggml-base.so", "libllama.v0.5.0.so"]) writeFileSync(join(libDir, f), "");
  return { libDir, cache: join(root, "cache"), root };
}

test("withCpuBackend: the backends folder holds the named variant alone, linked to libDir's; the version names it", () => {
  const { libDir, cache, root } = standIn();
  try {
    const h = withCpuBackend({ binary: "/x/bench", libDir, version: "3.22.1" }, "haswell", cache);
    assert.equal(h.libDir, libDir, "the binary still links against libDir");
    assert.equal(h.version, "3.22.1, ggml-cpu haswell");
    assert.deepEqual(readdirSync(h.backendDir!), ["libggml-cpu-haswell.so"]);
    assert.equal(readlinkSync(join(h.backendDir!, "libggml-cpu-haswell.so")), join(libDir, "libggml-cpu-haswell.so"));
    // Again (a second bench run): the same folder, the link replaced, no error.
    assert.deepEqual(withCpuBackend({ binary: "/x/bench", libDir, version: "3.22.1" }, "haswell", cache), h);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("withCpuBackend: a variant libDir lacks is an error naming the variable, the value and the variants there", () => {
  const { libDir, cache, root } = standIn();
  try {
    assert.throws(
      () => withCpuBackend({ binary: "/x/bench", libDir, version: "3.22.1" }, "skylake", cache),
      (e: unknown) => e instanceof ArgumentError && /KVFLASH_LLAMACPP_CPU_BACKEND/.test(e.message) && /"skylake"/.test(e.message) && /haswell, zen4/.test(e.message),
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("llamaCppLabel: the dot features of the loaded CPU backend, in a fixed order; none from a harness that reports none", () => {
  const zen4 = "SSE3 SSSE3 AVX AVX2 F16C FMA BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16 LLAMAFILE REPACK";
  assert.equal(llamaCppLabel({ version: "3.22.1" }, { cpuFeatures: zen4, gpu: "", flashAttn: "auto" }), "native (node-llama-cpp 3.22.1, AVX2 AVX512 AVX512_VNNI, flash_attn auto)");
  assert.equal(llamaCppLabel({ version: "3.22.1, ggml-cpu haswell" }, { cpuFeatures: "SSE3 AVX AVX2 FMA", gpu: "", flashAttn: "auto" }), "native (node-llama-cpp 3.22.1, ggml-cpu haswell, AVX2, flash_attn auto)");
  assert.equal(llamaCppLabel({ version: "3.22.1" }, { cpuFeatures: "", gpu: "", flashAttn: "enabled" }), "native (node-llama-cpp 3.22.1, flash_attn enabled)");
});
