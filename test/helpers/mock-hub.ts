// A Hugging Face hub on 127.0.0.1 for tests (not a test file of its own): the
// endpoints kvflash's hub client calls, with the real hub's headers.
//
//   GET  /api/models/{org}/{name}/revision/{rev}   → { id, sha, siblings: [{ rfilename }] }
//   HEAD /{org}/{name}/resolve/{rev}/{path}        small files: 200, ETag = git blob sha1
//   GET  the same                                  LFS files (*.safetensors, *.gguf, > 1 MiB):
//                                                  302 → /cdn/{sha256} with X-Linked-Etag and
//                                                  X-Linked-Size; /cdn honours Range (206)
//   401 X-Error-Code GatedRepo without the repo's token; 404 RepoNotFound / RevisionNotFound / EntryNotFound
//
// Faults for the tests: cut a response after N bytes (socket destroyed), serve
// corrupted bytes, announce more bytes than are served (X-Linked-Size), serve a
// blob as a server that knows no sizes would (200, no Content-Length, Range
// ignored), and a log of every request (method, path, Range, Authorization).
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join, relative, sep } from "node:path";

export interface HubRequest {
  method: string;
  path: string;
  range: string | null;
  authorization: string | null;
}

interface StoredFile {
  bytes: Buffer;
  lfs: boolean;
  etag: string;
}

interface MockRepo {
  refs: Map<string, string>;
  commits: Map<string, Map<string, StoredFile>>;
  token: string | null;
}

const LFS_THRESHOLD = 1 << 20;

export const gitBlobSha1 = (bytes: Buffer): string => createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
export const sha256 = (bytes: Buffer): string => createHash("sha256").update(bytes).digest("hex");

/** Every file under `dir` (relative paths with "/") → its bytes. */
export function readTree(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.set(relative(dir, p).split(sep).join("/"), readFileSync(p));
    }
  };
  walk(dir);
  return out;
}

export class MockHub {
  readonly requests: HubRequest[] = [];
  /** sha256 → how many more responses for that blob to cut, and after how many bytes each. */
  readonly cuts = new Map<string, { times: number; afterBytes: number }>();
  /** sha256 / sha1 of files whose bytes are served with one byte flipped. */
  readonly corrupt = new Set<string>();
  /** sha256 of LFS files whose X-Linked-Size announces this many bytes more than the blob has. */
  readonly oversize = new Map<string, number>();
  /** sha256 of blobs the CDN serves with status 200, no Content-Length (chunked) and the Range header ignored. */
  readonly unsized = new Set<string>();
  readonly #repos = new Map<string, MockRepo>();
  readonly #blobs = new Map<string, Buffer>();
  readonly #server: Server;
  url = "";

