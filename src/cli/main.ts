#!/usr/bin/env node
/**
 * The kvflash command line. Argument parsing only: each command calls the library.
 *
 *   kvflash serve [--model DIR] [--port 8000] [--host 127.0.0.1] …
 *   kvflash bench <suite> [--quick] [--threads N] [--out FILE]
 */
import { parseBenchArgs, runBench } from "../../bench/run.js";
import { serveCommand } from "./serve.js";
import { SERVE_USAGE } from "./serve-args.js";

const USAGE = `kvflash — LLM inference on WebAssembly SIMD

usage:
  kvflash serve [--model DIR] [--port 8000] [--host 127.0.0.1] [--kv-cache-gib N] [--kv-dtype DTYPE]
                [--max-num-seqs N] [--weights FORMAT] [--api-key KEY] [--cors-origin ORIGIN] …
                                                                OpenAI-compatible server (serve --help for all options)
  kvflash bench <suite> [--quick] [--threads N] [--out FILE]   run a benchmark suite
  kvflash help                                                  this text
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "serve":
      if (rest.includes("--help") || rest.includes("-h")) {
        process.stdout.write(SERVE_USAGE);
        return 0;
      }
      return serveCommand(rest);
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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: Error) => {
    process.stderr.write(`kvflash: ${e.message}\n`);
    process.exitCode = 1;
  },
);
