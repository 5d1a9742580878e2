/**
 * The Hugging Face hub's HTTP endpoints, as huggingface_hub calls them
 * (hf_api.py model_info, file_download.py get_hf_file_metadata):
 *
 *   GET  {endpoint}/api/models/{repo}/revision/{revision}  → { sha, siblings: [{ rfilename }] }
 *   HEAD {endpoint}/{repo}/resolve/{commit}/{path}         → X-Repo-Commit, ETag or X-Linked-Etag,
 *        X-Linked-Size / Content-Length; large (LFS) files answer 302 to a CDN, whose headers
 *        are read off the redirect itself (relative redirects, a renamed repo, are followed)
 *   GET  the same URL, following redirects, with Range: bytes=N- to resume
 *
 * Node's fetch only. Errors are HubErrors that say what to do: 401/403 (gated or
 * private: set HF_TOKEN), 404 (no such repo, revision or file), no network.
 */
import { ArgumentError } from "../../errors.js";
import type { HubSettings } from "./hub-settings.js";

/** Why a hub request failed. */
export type HubErrorKind = "auth" | "not-found" | "network" | "http" | "checksum" | "protocol" | "busy";

export class HubError extends Error {
  readonly kind: HubErrorKind;
  /** HTTP status, or null when no response came. */
  readonly status: number | null;
  constructor(kind: HubErrorKind, message: string, status: number | null = null) {
    super(message);
    this.name = "HubError";
    this.kind = kind;
    this.status = status;
  }
}

export interface RepoInfo {
  repo: string;
  /** The commit the revision points at (40 hex). */
  commit: string;
  /** Every file of the repository at that commit, repository-relative. */
  files: string[];
}

export interface FileMeta {
  path: string;
  /** sha256 (LFS) or git blob sha1 (64 or 40 lowercase hex): the blob's name and its checksum. */
  etag: string;
  /** Bytes. */
  size: number;
  /** Where the bytes are: the resolve URL, or the CDN location it redirects to. */
  url: string;
}

const ETAG_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const METADATA_TIMEOUT_MS = 30_000;

/** A repository path for a URL: each segment percent-encoded, the slashes kept. */
function urlPath(path: string): string {
  return path.split("/").map(encodeURIComponent).join("/");
}

export class HubClient {
  readonly #settings: HubSettings;

  constructor(settings: HubSettings) {
    this.#settings = settings;
  }

  get endpoint(): string {
    return this.#settings.endpoint;
  }

  /** The commit a revision points at and the repository's file list. */
  async repoInfo(repo: string, revision: string): Promise<RepoInfo> {
    const url = `${this.endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}`;
    const res = await this.#request(url, { method: "GET" }, { repo, revision }, METADATA_TIMEOUT_MS);
    let body: unknown;
    try {
      body = await res.json();
    } catch (e) {
      throw new HubError("protocol", `${url} did not answer JSON: ${(e as Error).message}`, res.status);
    }
    const b = body as { sha?: unknown; siblings?: unknown };
    if (typeof b.sha !== "string" || !/^[0-9a-f]{40}$/.test(b.sha) || !Array.isArray(b.siblings)) {
      throw new HubError("protocol", `${url} answered without a commit sha and a file list`, res.status);
    }
    const files = b.siblings.map((s: unknown) => (s as { rfilename?: unknown }).rfilename).filter((f): f is string => typeof f === "string" && isSafeRepoPath(f));
    return { repo, commit: b.sha, files };
  }

