/**
 * kvflash replicas as an operator runs them: `kvflash serve` child processes
 * on free loopback ports, optionally behind Debian's HAProxy with the
 * project's recipe (deploy/haproxy/haproxy.cfg, addresses from the
 * environment as it documents). test/deploy/haproxy.test.ts and
 * `npm run bench -- scale` start their clusters here.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const HAPROXY = "/usr/sbin/haproxy";
export const HAPROXY_CONFIG = fileURLToPath(new URL("../../../deploy/haproxy/haproxy.cfg", import.meta.url));
const CLI = fileURLToPath(new URL("../cli/main.js", import.meta.url));

export interface Replica {
  /** http://127.0.0.1:port */
  url: string;
  proc: ChildProcess;
  stderr(): string;
  /** Sends `signal` (default SIGTERM) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** A free loopback port (closed again: a tiny race, fine on a test machine). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

async function waitStatus(url: string, what: () => string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(url).catch(() => null);
    if (res?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`${url} did not answer 200 in ${timeoutMs / 1000} s:\n${what()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `kvflash serve --port 0 …args`, resolved once its /health is 200. */
export async function startReplica(args: readonly string[]): Promise<Replica> {
  const proc = spawn(process.execPath, [CLI, "serve", "--port", "0", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  proc.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /listening on (http:\/\/\S+)/.exec(stderr);
      if (m) {
        clearInterval(timer);
        resolve(m[1]!);
      } else if (proc.exitCode !== null) {
        clearInterval(timer);
        reject(new Error(`kvflash serve exited with code ${proc.exitCode}:\n${stderr}`));
      }
    }, 20);
  });
  try {
    await waitStatus(`${url}/health`, () => stderr, 180_000);
  } catch (e) {
    proc.kill("SIGKILL");
    throw e;
  }
  return {
    url,
    proc,
    stderr: () => stderr,
    stop: async (signal = "SIGTERM") => {
      if (proc.exitCode === null) proc.kill(signal);
      return exited;
    },
  };
}

export interface Cluster {
  /** HAProxy's front, http://127.0.0.1:port */
  front: string;
  replicas: Replica[];
  /** Stops HAProxy and every replica (SIGKILL: nothing to drain). */
  stop(): Promise<void>;
}

export interface ClusterOptions {
  /** Replicas, 1 or 2 (the recipe names r1 and r2). Default 2. */
  replicas?: 1 | 2;
  /** `kvflash serve` arguments of each replica. */
  replicaArgs?: readonly string[];
  /** Replaces the recipe's balance line (e.g. "roundrobin", a baseline). */
  balance?: string;
}

/** Replicas behind HAProxy with deploy/haproxy/haproxy.cfg; resolved once HAProxy sees every replica up. */
export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  if (!existsSync(HAPROXY)) throw new Error(`${HAPROXY} is missing: install Debian's haproxy (apt-get install haproxy), as .ci/run does`);
  const n = options.replicas ?? 2;
  const replicas = await Promise.all(Array.from({ length: n }, () => startReplica(options.replicaArgs ?? [])));
  let config = readFileSync(HAPROXY_CONFIG, "utf8");
  if (options.balance !== undefined) config = config.replace(/^(\s*)balance .*$/m, `$1balance ${options.balance}`);
  if (n === 1) config = config.replace(/^\s*server r2 .*$/m, "");
  const dir = mkdtempSync(join(tmpdir(), "kvflash-haproxy-"));
  writeFileSync(join(dir, "haproxy.cfg"), config);
  const port = await freePort();
  const host = (r: Replica | undefined): string => (r === undefined ? "" : new URL(r.url).host);
  const env = { ...process.env, KVFLASH_FRONT: `127.0.0.1:${port}`, KVFLASH_R1: host(replicas[0]), KVFLASH_R2: host(replicas[1]) };
  const proxy = spawn(HAPROXY, ["-db", "-f", join(dir, "haproxy.cfg")], { env, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  proxy.stderr!.setEncoding("utf8").on("data", (c: string) => (log += c));
  const stop = async (): Promise<void> => {
    proxy.kill("SIGTERM");
    await Promise.all(replicas.map((r) => r.stop("SIGKILL")));
    rmSync(dir, { recursive: true, force: true });
  };
  const front = `http://127.0.0.1:${port}`;
  try {
    await waitStatus(`${front}/health`, () => log, 30_000);
    // Every replica must pass HAProxy's health check (rise 2 × inter 1 s) before load arrives,
    // or the first requests all land on whichever passed first.
    await new Promise((r) => setTimeout(r, 2200));
  } catch (e) {
    await stop();
    throw e;
  }
  return { front, replicas, stop };
}
