/**
 * The grammar rows of suite `stall` (issue #32 items 1 and 6): hostile
 * constraints sent one at a time to a server a gap meter watches — a schema
 * nested 60 objects deep, a 2000-long $ref chain, 120 objects chained by
 * $ref (within the limits: XGrammar traps in the compile sandbox), EBNF
 * nested 5000 deep, 5000 properties, 900 properties (compiles past the
 * budget), a 100k-string enum, 1000 tools with tool_choice required, a
 * schema that admits nothing — and three the engine accepts after a slow
 * compile (60 properties; 60 under new names, new to the server again once
 * the first may have started a host; 200), which show what compiling an
 * accepted grammar again in a grammar host costs the other streams, the
 * constrained one (structured_max_gap_ms) above all: its matcher lives in a
 * host too.
 * Each row: status, time, and the longest and 99th-percentile /health,
 * stream and structured-stream gaps while it ran.
 */
import type { GapMeter } from "../gap-watch.js";
import type { Row } from "../harness.js";

type Post = (url: string, path: string, payload: Buffer) => Promise<{ status: number; bytes: number }>;

const props = (n: number, name = "p") => ({ type: "object", properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`${name}${i}`, { type: "integer" }])) });
function nest(depth: number): object {
  let s: object = { type: "string" };
  for (let i = 0; i < depth; i++) s = { type: "object", properties: { a: s }, required: ["a"] };
  return s;
}
const chain = (n: number, object: boolean) => ({
  $ref: "#/$defs/d0",
  $defs: Object.fromEntries(
    Array.from({ length: n }, (_, i) => [`d${i}`, i + 1 === n ? { type: "string" } : object ? { type: "object", properties: { a: { $ref: `#/$defs/d${i + 1}` } } } : { $ref: `#/$defs/d${i + 1}` }]),
  ),
});

/** The attacks: name → [path, body (the model name filled in)]. */
function attacks(model: string): [string, string, object][] {
  const chat = (extra: object) => ({ model, messages: [{ role: "user", content: "JSON please" }], max_tokens: 4, ...extra });
  const comp = (extra: object) => ({ model, prompt: "x", max_tokens: 4, ...extra });
  const schema = (s: unknown) => chat({ response_format: { type: "json_schema", json_schema: { name: "x", schema: s } } });
  const tools = Array.from({ length: 1000 }, (_, i) => ({ type: "function", function: { name: `f${i}`, parameters: { type: "object", properties: { x: { type: "integer" } } } } }));
  return [
    ["nest-60", "/v1/chat/completions", schema(nest(60))],
    ["ref-chain-2000", "/v1/chat/completions", schema(chain(2000, false))],
    ["ref-objects-120 (sandbox trap)", "/v1/chat/completions", schema(chain(120, true))],
    ["ebnf-nest-5000", "/v1/completions", comp({ guided_grammar: `root ::= ${"(".repeat(5000)}"a"${")".repeat(5000)}` })],
    ["properties-5000", "/v1/completions", comp({ guided_json: props(5000) })],
    ["properties-900 (past budget)", "/v1/completions", comp({ guided_json: props(900) })],
    ["enum-100k", "/v1/completions", comp({ guided_json: { enum: Array.from({ length: 100_000 }, (_, i) => `v${i}`) } })],
    ["tools-1000-required", "/v1/chat/completions", chat({ tools, tool_choice: "required" })],
    ["schema-admits-nothing", "/v1/chat/completions", schema(false)],
    ["properties-60 (accepted)", "/v1/completions", comp({ guided_json: props(60) })],
    ["properties-60, new names (accepted)", "/v1/completions", comp({ guided_json: props(60, "q") })],
    ["properties-200 (accepted)", "/v1/completions", comp({ guided_json: props(200) })],
  ];
}

export async function grammarRows(url: string, model: string, meter: GapMeter, post: Post, log: (line: string) => void, row: (bytes: number, endpoint: string, status: number, ms: number, gaps: Awaited<ReturnType<GapMeter["during"]>>["gaps"]) => Row, keep: (endpoint: string) => boolean): Promise<Row[]> {
  const rows: Row[] = [];
  for (const [name, path, body] of attacks(model)) {
    if (!keep(`grammar: ${name}`)) continue;
    const payload = Buffer.from(JSON.stringify(body));
    const t0 = performance.now();
    const { value, gaps } = await meter.during(() => post(url, path, payload));
    const r = row(payload.length, `grammar: ${name}`, value.status, performance.now() - t0 - 400, gaps);
    log(`  grammar ${name}: ${value.status} in ${r["response_ms"]} ms; longest gap /health ${gaps.health.max_ms} ms, stream ${gaps.stream.max_ms} ms, structured stream ${gaps.structured?.max_ms ?? "-"} ms`);
    rows.push(r);
  }
  return rows;
}
