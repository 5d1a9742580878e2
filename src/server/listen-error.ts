/**
 * A failed listen (Node's net.Server "error" event) as an error a user can
 * act on: which address, what went wrong, and which flag to change. The
 * server (start-server.ts) stops everything it started and throws it; the CLI
 * prints it and exits 1.
 */
import { ArgumentError } from "../errors.js";

/** A failed listen as an error that says which address, what went wrong and what to do (the flag to change). */
export function listenError(e: NodeJS.ErrnoException, host: string, port: number): ArgumentError {
  const where = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  switch (e.code) {
    case "EADDRINUSE":
      return new ArgumentError("--port", `${port}: ${where} is already in use (another server is listening there); pick another --port, or --port 0 for a free one`);
    case "EACCES":
      return new ArgumentError("--port", `${port}: permission denied listening on ${where} (ports below 1024 need privileges); pick a port ≥ 1024`);
    case "EADDRNOTAVAIL":
      return new ArgumentError("--host", `${JSON.stringify(host)} is not an address of this machine (cannot listen on ${where}); use 127.0.0.1, or 0.0.0.0 for every interface`);
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return new ArgumentError("--host", `${JSON.stringify(host)} does not resolve to an address (${e.code}); use an IP address such as 127.0.0.1 or 0.0.0.0`);
    default:
      return new ArgumentError("--port", `${port}: cannot listen on ${where}: ${e.message}`);
  }
}

