/**
 * Renders a parsed @huggingface/jinja template under a time and size bound
 * (issue 32: a chat template is part of a model file, and a model file is
 * input — a template that loops hung the load and would hang every request).
 *
 * Why in the interpreter, not in a worker: Jinja has no unbounded loop of its
 * own. A template runs long only by iterating (nested `for`, recursive macros)
 * or by growing values (a list or string doubled in a loop, `range(10**9)`,
 * `"x" * 10**9`). Every one of those goes through Interpreter.evaluate, which
 * @huggingface/jinja exports and calls through `this`, so a subclass sees each
 * step: it checks the clock at every step and refuses any value larger than
 * the limits below, and `range` is replaced by one that refuses to build more
 * than maxItems. That bounds time and memory on whatever thread renders —
 * at load (ChatTemplate's check render), per request (ChatTemplate.render) —
 * with no thread to start and no copy of the messages. Jinja's builtins are
 * each linear in their inputs, and every input is a value the bound has seen.
 * Deep recursion ends in V8's own RangeError (stack overflow), caught as any
 * template error is.
 *
 * Template.render itself cannot take the subclass, so renderBounded does what
 * it does (a fresh Environment, the globals of its setupGlobals, then the
 * caller's variables) and runs the subclass on `template.parsed`.
 */
import { Environment, Interpreter, type Template } from "@huggingface/jinja";

// @huggingface/jinja's index.d.ts re-exports these from "./runtime" without an
// extension, which Node16 resolution cannot follow: the shapes used here, typed.
interface JinjaValue {
  type: string;
  value: unknown;
}
interface JinjaEnvironment {
  set(name: string, value: unknown): JinjaValue;
}
interface JinjaInterpreter {
  run(program: Template["parsed"]): JinjaValue;
  evaluate(statement: unknown, environment: JinjaEnvironment): JinjaValue;
}
const InterpreterBase = Interpreter as unknown as new (env: JinjaEnvironment) => JinjaInterpreter;
const newEnvironment = (): JinjaEnvironment => new (Environment as unknown as new () => JinjaEnvironment)();

export interface RenderLimits {
  /** Wall-clock milliseconds one render may take. */
  timeMs: number;
  /** Items of one list (range, concatenation, filters). */
  maxItems: number;
  /** UTF-16 code units of one string (the rendered prompt included). */
  maxChars: number;
}

/**
 * Far above what a chat template needs for any conversation a server accepts
 * (a long prompt renders in milliseconds and is a few MB), far below a hang.
 */
export const RENDER_LIMITS: RenderLimits = { timeMs: 2000, maxItems: 1 << 20, maxChars: 1 << 26 };

/** A render stopped by a RenderLimits bound: the template, not the conversation, is at fault. */
export class RenderLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RenderLimitError";
  }
}

/** Interpreter.evaluate with a clock check at every step and a size check on every value. */
class BoundedInterpreter extends InterpreterBase {
  readonly #limits: RenderLimits;
  readonly #deadline: number;
  #steps = 0;

  constructor(env: JinjaEnvironment, limits: RenderLimits) {
    super(env);
    this.#limits = limits;
    this.#deadline = performance.now() + limits.timeMs;
  }

  override evaluate(statement: unknown, environment: JinjaEnvironment): JinjaValue {
    // Every step: one step can hide a whole loop (a `for` with an empty body evaluates nothing per item).
    if (++this.#steps > 0 && performance.now() > this.#deadline) {
      throw new RenderLimitError(`ran past the ${this.#limits.timeMs} ms limit for one render (${this.#steps} steps)`);
    }
    const value = super.evaluate(statement, environment);
    checkSize(value, this.#limits);
    return value;
  }
}

function checkSize(value: JinjaValue, limits: RenderLimits): void {
  const v: unknown = value.value;
  if (typeof v === "string" && v.length > limits.maxChars) {
    throw new RenderLimitError(`made a string of ${v.length} characters, above the limit of ${limits.maxChars}`);
  }
  if (Array.isArray(v) && v.length > limits.maxItems) throw new RenderLimitError(`made a list of ${v.length} items, above the limit of ${limits.maxItems}`);
}

/** Jinja's range(), refusing to build more than `maxItems` numbers. */
function boundedRange(maxItems: number): (start: number, stop?: number, step?: number) => number[] {
  return (start, stop, step = 1) => {
    if (stop === undefined) [start, stop] = [0, start];
    if (step === 0) throw new Error("range() step must not be zero");
    const count = Math.max(0, Math.ceil((stop - start) / step));
    if (count > maxItems) throw new RenderLimitError(`called range() for ${count} items, above the limit of ${maxItems}`);
    return Array.from({ length: count }, (_, i) => start + i * step);
  };
}

/** The strftime_now global of @huggingface/jinja (%Y %m %d %b %B %H %M %%), which it does not export. */
function strftimeNow(format: string): string {
  const date = new Date();
  const pad2 = (n: number): string => String(n).padStart(2, "0");
  return format.replace(/%[YmdbBHM%]/g, (token) => {
    switch (token) {
      case "%Y": return String(date.getFullYear());
      case "%m": return pad2(date.getMonth() + 1);
      case "%d": return pad2(date.getDate());
      case "%b": return new Intl.DateTimeFormat(undefined, { month: "short" }).format(date);
      case "%B": return new Intl.DateTimeFormat(undefined, { month: "long" }).format(date);
      case "%H": return pad2(date.getHours());
      case "%M": return pad2(date.getMinutes());
      default: return "%";
    }
  });
}

/**
 * A compiled template: @huggingface/jinja's Template, typed by what is used of it, so that the
 * published .d.ts do not load jinja's own (which a consumer's strict nodenext build rejects).
 */
export interface CompiledTemplate {
  readonly parsed: unknown;
}

/** Template.render(variables) under `limits`; throws RenderLimitError past one, the template's own errors otherwise. */
export function renderBounded(template: CompiledTemplate, variables: Readonly<Record<string, unknown>>, limits: RenderLimits = RENDER_LIMITS): string {
  const env = newEnvironment();
  const globals: Record<string, unknown> = {
    false: false, true: true, none: null, False: false, True: true, None: null,
    raise_exception: (message: unknown) => {
      throw new Error(String(message));
    },
    range: boundedRange(limits.maxItems),
    strftime_now: strftimeNow,
  };
  for (const [name, value] of Object.entries(globals)) env.set(name, value);
  for (const [name, value] of Object.entries(variables)) env.set(name, value);
  const out = new BoundedInterpreter(env, limits).run(template.parsed as Template["parsed"]).value;
  return typeof out === "string" ? out : String(out);
}
