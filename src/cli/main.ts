#!/usr/bin/env node
/**
 * The kvflash command line. Argument parsing only: each command calls the library.
 *
 *   kvflash serve [--model DIR] [--port 8000] [--host 127.0.0.1] …
 *   kvflash generate --prompt TEXT [--model DIR] [--chat] [--max-tokens N] [sampling flags] [--json]
 *   kvflash logits (--ids 1,2,3 | --prompt TEXT) [--model DIR] [--json]
 *   kvflash bench <suite> [--quick] [--threads N] [--out FILE]
 *   kvflash pull org/name[:QUANT] [--revision REV]
 *   kvflash ls [--json]
 */
import { parseBenchArgs, runBench } from "../../bench/run.js";
import { GENERATE_USAGE, LOGITS_USAGE } from "./generate-args.js";
import { generateCommand, logitsCommand } from "./generate.js";
import { LS_USAGE, PULL_USAGE, lsCommand, pullCommand } from "./hub.js";
import { serveCommand } from "./serve.js";
import { SERVE_USAGE } from "./serve-args.js";

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
  kvflash bench <suite> [--quick] [--threads N] [--out FILE]   run a benchmark suite
  kvflash pull org/name[:QUANT] [--revision REV]                download a model into the Hugging Face cache
  kvflash ls [--json]                                           list the models in the Hugging Face cache
  kvflash help                                                  this text
`;

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
    case "bench":
      await runBench(parseBenchArgs(rest, false));
      return 0;
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(USAGE);
      return command === undefined ? 1 : 0;
    default:
      process.stderr.write(`unknown command ${JSON.stringify(command)}\n${USAGE}`);
      return 1;
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
