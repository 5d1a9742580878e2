/**
 * Errors thrown by kvflash. Every validation error names the argument and the
 * offending value, so a caller can fix the call without reading our source:
 *   `headDim must be ≤ 256, got 320`.
 */

/** A bad argument to a public function: thrown before any kernel runs. */
export class ArgumentError extends Error {
  /** The argument's name as the caller spelled it, e.g. `actualSeqLengths[3]`. */
  readonly argument: string;
  constructor(argument: string, message: string) {
    super(`${argument} ${message}`);
    this.name = "ArgumentError";
    this.argument = argument;
  }
}

/** The shared wasm memory cannot hold a requested allocation. */
export class OutOfMemoryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OutOfMemoryError";
  }
}

/** A kernel threw or trapped on some thread of a `parallelFor`. */
export class KernelError extends Error {
  readonly kernel: string;
  constructor(kernel: string, message: string) {
    super(`kernel ${kernel} failed: ${message}`);
    this.name = "KernelError";
    this.kernel = kernel;
  }
}

/** Longest echo of a value in an error message, in characters (a 1 MB field is not sent back whole). */
export const MAX_SHOWN_CHARS = 100;

/** Cuts a text for an error message: at most `max` characters, then "…" and its length. */
export function clip(text: string, max = MAX_SHOWN_CHARS): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} characters)`;
}

/** Renders a value for an error message: short, unambiguous, never huge (nor deep). */
export function show(value: unknown, depth = 0): string {
  if (typeof value === "string") return value.length <= MAX_SHOWN_CHARS ? JSON.stringify(value) : `${JSON.stringify(value.slice(0, MAX_SHOWN_CHARS))}… (${value.length} characters)`;
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) {
    if (depth >= 2) return `[… (${value.length} items)]`;
    const head = value.slice(0, 8).map((v) => show(v, depth + 1)).join(", ");
    return `[${head}${value.length > 8 ? `, … (${value.length} items)` : ""}]`;
  }
  if (ArrayBuffer.isView(value)) return `${value.constructor.name}(${(value as unknown as { length: number }).length})`;
  try {
    const s = JSON.stringify(value);
    return s.length > 120 ? `${s.slice(0, 117)}...` : s;
  } catch {
    return Object.prototype.toString.call(value);
  }
}
