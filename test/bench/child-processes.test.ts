// bench/child-processes.ts: a child the bench owns dies with the bench when
// the bench is SIGTERMed or SIGINTed, and the bench exits with the signal's
// status. The parent is a small script over the compiled module; the child
// a node process that would otherwise idle forever.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const MODULE = fileURLToPath(new URL("../../bench/child-processes.js", import.meta.url));

const PARENT = `
import { spawn } from "node:child_process";
import { ownChild, ownedChildren } from ${JSON.stringify(MODULE)};
const child = ownChild(spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" }));
console.log(child.pid, ownedChildren());
setInterval(() => {}, 1000);
`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function gone(pid: number, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 20))) if (!alive(pid)) return true;
  return !alive(pid);
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  test(`a ${signal} to the bench ends the children it owns, and the bench exits with 128 + the signal's number`, async () => {
    const parent = spawn(process.execPath, ["--input-type=module", "-e", PARENT], { stdio: ["ignore", "pipe", "inherit"] });
    const [line] = (await once(createInterface({ input: parent.stdout! }), "line")) as [string];
    const [pid, owned] = line.split(" ").map(Number) as [number, number];
    assert.equal(owned, 1);
    assert.ok(alive(pid), "the child runs");
    parent.kill(signal);
    const [code] = (await once(parent, "exit")) as [number | null];
    assert.equal(code, signal === "SIGTERM" ? 143 : 130);
    const ended = await gone(pid, 5000);
    if (!ended) process.kill(pid, "SIGKILL");
    assert.ok(ended, `child ${pid} outlived the bench`);
  });
}
