/**
 * Log lines that a client can provoke at will (a dropped upload, …), kept to
 * one line per event and at most one line per kind every `intervalMs`; the
 * next line says how many were held back. 300 dropped sockets make one line,
 * not 1500 lines of stack traces.
 */
export class LogLimiter {
  readonly intervalMs: number;
  readonly #write: (line: string) => void;
  readonly #last = new Map<string, number>();
  readonly #heldBack = new Map<string, number>();

  constructor(options: { intervalMs?: number; write?: (line: string) => void } = {}) {
    this.intervalMs = options.intervalMs ?? 10_000;
    this.#write = options.write ?? ((line) => void process.stderr.write(`${line}\n`));
  }

  /** Writes `line` (its first line only) unless a line of this kind was written less than intervalMs ago. */
  line(kind: string, line: string): void {
    const now = Date.now();
    const last = this.#last.get(kind);
    if (last !== undefined && now - last < this.intervalMs) {
      this.#heldBack.set(kind, (this.#heldBack.get(kind) ?? 0) + 1);
      return;
    }
    const held = this.#heldBack.get(kind) ?? 0;
    this.#last.set(kind, now);
    this.#heldBack.delete(kind);
    this.#write(`${line.split("\n", 1)[0]}${held > 0 ? ` (and ${held} more like it since the last such line)` : ""}`);
  }
}
