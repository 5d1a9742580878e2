/**
 * A tokenizer worker thread (TokenizerPool starts it): builds its own
 * Tokenizer from the model source (a directory's tokenizer.json or a GGUF's
 * metadata, model/source-tokenizer.ts) and answers encode
 * jobs, so a long prompt is tokenized here and never on the HTTP thread.
 * It also parses big JSON request bodies (json-bytes.ts), the HTTP thread's
 * other work that grows with a request's size, and counts their prompt text
 * (prompt-text.ts): a body whose text cannot fit the context comes back as
 * that count alone, so a 15 MB string is never copied back; a body that
 * breaks a shape bound (request-shape.ts: 10⁶ logit_bias entries, 10⁶
 * messages) comes back as the bound it breaks, never as the value.
 *
 *   in:  { id, kind: "encode", text, addSpecialTokens, stopAfter }
 *      | { id, kind: "json", segments, maxDepth, maxPromptChars, shape }
 *      | { id, kind: "decode", ids: Int32Array }
 *      | { id, kind: "chat", chat: ChatPromptJob, addSpecialTokens, stopAfter }   (render, then encode)
 *      | { id, kind: "pair", a, b }   (Tokenizer.encodePair: a cross-encoder's input)
 *   out: { id, ids: Int32Array } | { id, ids, typeIds: Int32Array } | { id, text } | { id, value } | { id, longPrompt } | { id, shape } | { id, error, json, param }
 */
import { parentPort, workerData } from "node:worker_threads";
import { JsonBytesError, parseJsonBytes } from "../json-bytes.js";
import { type LongPromptText, findLongPromptText } from "../prompt-text.js";
import { type ShapeBounds, type ShapeViolation, findShapeViolation } from "../request-shape.js";
import { type ChatPromptJob, ChatPromptError, chatPromptText } from "./chat-prompt.js";
import { readSourceTokenizer } from "../model/source-tokenizer.js";
import type { ModelSource } from "../sources/source.js";

/** What the pool starts a worker with. */
export interface WorkerData {
  /** The model whose tokenizer to build, by its kind: tokenizer.json of a directory, or a GGUF's metadata. */
  source: ModelSource;
  /** config.json's architecture: picks the fallback chat template of a model that has none, as the HTTP thread's tokenizer does (chat prompts render here). */
  architecture?: string;
}

export type WorkerJob =
  | {
      id: number;
      kind: "encode";
      text: string;
      addSpecialTokens: boolean;
      /** EncodeOptions.stopAfter, or null for the whole encoding. */
      stopAfter: number | null;
    }
  | {
      id: number;
      kind: "json";
      /** The body's bytes, in order (views on SharedArrayBuffers the HTTP thread filled as they arrived). */
      segments: Uint8Array[];
      maxDepth: number;
      /** A prompt text longer than this is answered with its count (findLongPromptText), or null for no limit. */
      maxPromptChars: number | null;
      /** The shape bounds to check (findShapeViolation), or null for none. */
      shape: ShapeBounds | null;
    }
  | {
      id: number;
      kind: "chat";
      chat: ChatPromptJob;
      addSpecialTokens: boolean;
      stopAfter: number | null;
    }
  | {
      id: number;
      kind: "pair";
      a: string;
      b: string;
    }
  | {
      id: number;
      kind: "decode";
      /** Token ids, each in [0, vocabSize) (Tokenizer.decode checks). */
      ids: Int32Array;
    };

/** `json`: the error is a JsonBytesError (what is wrong with the body). */
export type WorkerResult =
  | { id: -1; ready: true }
  | { id: number; ids: Int32Array }
  | { id: number; ids: Int32Array; typeIds: Int32Array }
  | { id: number; text: string }
  | { id: number; value: unknown }
  | { id: number; longPrompt: LongPromptText }
  | { id: number; shape: ShapeViolation }
  /** `param`: the request field a chat prompt failed on (ChatPromptError). */
  | { id: number; error: string; json: boolean; param?: string };

function joinSegments(segments: readonly Uint8Array[]): Uint8Array {
  if (segments.length === 1) return segments[0]!;
  const bytes = new Uint8Array(segments.reduce((n, s) => n + s.length, 0));
  let at = 0;
  for (const s of segments) {
    bytes.set(s, at);
    at += s.length;
  }
  return bytes;
}

const port = parentPort;
if (port === null) throw new Error("tokenizer-worker.js must run in a worker thread (TokenizerPool starts it)");
const tokenizer = readSourceTokenizer((workerData as WorkerData).source, (workerData as WorkerData).architecture);
port.postMessage({ id: -1, ready: true } satisfies WorkerResult); // the pool's job time bound starts now, not while the tokenizer loads

port.on("message", (job: WorkerJob) => {
  try {
    if (job.kind === "json") {
      const value = parseJsonBytes(joinSegments(job.segments), job.maxDepth);
      const shape = job.shape === null ? null : findShapeViolation(value, job.shape);
      const longPrompt = job.maxPromptChars === null ? null : findLongPromptText(value, job.maxPromptChars);
      port.postMessage((shape !== null ? { id: job.id, shape } : longPrompt !== null ? { id: job.id, longPrompt } : { id: job.id, value }) satisfies WorkerResult);
      return;
    }
    if (job.kind === "decode") {
      port.postMessage({ id: job.id, text: tokenizer.decode(Array.from(job.ids)) } satisfies WorkerResult);
      return;
    }
    if (job.kind === "pair") {
      const { ids, typeIds } = tokenizer.encodePair(job.a, job.b);
      const out = { id: job.id, ids: Int32Array.from(ids), typeIds: Int32Array.from(typeIds) };
      port.postMessage(out satisfies WorkerResult, [out.ids.buffer, out.typeIds.buffer]);
      return;
    }
    const text = job.kind === "chat" ? chatPromptText(tokenizer, job.chat) : job.text;
    const ids = Int32Array.from(tokenizer.encode(text, { addSpecialTokens: job.addSpecialTokens, ...(job.stopAfter === null ? {} : { stopAfter: job.stopAfter }) }));
    port.postMessage({ id: job.id, ids } satisfies WorkerResult, [ids.buffer]);
  } catch (e) {
    const param = e instanceof ChatPromptError ? { param: e.param } : {};
    port.postMessage({ id: job.id, error: e instanceof Error ? e.message : String(e), json: e instanceof JsonBytesError, ...param } satisfies WorkerResult);
  }
});
