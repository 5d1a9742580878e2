/**
 * The Node options a worker thread of ours starts with: the parent's
 * (`process.execArgv`, as Worker's default), less the ones that describe how
 * the parent's own entry point is read. `node --input-type=module` (a script
 * piped to stdin, how people try a library from the shell) puts
 * `--input-type` there, and a Worker started with a file URL then fails with
 * ERR_INPUT_TYPE_NOT_ALLOWED; `--eval`/`--print` and their code would be
 * meaningless to a worker too.
 *
 * Only then is an explicit list given. Otherwise the result is undefined and
 * the worker inherits as Worker does by default, which also leaves out the
 * per-process and V8 options a worker refuses when they are listed explicitly
 * (ERR_WORKER_INVALID_EXEC_ARGV: node --test's children run with
 * --stack-trace-limit and --v8-pool-size, for one).
 */

/** Flags that concern the main entry only, and whether each takes a separate value. */
const ENTRY_ONLY_FLAGS: ReadonlyMap<string, boolean> = new Map([
  ["--input-type", true],
  ["--eval", true],
  ["-e", true],
  ["--print", true],
  ["-p", true],
  ["--interactive", false],
  ["-i", false],
]);

export function workerExecArgv(execArgv: readonly string[] = process.execArgv): string[] | undefined {
  const out: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!;
    const name = arg.startsWith("--") && arg.includes("=") ? arg.slice(0, arg.indexOf("=")) : arg;
    const takesValue = ENTRY_ONLY_FLAGS.get(name);
    if (takesValue === undefined) out.push(arg);
    else if (takesValue && name === arg) i++; // skip its value too
  }
  return out.length === execArgv.length ? undefined : out;
}
