/**
 * What the engine thread (grammar-host.ts) and the grammar host's worker
 * (grammar-host-worker.ts) say to each other, and the shared words they
 * read (a worker module cannot be imported for its constants: it runs on load).
 *
 *   → { t: "rows", buf }                          the mask rows (grown by the owner): Int32Array [rows status | rows × W masks]
 *   → { t: "compile", id, key, spec }             compile and keep under `key` (the sandbox compiled it within its budget first)
 *   → { t: "evict", key }                         drop a compiled grammar (its matchers keep their own reference)
 *   → { t: "matcher", mid, key }                  a fresh matcher of a kept grammar
 *   → { t: "rollback", mid, n } / { t: "dispose", mid }
 *   → { t: "fill", seq, accept, mids }            accept = [mid, token, …]; masks of mids[i] into row i, then ctrl[FILL_SEQ] = seq
 *   → { t: "accept", seq, mid, token }            one token, answered in ctrl[ACCEPTED] (1, 0: refused and no change), then ctrl[FILL_SEQ] = seq
 *   ← { t: "compiled", id, ok, message, trapped } ctrl[COMPILES_DONE] += 1 first (loading counts as the first compile)
 *   ← { t: "trapped", message }                   the instance is dead: every later row answers STATUS_TRAPPED
 */
import type { GrammarSpec } from "./grammar-spec.js";
import type { CompileWorkerData } from "./grammar-compile-worker.js";

/** The sandbox compile worker's data (the same vocabulary, stops and heap cap; vocabSize: the logit rows the masks cover), plus the control words. */
export interface HostWorkerData extends CompileWorkerData {
  /** Int32Array [CTRL_WORDS] over a SharedArrayBuffer. */
  ctrl: SharedArrayBuffer;
}

/** ctrl words: compiles finished (the load included), the last fill or accept answered, and that accept's answer. */
export const COMPILES_DONE = 0;
export const FILL_SEQ = 1;
export const ACCEPTED = 2;
export const CTRL_WORDS = 3;

export const STATUS_OK = 0;
export const STATUS_NO_MATCHER = 1;
export const STATUS_REJECTED = 2;
export const STATUS_TRAPPED = 3;

export type HostMessage =
  | { t: "rows"; buf: SharedArrayBuffer; rows: number }
  | { t: "compile"; id: number; key: string; spec: GrammarSpec }
  | { t: "evict"; key: string }
  | { t: "matcher"; mid: number; key: string }
  | { t: "rollback"; mid: number; n: number }
  | { t: "dispose"; mid: number }
  | { t: "fill"; seq: number; accept: number[]; mids: number[] }
  | { t: "accept"; seq: number; mid: number; token: number };

export type HostReply = { t: "compiled"; id: number; ok: boolean; message: string; trapped: boolean } | { t: "trapped"; message: string };

