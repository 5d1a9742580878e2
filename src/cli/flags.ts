/**
 * Command-line flags as every kvflash command takes them: `--flag value` or
 * `--flag=value`. A value never starts with "--" (write `--flag=--x` for
 * one), so a forgotten value is an error naming its flag rather than the next
 * flag swallowed. Errors name the flag and the value.
 */
import { ArgumentError } from "../errors.js";

/** The value(s) of the flag being handled, read and checked on demand. */
export interface FlagReader {
  string(): string;
  /** Any finite number. */
  number(): number;
  /** A finite number > 0. */
  positive(): number;
  integer(min: number): number;
  /** The plain arguments after the value, for a flag that takes a list (`--served-model-name a b`). */
  more(): string[];
}

export interface WalkOptions {
  /** Appended to an unknown flag's error (the command's usage). */
  usage: string;
  /** Says what an unknown flag is not, e.g. "a serve option". */
  what: string;
  /** Flags that take no value: `--flag=x` is an error. */
  switches?: readonly string[];
}

/** Walks `argv` flag by flag; `handle` reads the flag's value through the reader and returns false for a flag it does not know. */
export function walkFlags(argv: readonly string[], options: WalkOptions, handle: (flag: string, read: FlagReader) => boolean): void {
  for (let i = 0; i < argv.length; i++) {
    let flag = argv[i]!;
    let inline: string | undefined;
    const eq = flag.indexOf("=");
    if (flag.startsWith("--") && eq > 0) {
      inline = flag.slice(eq + 1);
      flag = flag.slice(0, eq);
    }
    if (!flag.startsWith("--")) throw new ArgumentError(flag, `is not an option (options start with --)\n${options.usage}`);
    if (inline !== undefined && options.switches?.includes(flag)) throw new ArgumentError(flag, "takes no value");
    const string = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || (inline === undefined && v.startsWith("--"))) throw new ArgumentError(flag, "needs a value");
      return v;
    };
    const number = (): number => {
      const v = string();
      const n = Number(v);
      if (v.trim() === "" || !Number.isFinite(n)) throw new ArgumentError(flag, `must be a number, got ${JSON.stringify(v)}`);
      return n;
    };
    const read: FlagReader = {
      string,
      number,
      positive() {
        const v = string();
        const n = Number(v);
        if (v.trim() === "" || !Number.isFinite(n) || n <= 0) throw new ArgumentError(flag, `must be a number > 0, got ${JSON.stringify(v)}`);
        return n;
      },
      integer(min) {
        const v = string();
        const n = Number(v);
        if (v.trim() === "" || !Number.isSafeInteger(n) || n < min) throw new ArgumentError(flag, `must be an integer ≥ ${min}, got ${JSON.stringify(v)}`);
        return n;
      },
      more() {
        const rest: string[] = [];
        while (inline === undefined && i + 1 < argv.length && !argv[i + 1]!.startsWith("--")) rest.push(argv[++i]!);
        return rest;
      },
    };
    if (!handle(flag, read)) throw new ArgumentError(flag, `is not ${options.what}\n${options.usage}`);
  }
}
