/**
 * Lockstep: one suite run once per kernel flavor at the same time, in one
 * process, with every measurement alternated run by run between the flavors
 * (baseline, relaxed, baseline, relaxed, …). On this shared 2-core machine
 * load comes and goes within seconds; runs that take turns see the same load,
 * so the ratio of their medians holds where two sequential passes drifted
 * (a linalg run gave relaxed/baseline ratios from 0.07 to 5).
 *
 * Each flavor's copy of the suite runs as its own async task on its own
 * runtime (both alive at once) and calls `measure` at the same points in the
 * same order (the suite's code is the same and deterministic). A measurement
 * waits until every flavor has reached it, then the coordinator warms each
 * flavor's side once and runs rounds — one `round()` of each flavor in turn —
 * until every side is `done()`: the paired-run design of timeInterleaved
 * (harness.ts), applied across runtimes. Every round starts after a short
 * sleep (settle), so one flavor's spinning workers do not slow the other's
 * call; a runtime's workers are then asleep when its call starts, a wake-up
 * that single-flavor runs (back-to-back calls) do not pay, the same for every
 * flavor.
 *
 * A flavor whose suite ends or throws while another waits ends the run with
 * an error that names both: the suite did not measure the same things.
 */

/** One flavor's side of a measurement. */
export interface Measurement<T> {
  /** What is measured, for errors: "time", "interleaved", "repeat". */
  kind: string;
  /** Untimed work before the first round (warm-up, calibration). */
  warm?: () => void | Promise<void>;
  /** One run: does the work and records what it needs. */
  round: () => void | Promise<void>;
  /** True when this side has enough rounds (every side runs until all are done). */
  done: () => boolean;
  result: () => T;
}

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Sleeps this thread for SETTLE_MS before a side's round: a runtime's workers
 * spin ≈ 200 µs after their last task before they sleep (src/runtime/control.ts
 * SPIN), and the next flavor's round should not start while they still hold a
 * core. Every round starts the same way, so every flavor pays the same.
 */
const SETTLE_MS = 0.3;
function settle(): void {
  Atomics.wait(pause, 0, 0, SETTLE_MS);
}

interface Waiting {
  m: Measurement<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

export class Lockstep {
  readonly names: readonly string[];
  #waiting: (Waiting | undefined)[];
  #left: (string | undefined)[];
  #failure: Error | undefined;

  /** names: the participants (kernel flavors), in the order their rounds run. */
  constructor(names: readonly string[]) {
    this.names = names;
    this.#waiting = names.map(() => undefined);
    this.#left = names.map(() => undefined);
  }

  /** Participant `index` reaches a measurement: resolves with its result once every participant's side has run. */
  measure<T>(index: number, m: Measurement<T>): Promise<T> {
    if (this.#failure) return Promise.reject(this.#failure);
    return new Promise<T>((resolve, reject) => {
      this.#waiting[index] = { m, resolve: resolve as (value: unknown) => void, reject };
      this.#check();
    });
  }

  /** Participant `index` has finished its suite (or failed with `error`): nobody can wait for it any more. */
  leave(index: number, error?: Error): void {
    this.#left[index] = error ? `failed (${error.message.split("\n")[0]})` : "finished its suite";
    if (error) this.#fail(new Error(`bench: the ${this.names[index]} run failed, so the other flavors stop too`));
    this.#check();
  }

  #fail(error: Error): void {
    this.#failure ??= error;
    for (const [i, w] of this.#waiting.entries()) {
      if (!w) continue;
      this.#waiting[i] = undefined;
      w.reject(this.#failure);
    }
  }

  #check(): void {
    const waiting = this.#waiting.filter((w) => w !== undefined);
    if (waiting.length === 0) return;
    const gone = this.#left.findIndex((l) => l !== undefined);
    if (gone >= 0) {
      const w = this.#waiting.findIndex((x) => x !== undefined);
      this.#fail(new Error(`bench: the ${this.names[gone]} run ${this.#left[gone]} while the ${this.names[w]} run waits on a "${waiting[0]!.m.kind}" measurement: the suite measured differently per flavor`));
      return;
    }
    if (waiting.length < this.names.length) return;
    const kinds = new Set(waiting.map((w) => w.m.kind));
    if (kinds.size > 1) {
      this.#fail(new Error(`bench: the flavors reached different measurements (${this.names.map((n, i) => `${n}: ${this.#waiting[i]!.m.kind}`).join(", ")})`));
      return;
    }
    const all = waiting;
    this.#waiting = this.names.map(() => undefined);
    void this.#run(all);
  }

  async #run(sides: Waiting[]): Promise<void> {
    try {
      for (const s of sides) await s.m.warm?.();
      do {
        for (const s of sides) {
          settle();
          await s.m.round();
        }
      } while (!sides.every((s) => s.m.done()));
      for (const s of sides) s.resolve(s.m.result());
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      for (const s of sides) s.reject(error);
      this.#fail(error);
    }
  }
}
