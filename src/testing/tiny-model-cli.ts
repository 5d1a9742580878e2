#!/usr/bin/env node
/**
 * Writes tiny model directories for tests.
 *
 *   node dist/src/testing/tiny-model-cli.js --arch qwen3 --out /tmp/tiny-qwen3 [--seed 1] [--dtype bf16] [--shards 2] …
 */
import { TINY_ARCHS, type TinyArch, type TinyModelOptions, writeTinyModel } from "./tiny-model.js";

const USAGE = `usage:
  tiny-model-cli --arch ${TINY_ARCHS.join("|")} --out DIR [--seed N] [--dtype f32|f16|bf16] [--shards N]
                 [--layers N] [--hidden N] [--intermediate N] [--heads N] [--kv-heads N] [--head-dim N]
                 [--vocab N] [--merges N] [--tied | --untied]
`;

function parse(argv: string[]): { out: string; options: TinyModelOptions } {
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith("--")) throw new Error(`unexpected argument ${JSON.stringify(a)}\n${USAGE}`);
    const next = argv[i + 1];
    if (next !== undefined && !next.startsWith("--")) {
      flags.set(a.slice(2), next);
      i++;
    } else flags.set(a.slice(2), true);
  }
  const str = (k: string): string | undefined => {
    const v = flags.get(k);
    if (v === true) throw new Error(`--${k} needs a value\n${USAGE}`);
    return v;
  };
  const int = (k: string): number | undefined => {
    const v = str(k);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n)) throw new Error(`--${k} must be an integer, got ${JSON.stringify(v)}`);
    return n;
  };
  const arch = str("arch");
  const out = str("out");
  if (arch === undefined || out === undefined) throw new Error(USAGE);
  const options: TinyModelOptions = { arch: arch as TinyArch };
  const set = <K extends keyof TinyModelOptions>(key: K, value: TinyModelOptions[K] | undefined): void => {
    if (value !== undefined) options[key] = value;
  };
  set("seed", int("seed"));
  set("dtype", str("dtype") as TinyModelOptions["dtype"]);
  set("shards", int("shards"));
  set("numLayers", int("layers"));
  set("hiddenSize", int("hidden"));
  set("intermediateSize", int("intermediate"));
  set("numHeads", int("heads"));
  set("numKvHeads", int("kv-heads"));
  set("headDim", int("head-dim"));
  set("vocabSize", int("vocab"));
  const merges = int("merges");
  if (merges !== undefined) options.tokenizer = { kind: "synthetic", merges };
  if (flags.has("tied")) options.tieWordEmbeddings = true;
  if (flags.has("untied")) options.tieWordEmbeddings = false;
  return { out, options };
}

try {
  const { out, options } = parse(process.argv.slice(2));
  const model = writeTinyModel(out, options);
  const c = model.config;
  process.stdout.write(
    `wrote ${c.architecture} to ${out}: hidden ${c.hiddenSize}, layers ${c.numLayers}, heads ${c.numHeads}/${c.numKvHeads} × ${c.headDim}, ` +
      `vocab ${c.vocabSize}, files ${model.files.join(", ")}\n`,
  );
} catch (e) {
  process.stderr.write(`${(e as Error).message}\n`);
  process.exitCode = 1;
}
