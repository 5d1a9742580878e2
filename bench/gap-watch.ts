/**
 * The caller's side of gap-meter.ts: starts the meter process against a
 * server and measures the gaps its watchers see while some work runs.
 *
 *   const meter = await GapMeter.start(url, model);
 *   const { value, gaps } = await meter.during(() => post(url, hugeBody));
 *   await meter.close();
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Gaps } from "./gap-meter.js";
import { ownChild } from "./child-processes.js";

export type { Gaps } from "./gap-meter.js";

const METER = fileURLToPath(new URL("./gap-meter.js", import.meta.url));

export interface WindowGaps {
  health: Gaps;
  stream: Gaps;
  /** The constrained stream's gaps (a meter started with `structured`). */
  structured?: Gaps;
}

export class GapMeter {
  readonly #proc: ChildProcess;
  #out = "";
  #waiters: ((line: string) => void)[] = [];

  private constructor(proc: ChildProcess) {
    this.#proc = proc;
    proc.stdout!.setEncoding("utf8");
    proc.stdout!.on("data", (chunk: string) => {
      this.#out += chunk;
      for (let nl = this.#out.indexOf("\n"); nl >= 0; nl = this.#out.indexOf("\n")) {
        const line = this.#out.slice(0, nl);
        this.#out = this.#out.slice(nl + 1);
        this.#waiters.shift()?.(line);
      }
    });
  }

  /** Spawns the meter; resolves once it polls /health and reads a stream of up to `maxTokens` (and, with `structured`, a constrained one too). */
  static async start(url: string, model: string, maxTokens = 30000, options: { structured?: boolean } = {}): Promise<GapMeter> {
    const proc = ownChild(spawn(process.execPath, [METER, url, model, String(maxTokens), ...(options.structured === true ? ["structured"] : [])], { stdio: ["pipe", "pipe", "inherit"] }));
    const meter = new GapMeter(proc);
    const exited = new Promise<never>((_, reject) => proc.once("exit", (code) => reject(new Error(`the gap meter exited (code ${code})`))));
    const line = await Promise.race([meter.#nextLine(), exited]);
    if (line !== "started") throw new Error(`the gap meter said ${JSON.stringify(line)}`);
    exited.catch(() => {});
    return meter;
  }

  #nextLine(): Promise<string> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Runs `work` inside a window that opens `settleMs` before it and closes `settleMs` after it. */
  async during<T>(work: () => Promise<T>, settleMs = 200): Promise<{ value: T; gaps: WindowGaps }> {
    this.#proc.stdin!.write("begin\n");
    await new Promise((r) => setTimeout(r, settleMs));
    let value: T;
    try {
      value = await work();
    } finally {
      await new Promise((r) => setTimeout(r, settleMs));
      this.#proc.stdin!.write("end\n");
    }
    const gaps = JSON.parse(await this.#nextLine()) as WindowGaps;
    return { value, gaps };
  }

  async close(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.#proc.once("exit", () => resolve()));
    this.#proc.stdin!.end();
    await exited;
  }
}