  private constructor() {
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  static async start(): Promise<MockHub> {
    const hub = new MockHub();
    await new Promise<void>((done) => hub.#server.listen(0, "127.0.0.1", done));
    hub.url = `http://127.0.0.1:${(hub.#server.address() as AddressInfo).port}`;
    return hub;
  }

  /** Adds a commit of `files` to `repo` and points `refs` at it; returns the commit hash. */
  addCommit(repo: string, files: Map<string, Buffer>, refs: readonly string[] = ["main"]): string {
    const r = this.#repos.get(repo) ?? { refs: new Map(), commits: new Map(), token: null };
    this.#repos.set(repo, r);
    const tree = new Map<string, StoredFile>();
    const h = createHash("sha1").update(repo);
    for (const [path, bytes] of files) {
      const lfs = /\.(safetensors|gguf)$/.test(path) || bytes.length > LFS_THRESHOLD;
      const etag = lfs ? sha256(bytes) : gitBlobSha1(bytes);
      tree.set(path, { bytes, lfs, etag });
      if (lfs) this.#blobs.set(etag, bytes);
      h.update(path).update(etag);
    }
    const commit = h.update(String(r.commits.size)).digest("hex");
    r.commits.set(commit, tree);
    for (const ref of refs) r.refs.set(ref, commit);
    return commit;
  }

  /** The repository answers 401 unless the request carries `Authorization: Bearer <token>`. */
  gate(repo: string, token: string): void {
    this.#repos.get(repo)!.token = token;
  }

  /** The stored file's ETag (sha256 for LFS, git sha1 otherwise). */
  etag(repo: string, commit: string, path: string): string {
    return this.#repos.get(repo)!.commits.get(commit)!.get(path)!.etag;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((done) => this.#server.close(() => done()));
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", this.url);
    const path = decodeURIComponent(url.pathname);
    this.requests.push({ method: req.method ?? "", path, range: req.headers.range ?? null, authorization: req.headers.authorization ?? null });
    const fail = (status: number, code: string): void => {
      res.writeHead(status, { "X-Error-Code": code, "X-Error-Message": code, "Content-Type": "application/json" });
      res.end(req.method === "HEAD" ? undefined : JSON.stringify({ error: code }));
    };
    if (path.startsWith("/cdn/")) return this.#sendBytes(req, res, path.slice(5), this.#blobs.get(path.slice(5)));

    const api = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/(.+)$/.exec(path);
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(path);
    const repoId = api?.[1] ?? resolve?.[1];
    const repo = repoId === undefined ? undefined : this.#repos.get(repoId);
    if (repo === undefined) return fail(repoId === undefined ? 404 : 401, "RepoNotFound"); // the hub answers 401 for unknown repos too
    if (repo.token !== null && req.headers.authorization !== `Bearer ${repo.token}`) return fail(401, "GatedRepo");
    const rev = api?.[2] ?? resolve![2]!;
    const commit = repo.commits.has(rev) ? rev : repo.refs.get(rev);
    if (commit === undefined) return fail(404, "RevisionNotFound");
    const tree = repo.commits.get(commit)!;
    if (api) {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ id: repoId, sha: commit, siblings: [...tree.keys()].map((rfilename) => ({ rfilename })) }));
      return;
    }
    const file = tree.get(resolve![3]!);
    if (file === undefined) return fail(404, "EntryNotFound");
    if (file.lfs) {
      res.writeHead(302, {
        Location: `${this.url}/cdn/${file.etag}`,
        "X-Repo-Commit": commit,
        "X-Linked-Etag": `"${file.etag}"`,
        "X-Linked-Size": String(file.bytes.length + (this.oversize.get(file.etag) ?? 0)),
        ETag: `"${gitBlobSha1(Buffer.from("lfs pointer"))}"`,
      });
      res.end();
      return;
    }
    res.setHeader("X-Repo-Commit", commit);
    res.setHeader("ETag", `"${file.etag}"`);
    this.#sendBytes(req, res, file.etag, file.bytes);
  }

  #sendBytes(req: IncomingMessage, res: ServerResponse, etag: string, stored: Buffer | undefined): void {
    if (stored === undefined) {
      res.writeHead(404);
      res.end();
      return;
    }
    let bytes = stored;
    if (this.corrupt.has(etag)) {
      bytes = Buffer.from(stored);
      bytes[bytes.length >> 1] = bytes[bytes.length >> 1]! ^ 0x5a;
    }
    if (this.unsized.has(etag)) {
      res.writeHead(200, { "Content-Type": "application/octet-stream" });
      res.end(req.method === "HEAD" ? undefined : bytes);
      return;
    }
    let start = 0;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
    if (range !== null) start = Number(range[1]);
    if (start > bytes.length) {
      res.writeHead(416, { "Content-Range": `bytes */${bytes.length}` });
      res.end();
      return;
    }
    const body = bytes.subarray(start);
    res.writeHead(range !== null ? 206 : 200, {
      "Content-Length": String(body.length),
      "Content-Type": "application/octet-stream",
      ...(range !== null ? { "Content-Range": `bytes ${start}-${bytes.length - 1}/${bytes.length}` } : {}),
    });
    if (req.method === "HEAD") {
      res.end();
      return;
    }
    const cut = this.cuts.get(etag);
    if (cut !== undefined && cut.times > 0 && body.length > cut.afterBytes) {
      cut.times--;
      res.write(body.subarray(0, cut.afterBytes), () => setTimeout(() => res.socket?.destroy(), 20));
      return;
    }
    res.end(body);
  }
}
