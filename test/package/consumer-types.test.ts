// kvflash's published types, compiled as a consumer compiles them: a strict TypeScript project
// that installs nothing but kvflash (no @types/node of its own, `types: []`), importing the main
// entry and kvflash/testing. The .d.ts files use Node's types (node:http servers,
// NodeJS.ProcessEnv); the package declares @types/node as a dependency and its entry points
// reference it, so this compiles. Before, it failed with "Cannot find module 'node:http'".
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const TSC = join(ROOT, "node_modules", "typescript", "bin", "tsc");

test("a strict consumer without @types/node type-checks against kvflash's .d.ts", () => {
  const dir = mkdtempSync(join(tmpdir(), "kvflash-consumer-"));
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
        `import { serve, createRuntime, type RunningServer } from "kvflash";`,
        `import { writeTinyModel } from "kvflash/testing";`,
        `const running: RunningServer = await serve({ port: 0 });`,
        `const rt = await createRuntime({ threads: 1 });`,
        `const port: number = running.server.http.listening ? 1 : 0;`,
        `export { rt, port, writeTinyModel };`,
      ].join("\n"),
    );
    const r = spawnSync(process.execPath, [TSC, "-p", dir], { encoding: "utf8" });
    assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("@types/node is a dependency of the package, not only a dev dependency", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  assert.ok(pkg.dependencies["@types/node"], "dependencies declare @types/node");
});
