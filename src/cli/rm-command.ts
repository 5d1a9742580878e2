/**
 * `kvflash rm SPEC`: removes a model from the Hugging Face cache, as `ollama
 * rm` does (sources/hub/cache-remove.ts does the work). Local files only: it
 * works offline.
 */
import { ArgumentError } from "../errors.js";
import { HubCache } from "../sources/hub/hub-cache.js";
import { removeCachedModel } from "../sources/hub/cache-remove.js";
import { hubSettings } from "../sources/hub/hub-settings.js";
import { parseHubSpec } from "../sources/hub/model-spec.js";
import { formatBytes } from "../runtime/allocator.js";
import { walkFlags } from "./flags.js";

export const RM_USAGE = `usage: kvflash rm SPEC

  Removes a model from the Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub or
  ~/.cache/huggingface/hub) and prints what it removed and the space freed.

  SPEC is one of
    org/name                  the whole repository: every revision, file and download
    org/name:Q4_K_M           that quant's GGUF file(s) only (case-insensitive)
    org/name/file.gguf        that GGUF file only
`;

export function rmCommand(argv: readonly string[]): number {
  const spec = argv[0];
  if (spec === undefined || spec.startsWith("--")) throw new ArgumentError("SPEC", `is required (org/name, org/name:QUANT or org/name/file.gguf)\n${RM_USAGE}`);
  walkFlags(argv.slice(1), { usage: RM_USAGE, what: "an rm option" }, () => false);
  const hub = parseHubSpec(spec);
  if (hub === null) throw new ArgumentError("SPEC", `must be a Hugging Face repository (org/name, org/name:QUANT or org/name/file.gguf), got ${JSON.stringify(spec)}; rm never deletes local paths`);
  const { cacheDir } = hubSettings();
  const removed = removeCachedModel(new HubCache(cacheDir), hub);
  const whole = hub.quant === undefined && hub.file === undefined;
  const what = whole ? `${hub.repo} (the whole repository, ${removed.files.length} file(s))` : removed.files.join(", ");
  const emptied = !whole && removed.repoRemoved ? ` (nothing else of ${hub.repo} was cached: its folder went too)` : "";
  process.stdout.write(`removed ${what} from ${cacheDir}: ${formatBytes(removed.bytes)} freed${emptied}\n`);
  return 0;
}
