/**
 * The resolved --model as serve and generate both check it before loading
 * anything, so they fail alike on a directory that is not a Hugging Face
 * model directory. (A path that does not exist, or a file that is not GGUF,
 * is already refused the same way for both by resolveModelArg in hub.ts.)
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ArgumentError, show } from "../errors.js";
import type { ModelSource } from "../sources/source.js";

/** Throws an ArgumentError naming --model and the directory when `source` is a directory without a config.json. */
export function checkModelDirArg(source: ModelSource): void {
  if (source.kind !== "dir") return;
  if (!existsSync(join(source.path, "config.json"))) throw new ArgumentError("--model", `${show(source.path)} has no config.json (is it a Hugging Face model directory?)`);
}
