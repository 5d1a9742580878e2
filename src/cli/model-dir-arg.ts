/**
 * The --model directory as every command checks it before loading anything,
 * so `serve` and `generate` fail alike (and the same way) on a directory that
 * is missing or is not a Hugging Face model directory.
 */
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { ArgumentError, show } from "../errors.js";

/** Throws an ArgumentError naming --model and the directory unless `dir` is a directory with a config.json. */
export function checkModelDirArg(dir: string): void {
  if (!existsSync(dir)) throw new ArgumentError("--model", `${show(dir)} does not exist`);
  if (!statSync(dir).isDirectory()) throw new ArgumentError("--model", `${show(dir)} is not a directory`);
  if (!existsSync(join(dir, "config.json"))) throw new ArgumentError("--model", `${show(dir)} has no config.json (is it a Hugging Face model directory?)`);
}
