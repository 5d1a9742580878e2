/**
 * The web chat page: a fixed table of files (no path from the URL ever
 * reaches the file system), read once and kept. The page's own files come
 * from src/server/public, which the npm package ships ("files" in
 * package.json); the markdown parser and the sanitizer are the browser
 * builds of the `marked` and `dompurify` dependencies, served from wherever
 * Node resolves them (no CDN).
 */
import { readFileSync } from "node:fs";
import type { Handler } from "../context.js";
import { HttpError } from "../errors.js";

/** From dist/src/server/routes/ to the package root's src/server/public/ (the same in a checkout and an installed package). */
const PUBLIC_DIR = new URL("../../../../src/server/public/", import.meta.url);

const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  mjs: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  svg: "image/svg+xml",
};

interface PublicFile {
  /** What a missing file is called in the 500: relative to the package, never an absolute path. */
  name: string;
  /** Resolved on first request, so a broken installation still starts and names the file. */
  locate(): URL;
}

const page = (file: string): PublicFile => ({ name: `src/server/public/${file}`, locate: () => new URL(file, PUBLIC_DIR) });

/** A dependency's ES module build, resolved as `import` would (its package.json "exports"). */
const dependency = (specifier: string, file: string): PublicFile => ({ name: `${specifier} (${file})`, locate: () => new URL(import.meta.resolve(specifier)) });

/** URL path → file. server.ts routes every key here. */
export const PUBLIC_FILES: Readonly<Record<string, PublicFile>> = {
  "/": page("index.html"),
  "/index.html": page("index.html"),
  "/chat.js": page("chat.js"),
  "/chat.css": page("chat.css"),
  "/favicon.svg": page("favicon.svg"),
  "/favicon.ico": page("favicon.svg"),
  "/vendor/marked.esm.js": dependency("marked", "lib/marked.esm.js"),
  "/vendor/purify.es.mjs": dependency("dompurify", "dist/purify.es.mjs"),
};

const cache = new Map<string, { body: Buffer; type: string }>();

function read(file: PublicFile): { body: Buffer; type: string } {
  let entry = cache.get(file.name);
  if (entry === undefined) {
    let url: URL;
    let body: Buffer;
    try {
      url = file.locate();
      body = readFileSync(url);
    } catch {
      throw new HttpError(500, `The web page's file ${file.name} is missing from this kvflash installation.`);
    }
    const ext = url.pathname.slice(url.pathname.lastIndexOf(".") + 1);
    entry = { body, type: TYPES[ext] ?? "application/octet-stream" };
    cache.set(file.name, entry);
  }
  return entry;
}

export const staticFile: Handler = (req, res) => {
  const path = new URL(req.url ?? "/", "http://x").pathname;
  const file = PUBLIC_FILES[path];
  if (file === undefined) throw new HttpError(404, `No page at ${path.slice(0, 100)}.`);
  const { body, type } = read(file);
  res.writeHead(200, {
    "content-type": type,
    "content-length": body.length,
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
  });
  res.end(req.method === "HEAD" ? undefined : body);
};
