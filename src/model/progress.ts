/**
 * A byte-count progress bar on stderr for loading weights:
 *
 *   loading weights [##########··········]  52%  1.21 GiB / 2.33 GiB  612.4 MiB/s
 *
 * On a TTY it redraws one line (at most every `intervalMs`); when asked for on
 * a stream that is not a TTY (a log file, CI) it writes a line per 10 % instead.
 */
import { formatBytes } from "../runtime/allocator.js";

export interface ProgressStream {
  write(chunk: string): unknown;
  isTTY?: boolean;
}

export interface ProgressOptions {
  /** Draw the bar. Default: only when the stream is a TTY. */
  enabled?: boolean;
  /** Default process.stderr. */
  stream?: ProgressStream;
  label?: string;
  /** Minimum time between TTY redraws. Default 100 ms. */
  intervalMs?: number;
}

const BAR = 20;

export class LoadProgress {
  readonly total: number;
  readonly #stream: ProgressStream;
  readonly #enabled: boolean;
  readonly #tty: boolean;
  readonly #label: string;
  readonly #intervalMs: number;
  readonly #start = performance.now();
  #done = 0;
  #lastDraw = -Infinity;
  #lastDecile = -1;
  #finished = false;

  /** @param total bytes the whole load will read */
  constructor(total: number, options: ProgressOptions = {}) {
    this.total = total;
    this.#stream = options.stream ?? process.stderr;
    this.#tty = this.#stream.isTTY === true;
    this.#enabled = options.enabled ?? this.#tty;
    this.#label = options.label ?? "loading weights";
    this.#intervalMs = options.intervalMs ?? 100;
  }

  /** Bytes read so far. */
  get done(): number {
    return this.#done;
  }

  add(bytes: number): void {
    this.#done += bytes;
    if (!this.#enabled) return;
    if (this.#tty) {
      const now = performance.now();
      if (now - this.#lastDraw >= this.#intervalMs) {
        this.#lastDraw = now;
        this.#stream.write(`\r${this.line()}`);
      }
    } else {
      const decile = Math.floor((this.#fraction() * 100) / 10);
      if (decile > this.#lastDecile && decile < 10) {
        this.#lastDecile = decile;
        this.#stream.write(`${this.line()}\n`);
      }
    }
  }

  /** Draws the final state and ends the line. Idempotent. */
  finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    if (!this.#enabled) return;
    this.#stream.write(this.#tty ? `\r${this.line()}\n` : `${this.line()}\n`);
  }

  /** The bar as text (no carriage return or newline). */
  line(): string {
    const f = this.#fraction();
    const filled = Math.round(f * BAR);
    const seconds = Math.max((performance.now() - this.#start) / 1000, 1e-6);
    const rate = `${formatBytes(Math.round(this.#done / seconds))}/s`;
    return `${this.#label} [${"#".repeat(filled)}${"·".repeat(BAR - filled)}] ${String(Math.floor(f * 100)).padStart(3)}%  ${formatBytes(this.#done)} / ${formatBytes(this.total)}  ${rate}`;
  }

  #fraction(): number {
    return this.total > 0 ? Math.min(1, this.#done / this.total) : 1;
  }
}
