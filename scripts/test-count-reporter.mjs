/**
 * A node:test reporter that writes one JSON line per finished test, so
 * scripts/run-tests.mjs can count tests per file the same way on Node 20, 22
 * and 24. Suites (describe) are not counted; a file that declares no tests
 * shows up as one test named by its path on every version, as node reports it.
 *
 *   {"file": "/abs/dist/test/x.test.js", "name": "…", "outcome": "pass" | "fail" | "skip"}
 */
export default async function* countReporter(source) {
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const data = event.data;
    if (data.details?.type === "suite") continue;
    const outcome = event.type === "test:fail" ? "fail" : data.skip || data.todo ? "skip" : "pass";
    yield `${JSON.stringify({ file: data.file ?? "", name: data.name, outcome })}\n`;
  }
}
