/**
 * A request's work, dropped once its client is gone (issue #32 item 3). The
 * server gives each request an AbortSignal that fires when the connection
 * closes before the answer was sent (server.ts); a handler runs each phase
 * — parsing a big body in a worker (body.ts; a drop mid-upload fails the
 * read itself), rendering, tokenizing, checking the grammar — through
 * `whileConnected`, so a client that leaves mid-phase ends
 * the handler at once with a ClientGoneError (one rate-limited log line, no
 * answer), and nothing of its request reaches the engine. Work already
 * handed to a worker finishes there and its result is dropped; a request
 * already in the engine is aborted (routes/run-generation.ts).
 */
import { ClientGoneError } from "./errors.js";

/** Throws the signal's ClientGoneError if the client already left. */
export function throwIfGone(signal: AbortSignal): void {
  if (signal.aborted) throw goneError(signal);
}

/** `work`'s value, or a ClientGoneError as soon as the client leaves (then `work`'s own outcome is ignored). */
export function whileConnected<T>(signal: AbortSignal, work: Promise<T>): Promise<T> {
  if (signal.aborted) {
    work.catch(() => {});
    return Promise.reject(goneError(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onGone = (): void => {
      work.catch(() => {});
      reject(goneError(signal));
    };
    signal.addEventListener("abort", onGone, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener("abort", onGone);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onGone);
        reject(e);
      },
    );
  });
}

function goneError(signal: AbortSignal): ClientGoneError {
  return signal.reason instanceof ClientGoneError ? signal.reason : new ClientGoneError("the client went away before its answer was sent");
}
