// The load progress bar as a terminal shows it: every redraw clears to the
// end of the line, so a line that shrinks (a slower rate, a smaller unit)
// leaves no characters of the longer one behind; off a TTY, plain log lines.
import assert from "node:assert/strict";
import { test } from "node:test";
import { LoadProgress } from "../../src/sources/progress.js";

/** The visible text of a one-line terminal after `chunks`: \r returns the cursor, ESC[K erases to the end, \n ends a line. */
function terminal(chunks: readonly string[]): string[] {
  const lines: string[] = [];
  let line: string[] = [];
  let col = 0;
  const text = chunks.join("");
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\r") col = 0;
    else if (c === "\n") {
      lines.push(line.join(""));
      line = [];
      col = 0;
    } else if (text.startsWith("\x1b[K", i)) {
      line.length = col;
      i += 2;
    } else {
      line[col++] = c;
    }
  }
  if (line.length > 0) lines.push(line.join(""));
  return lines;
}

test("a TTY redraw that gets shorter leaves nothing of the longer line", async () => {
  const chunks: string[] = [];
  const p = new LoadProgress(3 * 2 ** 30, { stream: { isTTY: true, write: (s: string) => chunks.push(s) }, intervalMs: 0 });
  p.add(2 ** 30 - 1); // "1024.00 MiB / 3.00 GiB  <a fast rate>"
  const long = chunks.at(-1)!.slice(1, -3);
  await new Promise((r) => setTimeout(r, 30));
  p.add(1); // "1.00 GiB / 3.00 GiB  <a slower rate>": shorter
  const short = chunks.at(-1)!.slice(1, -3);
  assert.ok(short.length < long.length, `${JSON.stringify(short)} should be shorter than ${JSON.stringify(long)}`);
  assert.deepEqual(terminal(chunks), [short]);
  p.add(2 * 2 ** 30);
  p.finish();
  const last = chunks.at(-1)!;
  assert.match(last, /^\r.*\x1b\[K\n$/);
  assert.deepEqual(terminal(chunks), [last.slice(1, -4)]);
  assert.match(last, /loading weights \[#{20}\] 100%  3\.00 GiB \/ 3\.00 GiB  [\d.]+ \S+\/s/);
});

test("off a TTY, when asked for: a plain line per 10 %, as kvflash serve logs", () => {
  const chunks: string[] = [];
  const p = new LoadProgress(1000, { stream: { isTTY: false, write: (s: string) => chunks.push(s) }, enabled: true, label: "loading weights" });
  for (let i = 0; i < 20; i++) p.add(50);
  p.finish();
  assert.equal(chunks.length, 11);
  assert.match(chunks[0]!, /^loading weights 5% \(50 B of 1000 B, [\d.]+ \S+\/s\)\n$/);
  assert.match(chunks[5]!, /^loading weights 50% \(500 B of 1000 B, /);
  assert.match(chunks[10]!, /^loading weights 100% \(1000 B of 1000 B, /);
  assert.ok(chunks.every((c) => !c.includes("\r") && !c.includes("\x1b")));
});

test("onUpdate hears every add and the finish, bar or no bar, and the bar is not drawn when disabled", () => {
  const written: string[] = [];
  const seen: [number, number][] = [];
  const p = new LoadProgress(100, { enabled: false, stream: { write: (c: string) => written.push(c), isTTY: true }, onUpdate: (done, total) => seen.push([done, total]) });
  p.add(30);
  p.add(70);
  p.finish();
  p.finish();
  assert.deepEqual(seen, [[30, 100], [100, 100], [100, 100]]);
  assert.deepEqual(written, []);
});
