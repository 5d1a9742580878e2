/**
 * Where the Hugging Face hub and its cache are, read once from the
 * environment at the edge, with huggingface_hub's variable names and defaults
 * (huggingface_hub/constants.py), so kvflash shares one cache with
 * huggingface-cli, transformers and vLLM:
 *
 *   HF_HUB_CACHE    the cache (default $HF_HOME/hub)
 *   HF_HOME         default ~/.cache/huggingface (or $XDG_CACHE_HOME/huggingface)
 *   HF_ENDPOINT     default https://huggingface.co
 *   HF_TOKEN        a user access token; else the file $HF_TOKEN_PATH or $HF_HOME/token
 *                   (where `huggingface-cli login` saves it)
 *   HF_HUB_OFFLINE  1 / true / yes / on: never touch the network, use the cache only
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export const DEFAULT_ENDPOINT = "https://huggingface.co";

export interface HubSettings {
  /** The hub cache directory (models--org--name folders live here). */
  cacheDir: string;
  /** Base URL of the hub, no trailing slash. */
  endpoint: string;
  /** Bearer token, or null for anonymous requests. */
  token: string | null;
  /** Never make a request; resolve from the cache only. */
  offline: boolean;
}

/** True for huggingface_hub's truthy spellings ("1", "true", "yes", "on", any case). */
export function envFlag(value: string | undefined): boolean {
  return value !== undefined && ["1", "true", "yes", "on"].includes(value.trim().toLowerCase());
}

export function hubSettings(env: NodeJS.ProcessEnv = process.env): HubSettings {
  const nonEmpty = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === "" ? undefined : v;
  };
  const hfHome = nonEmpty("HF_HOME") ?? join(nonEmpty("XDG_CACHE_HOME") ?? join(homedir(), ".cache"), "huggingface");
  const cacheDir = nonEmpty("HF_HUB_CACHE") ?? nonEmpty("HUGGINGFACE_HUB_CACHE") ?? join(hfHome, "hub");
  const endpoint = (nonEmpty("HF_ENDPOINT") ?? DEFAULT_ENDPOINT).replace(/\/+$/, "");
  let token = nonEmpty("HF_TOKEN") ?? nonEmpty("HUGGING_FACE_HUB_TOKEN") ?? null;
  if (token === null) {
    const tokenPath = nonEmpty("HF_TOKEN_PATH") ?? join(hfHome, "token");
    if (existsSync(tokenPath)) {
      const saved = readFileSync(tokenPath, "utf8").trim();
      if (saved !== "") token = saved;
    }
  }
  return { cacheDir, endpoint, token: token?.trim() ?? null, offline: envFlag(env["HF_HUB_OFFLINE"]) };
}
