/**
 * A byte-count progress bar on stderr for loading weights:
 *
 *   loading weights [##########··········]  52%  1.21 GiB / 2.33 GiB  612.4 MiB/s
 *
 * On a TTY it redraws one line (at most every `intervalMs`), clearing to the
 * end of the line (ANSI EL, `ESC [ K`) so a shorter line leaves nothing of the
 * longer one behind. When asked for on a stream that is not a TTY (a log file,
 * CI) it writes a plain line per 10 % instead, as `kvflash serve` logs:
 *
 *   loading weights 50% (1.16 GiB of 2.33 GiB, 612.4 MiB/s)
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
  /** Called on every update, bar or no bar (the library's onProgress): bytes done of total. */
  onUpdate?: (done: number, total: number) => void;
}

const BAR = 20;
/** Carriage return, then the line, then ANSI "erase to end of line". */
const redraw = (line: string): string => `\r${line}\x1b[K`;

export class LoadProgress {
  readonly total: number;
  readonly #stream: ProgressStream;
  readonly #enabled: boolean;
  readonly #tty: boolean;
  readonly #label: string;
  readonly #intervalMs: number;
  readonly #onUpdate: ((done: number, total: number) => void) | undefined;
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
    this.#onUpdate = options.onUpdate;
  }

  /** Bytes read so far. */
  get done(): number {
    return this.#done;
  }

  add(bytes: number): void {
    this.#done += bytes;
    this.#onUpdate?.(this.#done, this.total);
    if (!this.#enabled) return;
    if (this.#tty) {
      const now = performance.now();
      if (now - this.#lastDraw >= this.#intervalMs) {
        this.#lastDraw = now;
        this.#stream.write(redraw(this.line()));
      }
    } else {
      const decile = Math.floor((this.#fraction() * 100) / 10);
      if (decile > this.#lastDecile && decile < 10) {
        this.#lastDecile = decile;
        this.#stream.write(`${this.logLine()}\n`);
      }
    }
  }

  /** Draws the final state and ends the line. Idempotent. */
  finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#onUpdate?.(this.#done, this.total);
    if (!this.#enabled) return;
    this.#stream.write(this.#tty ? `${redraw(this.line())}\n` : `${this.logLine()}\n`);
  }

  /** The bar as text (no carriage return or newline). */
  line(): string {
    const f = this.#fraction();
    const filled = Math.round(f * BAR);
    return `${this.#label} [${"#".repeat(filled)}${"·".repeat(BAR - filled)}] ${String(Math.floor(f * 100)).padStart(3)}%  ${formatBytes(this.#done)} / ${formatBytes(this.total)}  ${this.#rate()}`;
  }

  /** The progress as one line of a log (no bar). */
  logLine(): string {
    return `${this.#label} ${Math.floor(this.#fraction() * 100)}% (${formatBytes(this.#done)} of ${formatBytes(this.total)}, ${this.#rate()})`;
  }

  #rate(): string {
    const seconds = Math.max((performance.now() - this.#start) / 1000, 1e-6);
    return `${formatBytes(Math.round(this.#done / seconds))}/s`;
  }

  #fraction(): number {
    return this.total > 0 ? Math.min(1, this.#done / this.total) : 1;
  }
}
