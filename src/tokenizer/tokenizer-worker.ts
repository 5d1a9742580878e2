/**
 * A tokenizer worker thread (TokenizerPool starts it): builds its own
 * Tokenizer from the model directory's tokenizer.json and answers encode
 * jobs, so a long prompt is tokenized here and never on the HTTP thread.
 * It also parses big JSON request bodies (json-bytes.ts), the HTTP thread's
 * other work that grows with a request's size.
 *
 *   in:  { id, kind: "encode", text, addSpecialTokens, stopAfter } | { id, kind: "json", bytes, maxDepth }
 *   out: { id, ids: Int32Array } | { id, value } | { id, error, json }
 */
import { parentPort, workerData } from "node:worker_threads";
import { JsonBytesError, parseJsonBytes } from "../json-bytes.js";
import { Tokenizer } from "./tokenizer.js";

export type WorkerJob =
  | {
      id: number;
      kind: "encode";
      text: string;
      addSpecialTokens: boolean;
      /** EncodeOptions.stopAfter, or null for the whole encoding. */
      stopAfter: number | null;
    }
  | { id: number; kind: "json"; bytes: Uint8Array; maxDepth: number };

/** `json`: the error is a JsonBytesError (what is wrong with the body). */
export type WorkerResult = { id: number; ids: Int32Array } | { id: number; value: unknown } | { id: number; error: string; json: boolean };

const port = parentPort;
if (port === null) throw new Error("tokenizer-worker.js must run in a worker thread (TokenizerPool starts it)");
const tokenizer = Tokenizer.fromDir((workerData as { dir: string }).dir);

port.on("message", (job: WorkerJob) => {
  try {
    if (job.kind === "json") {
      port.postMessage({ id: job.id, value: parseJsonBytes(job.bytes, job.maxDepth) } satisfies WorkerResult);
      return;
    }
    const ids = Int32Array.from(tokenizer.encode(job.text, { addSpecialTokens: job.addSpecialTokens, ...(job.stopAfter === null ? {} : { stopAfter: job.stopAfter }) }));
    port.postMessage({ id: job.id, ids } satisfies WorkerResult, [ids.buffer]);
  } catch (e) {
    port.postMessage({ id: job.id, error: e instanceof Error ? e.message : String(e), json: e instanceof JsonBytesError } satisfies WorkerResult);
  }
});