  /** A file's ETag (its checksum), size and download URL at a commit. */
  async fileMeta(repo: string, commit: string, path: string): Promise<FileMeta> {
    let url = `${this.endpoint}/${repo}/resolve/${commit}/${urlPath(path)}`;
    for (let hops = 0; ; hops++) {
      const res = await this.#request(url, { method: "HEAD", redirect: "manual", headers: { "Accept-Encoding": "identity" } }, { repo, revision: commit, path }, METADATA_TIMEOUT_MS);
      const location = res.headers.get("location");
      // huggingface_hub follows relative redirects only (a renamed repository); an absolute one goes to the CDN.
      const relativeRedirect = res.status >= 300 && res.status < 400 && location !== null && !/^[a-z][a-z0-9+.-]*:/i.test(location);
      if (relativeRedirect && hops < 5) {
        url = new URL(location, url).href;
        continue;
      }
      const raw = res.headers.get("x-linked-etag") ?? res.headers.get("etag");
      const etag = raw?.replace(/^W\//, "").replace(/"/g, "").trim().toLowerCase() ?? "";
      if (!ETAG_RE.test(etag)) throw new HubError("protocol", `${url}: expected an ETag of 40 or 64 hex digits (git sha1 or sha256), got ${JSON.stringify(raw)}`, res.status);
      const sizeHeader = res.headers.get("x-linked-size") ?? res.headers.get("content-length");
      const size = Number(sizeHeader);
      if (sizeHeader === null || !Number.isSafeInteger(size) || size < 0) throw new HubError("protocol", `${url}: expected a file size (X-Linked-Size or Content-Length), got ${JSON.stringify(sizeHeader)}`, res.status);
      const target = location !== null && res.status >= 300 && res.status < 400 ? new URL(location, url).href : url;
      return { path, etag, size, url: target };
    }
  }

  /** GET the bytes from `offset` on (a Range request when offset > 0). The caller reads the body. */
  async download(meta: FileMeta, offset: number, signal: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { "Accept-Encoding": "identity" };
    if (offset > 0) headers["Range"] = `bytes=${offset}-`;
    return this.#request(meta.url, { method: "GET", headers, signal }, { path: meta.path });
  }

  /** fetch with the token and user agent; a failure becomes a HubError that says what to do. */
  async #request(url: string, init: Omit<RequestInit, "headers"> & { headers?: Record<string, string> }, what: { repo?: string; revision?: string; path?: string }, timeoutMs?: number): Promise<Response> {
    const headers: Record<string, string> = { "User-Agent": "kvflash", ...init.headers };
    // The token goes to the hub only: fetch drops Authorization on a redirect to another origin (the CDN).
    if (this.#settings.token !== null && url.startsWith(this.endpoint)) headers["Authorization"] = `Bearer ${this.#settings.token}`;
    const signal = init.signal ?? (timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs));
    let res: Response;
    try {
      res = await fetch(url, { ...init, headers, ...(signal === undefined ? {} : { signal }) });
    } catch (e) {
      throw this.#networkError(url, e as Error);
    }
    if (res.ok || (res.status >= 300 && res.status < 400 && init.redirect === "manual")) return res;
    await res.body?.cancel();
    throw this.#statusError(res, url, what);
  }

  #networkError(url: string, e: Error): HubError {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    const why = e.name === "TimeoutError" ? "timed out" : (cause?.code ?? cause?.message ?? e.message);
    return new HubError(
      "network",
      `cannot reach the Hugging Face hub at ${this.endpoint} (${why}; ${url}). Check the network (or HF_ENDPOINT), ` +
        `or set HF_HUB_OFFLINE=1 to use only models already in the cache (${this.#settings.cacheDir})`,
    );
  }

  #statusError(res: Response, url: string, what: { repo?: string; revision?: string; path?: string }): HubError {
    const code = res.headers.get("x-error-code");
    const message = res.headers.get("x-error-message");
    const detail = `HTTP ${res.status}${code === null ? "" : ` ${code}`}${message === null ? "" : `: ${message}`}`;
    const repo = what.repo ?? "the repository";
    if (!url.startsWith(this.endpoint)) {
      // The CDN a large file redirects to: its signed URL may have expired.
      return new HubError("http", `downloading ${what.path ?? url} from ${new URL(url).origin} failed (${detail}); run the command again (it resumes)`, res.status);
    }
    if (res.status === 401 || res.status === 403) {
      const fix =
        this.#settings.token === null
          ? `If it is gated or private and you have access, create a token at ${this.endpoint}/settings/tokens and set it: export HF_TOKEN=hf_… (or run huggingface-cli login)`
          : `HF_TOKEN is set but was refused or lacks access: check the token, and for a gated model accept its terms at ${this.endpoint}/${repo}`;
      return new HubError("auth", `${repo} is gated, private or does not exist (${detail}). ${fix}`, res.status);
    }
    if (res.status === 404) {
      if (code === "RevisionNotFound") return new HubError("not-found", `${repo} has no revision ${JSON.stringify(what.revision)} (${detail}): use a branch, tag or commit hash of the repository (--revision)`, 404);
      if (code === "EntryNotFound" || (what.path !== undefined && code !== "RepoNotFound")) return new HubError("not-found", `${repo} has no file ${JSON.stringify(what.path)} at ${what.revision ?? "that revision"} (${detail})`, 404);
      return new HubError("not-found", `no model repository ${repo} at ${this.endpoint} (${detail}): check the org/name spelling`, 404);
    }
    return new HubError("http", `${url}: ${detail}`, res.status);
  }
}

/** A repository-relative path that stays inside the snapshot: no "..", no absolute path, no backslash, no empty segment. */
export function isSafeRepoPath(path: string): boolean {
  return path !== "" && !path.startsWith("/") && !path.includes("\\") && !path.includes("\0") && path.split("/").every((s) => s !== "" && s !== "." && s !== "..");
}

/** Throws unless `path` is a safe repository path (isSafeRepoPath). */
export function checkRepoPath(argument: string, path: string): void {
  if (!isSafeRepoPath(path)) throw new ArgumentError(argument, `must be a relative path inside the repository, got ${JSON.stringify(path)}`);
}
