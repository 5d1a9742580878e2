/**
 * The bench's child processes (`kvflash serve` servers, the llama.cpp
 * harness, the gap meter) die with the bench. A child spawned with its own
 * stdio outlives a parent that is stopped by SIGTERM or SIGINT (`kill`, a CI
 * timeout, Ctrl-C under a supervisor that signals only the parent) and keeps
 * its port and 2 threads busy, skewing every later measurement. Each spawn
 * site hands its child to `ownChild`; the first call installs handlers that
 * SIGTERM every live child when the bench exits or is signalled, and then
 * exit with the signal's status (128 + its number), as an unhandled signal
 * would.
 */
import type { ChildProcess } from "node:child_process";
import { constants } from "node:os";

const live = new Set<ChildProcess>();
let installed = false;

function killAll(): void {
  for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  live.clear();
}

function install(): void {
  installed = true;
  process.once("exit", killAll);
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    process.once(signal, () => {
      killAll();
      process.exit(128 + constants.signals[signal]);
    });
  }
}

/** Registers `child` to be SIGTERMed if the bench exits or is signalled while it runs; returns it. */
export function ownChild<C extends ChildProcess>(child: C): C {
  if (!installed) install();
  live.add(child);
  child.once("exit", () => live.delete(child));
  return child;
}

/** Children registered and still running (tests). */
export function ownedChildren(): number {
  return live.size;
}
