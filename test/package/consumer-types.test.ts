// kvflash's published types, compiled as a consumer compiles them: a strict TypeScript project
// that installs nothing but kvflash (no @types/node of its own, `types: []`), importing the main
// entry, kvflash/ops, kvflash/testing and kvflash/gpu. The .d.ts files use Node's types (node:http servers,
// NodeJS.ProcessEnv) and the WebGPU ones; the package declares @types/node and @webgpu/types as
// dependencies and its entry points reference them, so this compiles. Before, it failed with
// "Cannot find module 'node:http'".
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const TSC = join(ROOT, "node_modules", "typescript", "bin", "tsc");

/** Compiles `main` as a strict consumer with `types: []` and skipLibCheck off, kvflash linked into its node_modules. */
function compileConsumer(main: string[]): void {
  const dir = mkdtempSync(join(tmpdir(), "kvflash-consumer-"));
  try {
    mkdirSync(join(dir, "node_modules"));
    symlinkSync(ROOT, join(dir, "node_modules", "kvflash"), "dir");
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { strict: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022", noEmit: true, types: [], skipLibCheck: false }, files: ["main.ts"] }),
    );
    writeFileSync(join(dir, "main.ts"), main.join("\n"));
    const r = spawnSync(process.execPath, [TSC, "-p", dir], { encoding: "utf8" });
    assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a strict consumer without @types/node type-checks against kvflash's .d.ts", () => {
  compileConsumer([
    `import { LLM, serve, type ChatResult, type RunningServer } from "kvflash";`,
    `import { createRuntime, flashAttention } from "kvflash/ops";`,
    `import { writeTinyModel } from "kvflash/testing";`,
    `const chat = async (llm: LLM): Promise<string> => ((await llm.chat([{ role: "user", content: "Hi" }])) satisfies ChatResult).text;`,
    `const running: RunningServer = await serve({ port: 0 });`,
    `const rt = await createRuntime({ threads: 1 });`,
    `const port: number = running.server.http.listening ? 1 : 0;`,
    `export { rt, port, writeTinyModel, chat, flashAttention };`,
  ]);
});

// kvflash/gpu's .d.ts use the WebGPU types, which its entry's reference brings in (@webgpu/types, a dependency).
test("a strict consumer of kvflash/gpu type-checks against its .d.ts", () => {
  compileConsumer([
    `import { GpuDevice, gpuFlashAttention, parseDeviceKind } from "kvflash/gpu";`,
    `const gpu: GpuDevice | null = await GpuDevice.open({ device: parseDeviceKind("auto") === "auto" ? "auto" : "webgpu" });`,
    `const device: GPUDevice | undefined = gpu?.device;`,
    `export { device, gpuFlashAttention };`,
  ]);
});

test("the types the .d.ts reference are dependencies of the package, not only dev dependencies", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  for (const name of ["@types/node", "@webgpu/types"]) assert.ok(pkg.dependencies[name], `dependencies declare ${name}`);
});
