/**
 * A tokenizer worker thread (TokenizerPool starts it): builds its own
 * Tokenizer from the model directory's tokenizer.json and answers encode
 * requests, so a long prompt is tokenized here and never on the HTTP thread.
 *
 *   in:  { id, text, addSpecialTokens, stopAfter }
 *   out: { id, ids: Int32Array } | { id, error }
 */
import { parentPort, workerData } from "node:worker_threads";
import { Tokenizer } from "./tokenizer.js";

export interface EncodeJob {
  id: number;
  text: string;
  addSpecialTokens: boolean;
  /** EncodeOptions.stopAfter, or null for the whole encoding. */
  stopAfter: number | null;
}

export type EncodeResult = { id: number; ids: Int32Array } | { id: number; error: string };

const port = parentPort;
if (port === null) throw new Error("tokenizer-worker.js must run in a worker thread (TokenizerPool starts it)");
const tokenizer = Tokenizer.fromDir((workerData as { dir: string }).dir);

port.on("message", (job: EncodeJob) => {
  let result: EncodeResult;
  try {
    const ids = Int32Array.from(tokenizer.encode(job.text, { addSpecialTokens: job.addSpecialTokens, ...(job.stopAfter === null ? {} : { stopAfter: job.stopAfter }) }));
    result = { id: job.id, ids };
    port.postMessage(result, [ids.buffer]);
  } catch (e) {
    result = { id: job.id, error: e instanceof Error ? e.message : String(e) };
    port.postMessage(result);
  }
});
