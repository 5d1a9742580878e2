/**
 * A draft model for the `spec` bench made from trained weights at hand: the
 * default model's first `layers` decoder layers with its own embedding, final
 * norm and head (an early exit, as LayerSkip's and Draft & Verify's
 * self-speculative drafts, here without the early-exit training those papers
 * add). Written as a Hugging Face directory: config.json with
 * num_hidden_layers = `layers`, the tokenizer and generation files copied,
 * and a model.safetensors holding only the tensors that config names.
 * Bench-only: the product never builds models.
 */
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Writes the truncated copy of the model directory `dir` (one model.safetensors) and returns its path. */
export function earlyExitDraftDir(dir: string, layers: number): string {
  const out = mkdtempSync(join(tmpdir(), `kvflash-early-exit-${layers}-`));
  for (const f of readdirSync(dir)) if (f.endsWith(".json") && f !== "config.json") copyFileSync(join(dir, f), join(out, f));
  const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
  writeFileSync(join(out, "config.json"), JSON.stringify({ ...config, num_hidden_layers: layers }, null, 1));
  // safetensors: u64 header length, JSON header {name: {dtype, shape, data_offsets: [begin, end]}}, data.
  const file = readFileSync(join(dir, "model.safetensors"));
  const n = Number(file.readBigUInt64LE(0));
  const header = JSON.parse(file.subarray(8, 8 + n).toString("utf8")) as Record<string, { data_offsets: [number, number] } & Record<string, unknown>>;
  const data = file.subarray(8 + n);
  const kept: Record<string, unknown> = {};
  const chunks: Buffer[] = [];
  let offset = 0;
  for (const [name, t] of Object.entries(header)) {
    const layer = /^model\.layers\.(\d+)\./.exec(name);
    if (name === "__metadata__") kept[name] = t;
    if (name === "__metadata__" || (layer !== null && Number(layer[1]) >= layers)) continue;
    const [begin, end] = t.data_offsets;
    chunks.push(data.subarray(begin, end));
    kept[name] = { ...t, data_offsets: [offset, offset + end - begin] };
    offset += end - begin;
  }
  let json = JSON.stringify(kept);
  json += " ".repeat((8 - (json.length % 8)) % 8);
  const head = Buffer.alloc(8);
  head.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  writeFileSync(join(out, "model.safetensors"), Buffer.concat([head, Buffer.from(json, "utf8"), ...chunks]));
  return out;
}
