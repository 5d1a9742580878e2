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

/** Renders a value for an error message: short, unambiguous, never huge. */
export function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) {
    const head = value.slice(0, 8).map(show).join(", ");
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
