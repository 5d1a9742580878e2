// The load flags serve, generate and logits share are read by one parser (src/cli/load-flags.ts):
// each command takes the same spellings into the same fields, and a bad value is the same error,
// naming the flag, whichever command it was given to.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseGenerateArgs, parseLogitsArgs } from "../../src/cli/generate-args.js";
import { parseServeArgs } from "../../src/cli/serve-args.js";
import type { LoadFlags } from "../../src/cli/load-flags.js";

const commands: Record<string, (flags: string[]) => LoadFlags> = {
  serve: (flags) => parseServeArgs(flags, {}),
  generate: (flags) => parseGenerateArgs(["--prompt", "hi", ...flags]),
  logits: (flags) => parseLogitsArgs(["--ids", "1", ...flags]),
};

const GOOD: [string[], LoadFlags][] = [
  [["--model", "org/name:Q4_K_M", "--revision", "v2"], { model: "org/name:Q4_K_M", revision: "v2" }],
  [["--weights=q8", "--kv-dtype", "fp8_e5m2"], { weights: "q8", kvDtype: "fp8_e5m2" }],
  [["--max-model-len", "4096", "--kv-cache-gib", "0.5", "--threads", "3"], { maxModelLen: 4096, kvCacheBytes: 2 ** 29, threads: 3 }],
  [["--num-gpu-blocks-override", "64", "--block-size=8", "--kernels", "baseline", "--device", "cpu"], { numBlocks: 64, blockSize: 8, kernels: "baseline", device: "cpu" }],
];

test("every command reads the shared load flags into the same fields", () => {
  for (const [flags, want] of GOOD) {
    for (const [name, parse] of Object.entries(commands)) {
      const got = parse(flags);
      for (const [k, v] of Object.entries(want)) assert.equal(got[k as keyof LoadFlags], v, `${name} ${flags.join(" ")}: ${k}`);
    }
  }
});

test("a bad load flag is the same error, naming the flag, in every command", () => {
  const bad = [["--weights", "q3"], ["--kv-dtype", "int4"], ["--max-model-len", "1"], ["--kv-cache-gib", "-1"], ["--threads", "0"], ["--model"], ["--block-size", "512"], ["--num-gpu-blocks-override", "0"], ["--kernels", "fast"]];
  for (const flags of bad) {
    const messages = Object.entries(commands).map(([name, parse]) => {
      try {
        parse(flags);
      } catch (e) {
        assert.ok((e as Error).message.startsWith(flags[0]!), `${name}: ${(e as Error).message}`);
        return (e as Error).message.split("\n")[0];
      }
      assert.fail(`${name} took ${flags.join(" ")}`);
    });
    assert.equal(new Set(messages).size, 1, `${flags.join(" ")}: ${messages.join(" | ")}`);
  }
});
