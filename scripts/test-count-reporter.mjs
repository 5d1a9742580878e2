/**
 * A node:test reporter that writes one JSON line per finished test, so
 * scripts/run-tests.mjs can count tests per file the same way on Node 20, 22
 * and 24. Suites (describe) are not counted; a file that declares no tests
 * shows up as one test named by its path on every version, as node reports it.
 *
 *   {"file": "/abs/dist/test/x.test.js", "name": "…", "outcome": "pass" | "fail" | "skip"}
 *
 * And one line per finished file, with the wall time of its process (node
 * reports each file as a nesting-0 test named by the path it was given:
 * absolute on Node 20, as given on Node 22+; it completes, never passes):
 *
 *   {"file": "/abs/dist/test/x.test.js", "fileMs": 1234.5}
 */
import { resolve } from "node:path";

export default async function* countReporter(source) {
  for await (const event of source) {
    const data = event.data;
    if (event.type === "test:complete" && data.nesting === 0 && data.file && resolve(data.name) === resolve(data.file)) {
      yield `${JSON.stringify({ file: data.file, fileMs: data.details?.duration_ms ?? 0 })}\n`;
      continue;
    }
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    if (data.details?.type === "suite") continue;
    const outcome = event.type === "test:fail" ? "fail" : data.skip || data.todo ? "skip" : "pass";
    yield `${JSON.stringify({ file: data.file ?? "", name: data.name, outcome })}\n`;
  }
}
