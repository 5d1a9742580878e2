/**
 * Reads a server-sent event stream as the server writes it (server/sse.ts):
 * `data: {json}\n\n` per event, `data: [DONE]\n\n` at the end. Yields each
 * event's JSON. An `{ error }` event (a generation that failed mid-stream)
 * is thrown as an LLMError with status 500, as the openai client does.
 */
import { LLMError } from "./llm-error.js";

export async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<unknown> {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const bytes of body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = event
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5))
        .join("\n");
      if (data === "") continue;
      if (data === "[DONE]") return;
      const json = JSON.parse(data) as { error?: unknown };
      if (typeof json.error === "object" && json.error !== null) throw new LLMError(500, json.error);
      yield json;
    }
  }
}
