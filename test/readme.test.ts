// README.md's code blocks stay true: every JavaScript block is marked either
// <!-- runnable --> (a complete program) or <!-- fragment --> (and then says
// "fragment" in its first line, so a reader knows), and every runnable block
// runs: JavaScript as an .mjs file inside the package (so `import … from
// "kvflash"` is the package itself), shell with `npx kvflash` meaning this
// checkout's CLI. Each must exit 0. Needs bash for the shell blocks.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, test } from "node:test";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const MAIN = fileURLToPath(new URL("../src/cli/main.js", import.meta.url));
const run = promisify(execFile);

interface Block {
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  mark: "runnable" | "fragment" | null;
  code: string;
}

/** The fenced blocks of a markdown text, with the <!-- mark --> on the line before the fence, if any. */
export function codeBlocks(markdown: string): Block[] {
  const lines = markdown.split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith("```"));
    assert.ok(end > i, `README.md:${i + 1}: the code block is never closed`);
    const mark = /^<!-- (runnable|fragment) -->$/.exec(lines[i - 1] ?? "");
    blocks.push({ line: i + 1, lang: open[1]!, mark: mark ? (mark[1] as "runnable" | "fragment") : null, code: lines.slice(i + 1, end).join("\n") });
    i = end;
  }
  return blocks;
}

const blocks = codeBlocks(readFileSync(join(ROOT, "README.md"), "utf8"));
// Inside the package, so that "kvflash" resolves to this checkout (a package may import itself by name).
const dir = mkdtempSync(join(ROOT, "dist", "readme-examples-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("every JavaScript block is marked runnable or fragment, and a fragment says so", () => {
  const js = blocks.filter((b) => b.lang === "js");
  assert.ok(js.length >= 8, `found only ${js.length} JavaScript blocks`);
  for (const b of js) {
    assert.ok(b.mark !== null, `README.md:${b.line}: mark the block <!-- runnable --> or <!-- fragment -->`);
    if (b.mark === "fragment") assert.match(b.code.split("\n")[0]!, /^\/\/ A fragment\b/, `README.md:${b.line}: a fragment's first line says it is one`);
  }
  for (const b of blocks.filter((x) => x.mark === "runnable")) assert.ok(b.lang === "js" || b.lang === "sh", `README.md:${b.line}: runnable ${b.lang}`);
});

for (const block of blocks.filter((b) => b.mark === "runnable")) {
  test(`README.md:${block.line} (${block.lang}) runs`, { timeout: 120_000 }, async () => {
    const env = { ...process.env, KVFLASH_THREADS: "2" };
    let out: { stdout: string; stderr: string };
    try {
      if (block.lang === "js") {
        const file = join(dir, `line-${block.line}.mjs`);
        writeFileSync(file, block.code);
        out = await run(process.execPath, [file], { cwd: ROOT, env, timeout: 110_000 });
      } else {
        const script = `set -euo pipefail\nnpx() { "$@"; }\nkvflash() { "${process.execPath}" "${MAIN}" "$@"; }\n${block.code}\n`;
        out = await run("bash", ["-c", script], { cwd: ROOT, env, timeout: 110_000 });
      }
    } catch (e) {
      const err = e as { code?: number; stdout?: string; stderr?: string };
      assert.fail(`README.md:${block.line} exited with ${err.code}:\n${block.code}\n--- stdout\n${err.stdout}\n--- stderr\n${err.stderr}`);
    }
    assert.ok(out.stdout.length > 0, `README.md:${block.line} printed nothing`);
  });
}
