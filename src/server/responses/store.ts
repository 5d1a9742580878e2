/**
 * The Responses API's stored responses (`store: true`, the default): what
 * `previous_response_id` continues from and `GET /v1/responses/{id}` returns.
 * In memory, bounded in entries and in bytes, least recently used first out
 * (a Map keeps insertion order: a hit is moved to the end, eviction takes
 * from the front) — vLLM keeps them in an unbounded dict; a long-running
 * server must not grow without limit. Lost on restart, as vLLM's are.
 */

/** One stored response: the object GET returns and the conversation a follow-up continues. */
export interface StoredResponse {
  /** The Response object as it was answered. */
  response: Record<string, unknown>;
  /** The chat messages that led to the response and its output, instructions excluded (OpenAI does not carry them over). */
  history: unknown[];
}

export interface ResponseStoreLimits {
  /** Most responses kept. */
  maxEntries: number;
  /** Most bytes kept: the JSON text of the entries, summed. */
  maxBytes: number;
}

/** Default bounds: a thousand conversations, 64 MiB of JSON. */
export const DEFAULT_STORE_LIMITS: ResponseStoreLimits = { maxEntries: 1024, maxBytes: 64 * 2 ** 20 };

export class ResponseStore {
  readonly limits: ResponseStoreLimits;
  readonly #entries = new Map<string, { value: StoredResponse; bytes: number }>();
  #bytes = 0;

  constructor(limits: ResponseStoreLimits = DEFAULT_STORE_LIMITS) {
    for (const [k, v] of Object.entries(limits)) {
      if (!Number.isSafeInteger(v) || v < 1) throw new RangeError(`${k} must be a positive integer, got ${v}`);
    }
    this.limits = limits;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Bytes held (JSON text of every entry). */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Keeps `value` under `id`, evicting the least recently used entries until
   * both bounds hold. An entry larger than maxBytes by itself is not kept:
   * returns false.
   */
  set(id: string, value: StoredResponse): boolean {
    this.delete(id);
    const bytes = Buffer.byteLength(JSON.stringify(value));
    if (bytes > this.limits.maxBytes) return false;
    this.#entries.set(id, { value, bytes });
    this.#bytes += bytes;
    for (const [oldest, e] of this.#entries) {
      if (this.#entries.size <= this.limits.maxEntries && this.#bytes <= this.limits.maxBytes) break;
      this.#entries.delete(oldest);
      this.#bytes -= e.bytes;
    }
    return true;
  }

  /** The entry, now the most recently used; undefined if never stored or evicted. */
  get(id: string): StoredResponse | undefined {
    const e = this.#entries.get(id);
    if (e === undefined) return undefined;
    this.#entries.delete(id);
    this.#entries.set(id, e);
    return e.value;
  }

  delete(id: string): boolean {
    const e = this.#entries.get(id);
    if (e === undefined) return false;
    this.#entries.delete(id);
    this.#bytes -= e.bytes;
    return true;
  }
}
