// kvflash/gpu's published types, compiled as a consumer compiles them (as
// test/package/consumer-types.test.ts does for the main entry): a strict
// project with `types: []` and skipLibCheck off, importing kvflash/gpu. Its
// .d.ts use the WebGPU types, which its entry's reference brings in.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const TSC = join(ROOT, "node_modules", "typescript", "bin", "tsc");

test("a strict consumer of kvflash/gpu type-checks against its .d.ts", () => {
  const dir = mkdtempSync(join(tmpdir(), "kvflash-gpu-consumer-"));
  try {
    mkdirSync(join(dir, "node_modules"));
    symlinkSync(ROOT, join(dir, "node_modules", "kvflash"), "dir");
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { strict: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022", noEmit: true, types: [], skipLibCheck: false }, files: ["main.ts"] }),
    );
    writeFileSync(
      join(dir, "main.ts"),
      [
        `import { GpuDevice, gpuFlashAttention, parseDeviceKind } from "kvflash/gpu";`,
        `const gpu: GpuDevice | null = await GpuDevice.open({ device: parseDeviceKind("auto") === "auto" ? "auto" : "webgpu" });`,
        `const device: GPUDevice | undefined = gpu?.device;`,
        `export { device, gpuFlashAttention };`,
      ].join("\n"),
    );
    const r = spawnSync(process.execPath, [TSC, "-p", dir], { encoding: "utf8" });
    assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
