// A separate process that watches a server the way other clients see it:
// polls GET /health every 5 ms and reads a long completion stream, and when
// its stdin closes prints the longest gaps (ms) between two /health answers
// and between two stream chunks as JSON. Its own process, so nothing the
// test process does (building and sending a 4 MiB body) shows up as a gap.
//   node gap-meter.js URL MODEL
// `node --test dist/test/` also runs this file, with no arguments: then it has nothing to watch.
if (process.argv.length < 4) process.exit(0);
const [url, model] = process.argv.slice(2) as [string, string];
let stop = false;
const ready: Promise<void>[] = [];

async function pollHealth(): Promise<number> {
  let last = performance.now();
  let worst = 0;
  while (!stop) {
    const res = await fetch(`${url}/health`);
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`/health answered ${res.status}`);
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
    await new Promise((r) => setTimeout(r, 5));
  }
  return worst;
}

async function readStream(started: () => void): Promise<number> {
  const controller = new AbortController();
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: "stream on", max_tokens: 30000, ignore_eos: true, stream: true }),
    signal: controller.signal,
  });
  const reader = res.body!.getReader();
  await reader.read();
  started();
  let last = performance.now();
  let worst = 0;
  while (!stop) {
    const r = await reader.read();
    if (r.done) throw new Error("the stream ended before the test did");
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }
  controller.abort();
  return worst;
}

let streamStarted!: () => void;
ready.push(new Promise((r) => (streamStarted = r)));
const results = Promise.all([pollHealth(), readStream(streamStarted)]);
await Promise.all(ready);
process.stdout.write("started\n");
process.stdin.resume();
process.stdin.on("end", () => (stop = true));
const [health, stream] = await results;
process.stdout.write(`${JSON.stringify({ health, stream })}\n`);
process.exit(0);
