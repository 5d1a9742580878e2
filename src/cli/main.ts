#!/usr/bin/env node
/**
 * The kvflash command line. Argument parsing only: each command calls the library.
 *
 *   kvflash serve [--model DIR] [--port 8000] [--host 127.0.0.1] …
 *   kvflash generate --prompt TEXT [--model DIR] [--chat] [--max-tokens N] [sampling flags] [--json]
 *   kvflash logits (--ids 1,2,3 | --prompt TEXT) [--model DIR] [--json]
 *   kvflash pull org/name[:QUANT] [--revision REV]
 *   kvflash ls [--json]
 *   kvflash rm org/name[:QUANT]
 *   kvflash show MODEL [--json]
 *   kvflash --version
 *
 * The benchmarks are not part of the package: `kvflash bench` says to run
 * `npm run bench` from a checkout.
 */
import { GENERATE_USAGE, LOGITS_USAGE } from "./generate-args.js";
import { generateCommand, logitsCommand } from "./generate-command.js";
import { LS_USAGE, PULL_USAGE, lsCommand, pullCommand } from "./hub.js";
import { RM_USAGE, rmCommand } from "./rm-command.js";
import { serveCommand } from "./serve-command.js";
import { SHOW_USAGE, showCommand } from "./show-command.js";
import { SERVE_USAGE } from "./serve-args.js";
import { closest } from "./suggest.js";
import { packageVersion } from "../package-version.js";

const USAGE = `kvflash — LLM inference on WebAssembly SIMD

usage:
  kvflash serve [--model DIR] [--port 8000] [--host 127.0.0.1] [--kv-cache-gib N] [--kv-dtype DTYPE]
                [--max-num-seqs N] [--weights FORMAT] [--api-key KEY] [--cors-origin ORIGIN] …
                                                                OpenAI-compatible server (serve --help for all options)
  kvflash generate --prompt TEXT [--model DIR] [--chat] [--max-tokens N] [--temperature T] [--top-p P] …
                   [--seed N] [--stop TEXT] [--weights FORMAT] [--kv-dtype DTYPE] [--json]
                                                                stream a completion (generate --help for all options)
  kvflash logits (--ids 1,2,3 | --prompt TEXT) [--model DIR] [--json]
                                                                the last position's logits
  kvflash pull org/name[:QUANT] [--revision REV]                download a model into the Hugging Face cache
  kvflash ls [--json]                                           list the models in the Hugging Face cache
  kvflash rm org/name[:QUANT]                                   remove a model (or one quant) from the Hugging Face cache
  kvflash show MODEL [--json]                                   architecture, parameters, quant, context, template, files
  kvflash bench --help                                          where the benchmarks are (a checkout: npm run bench)
  kvflash --version                                             the package's version
  kvflash help                                                  this text
`;

const BENCH_USAGE = `usage, from a checkout of the kvflash repository:
  npm run bench -- <suite> [--quick] [--threads N] [--kernels baseline|relaxed] [--out FILE]

  The benchmarks are not part of the installed package: they live in the repository's
  bench/ directory, next to the code they measure, and write bench/results/<suite>.json.
  In a checkout: npm ci && npm run build && npm run bench (with no suite it lists them).
`;

/** The commands, for "did you mean". */
const COMMANDS = ["serve", "generate", "logits", "pull", "ls", "rm", "show", "bench", "help"];

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const help = rest.includes("--help") || rest.includes("-h");
  switch (command) {
    case "serve":
      if (help) return usage(SERVE_USAGE);
      return serveCommand(rest);
    case "generate":
      if (help) return usage(GENERATE_USAGE);
      return generateCommand(rest);
    case "logits":
      if (help) return usage(LOGITS_USAGE);
      return logitsCommand(rest);
    case "pull":
      if (help) return usage(PULL_USAGE);
      return pullCommand(rest);
    case "ls":
      if (help) return usage(LS_USAGE);
      return lsCommand(rest);
    case "rm":
      if (help) return usage(RM_USAGE);
      return rmCommand(rest);
    case "show":
      if (help) return usage(SHOW_USAGE);
      return showCommand(rest);
    case "bench":
      if (help) return usage(BENCH_USAGE);
      process.stderr.write(`kvflash bench: the benchmarks are not installed with kvflash.\n${BENCH_USAGE}`);
      return 1;
    case "--version":
    case "-v":
      return usage(`kvflash ${packageVersion()}\n`);
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(USAGE);
      return command === undefined ? 1 : 0;
    default: {
      const guess = closest(command, COMMANDS);
      process.stderr.write(`unknown command ${JSON.stringify(command)}${guess === null ? "" : ` (did you mean ${JSON.stringify(guess)}?)`}\n${USAGE}`);
      return 1;
    }
  }
}

function usage(text: string): number {
  process.stdout.write(text);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: Error) => {
    process.stderr.write(`kvflash: ${e.message}\n`);
    process.exitCode = 1;
  },
);
