/**
 * Typed access to the fields of a JSON request body: each getter checks the
 * type (and range) and throws a 400 naming the field and the value it got.
 * `null` counts as absent, as in OpenAI's API.
 */
import { show } from "../errors.js";
import { badRequest } from "./errors.js";

export type Json = Record<string, unknown>;

export function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export class Fields {
  readonly body: Json;

  constructor(body: unknown) {
    if (!isObject(body)) throw badRequest(null, `the request body must be a JSON object, got ${show(body)}`);
    this.body = body;
  }

  has(name: string): boolean {
    return this.body[name] !== undefined && this.body[name] !== null;
  }

  raw(name: string): unknown {
    const v = this.body[name];
    return v === null ? undefined : v;
  }

  #fail(name: string, what: string): never {
    throw badRequest(name, `${name} must be ${what}, got ${show(this.body[name])}`);
  }

  string(name: string): string | undefined {
    const v = this.raw(name);
    if (v === undefined) return undefined;
    if (typeof v !== "string") this.#fail(name, "a string");
    return v;
  }

  boolean(name: string): boolean | undefined {
    const v = this.raw(name);
    if (v === undefined) return undefined;
    if (typeof v !== "boolean") this.#fail(name, "true or false");
    return v;
  }

  number(name: string, range: { min?: number; max?: number } = {}): number | undefined {
    const v = this.raw(name);
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isFinite(v)) this.#fail(name, "a number");
    this.#range(name, v, range);
    return v;
  }

  integer(name: string, range: { min?: number; max?: number } = {}): number | undefined {
    const v = this.raw(name);
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isSafeInteger(v)) this.#fail(name, "an integer");
    this.#range(name, v, range);
    return v;
  }

  /** A string or a list of strings (OpenAI's `stop`). */
  strings(name: string): string[] | undefined {
    const v = this.raw(name);
    if (v === undefined) return undefined;
    if (typeof v === "string") return [v];
    if (!Array.isArray(v) || v.some((s) => typeof s !== "string")) this.#fail(name, "a string or an array of strings");
    return v as string[];
  }

  integers(name: string): number[] | undefined {
    const v = this.raw(name);
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== "number" || !Number.isSafeInteger(x))) this.#fail(name, "an array of integers");
    return v as number[];
  }

  object(name: string): Json | undefined {
    const v = this.raw(name);
    if (v === undefined) return undefined;
    if (!isObject(v)) this.#fail(name, "an object");
    return v;
  }

  #range(name: string, v: number, { min, max }: { min?: number; max?: number }): void {
    if (min !== undefined && v < min) throw badRequest(name, `${name} must be ≥ ${min}, got ${v}`);
    if (max !== undefined && v > max) throw badRequest(name, `${name} must be ≤ ${max}, got ${v}`);
  }
}
