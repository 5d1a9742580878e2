/**
 * The web chat page: a fixed set of files from src/server/public (no path
 * from the URL ever reaches the file system), read once and kept.
 */
import { readFileSync } from "node:fs";
import type { Handler } from "../context.js";

const PUBLIC_DIR = new URL("../../../../src/server/public/", import.meta.url);

const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
};

/** URL path → file name in public/. */
export const PUBLIC_FILES: Readonly<Record<string, string>> = {
  "/": "index.html",
  "/index.html": "index.html",
  "/chat.js": "chat.js",
  "/chat.css": "chat.css",
};

const cache = new Map<string, Buffer>();

export const staticFile: Handler = (req, res) => {
  const path = new URL(req.url ?? "/", "http://x").pathname;
  const name = PUBLIC_FILES[path]!;
  let body = cache.get(name);
  if (body === undefined) {
    body = readFileSync(new URL(name, PUBLIC_DIR));
    cache.set(name, body);
  }
  res.writeHead(200, {
    "content-type": TYPES[name.split(".").pop()!] ?? "application/octet-stream",
    "content-length": body.length,
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
  });
  res.end(req.method === "HEAD" ? undefined : body);
};
