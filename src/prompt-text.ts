/**
 * How much prompt text an OpenAI request body carries, counted on the parsed
 * body before anything is rendered or tokenized: each text prompt of
 * /v1/completions and /tokenize, and the message content of a chat (all
 * messages together) or of the Responses API's input items with its
 * instructions. The server refuses a body whose text cannot fit the
 * context (server/prompt-length.ts); a tokenizer worker counts it right
 * after parsing a big body, so a 15 MB prompt never comes back to the HTTP
 * thread (tokenizer-worker.ts).
 */

/** Characters of message content a chat request carries (string content and text parts). */
export function contentChars(messages: readonly unknown[]): number {
  let chars = 0;
  for (const m of messages) {
    const content = typeof m === "object" && m !== null ? (m as { content?: unknown }).content : undefined;
    if (typeof content === "string") chars += content.length;
    else if (Array.isArray(content)) {
      for (const part of content) {
        const text = typeof part === "object" && part !== null ? (part as { text?: unknown }).text : undefined;
        if (typeof text === "string") chars += text.length;
      }
    }
  }
  return chars;
}

/** Characters of a Responses API request's item list (message content, function_call_output output) and instructions; 0 for any other `input`. */
function inputItemChars(input: unknown, instructions: unknown): number {
  if (!Array.isArray(input) || typeof input[0] !== "object" || input[0] === null || Array.isArray(input[0])) return 0;
  let chars = contentChars(input) + (typeof instructions === "string" ? instructions.length : 0);
  for (const item of input) {
    const output = typeof item === "object" && item !== null ? (item as { output?: unknown }).output : undefined;
    if (typeof output === "string") chars += output.length;
  }
  return chars;
}

/** A prompt text longer than the limit: the request field it is in (as the routes name it) and its characters. */
export interface LongPromptText {
  param: string;
  chars: number;
}

/**
 * The first prompt text in `body` of more than `maxChars` characters: `prompt`
 * (a string, or `prompt[i]` in a list of several), then `messages` (their
 * content together), then a Responses API `input` item list (with its
 * instructions); null when every one is within the limit.
 */
export function findLongPromptText(body: unknown, maxChars: number): LongPromptText | null {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return null;
  const { prompt, messages, input, instructions } = body as { prompt?: unknown; messages?: unknown; input?: unknown; instructions?: unknown };
  if (typeof prompt === "string" && prompt.length > maxChars) return { param: "prompt", chars: prompt.length };
  if (Array.isArray(prompt)) {
    for (let i = 0; i < prompt.length; i++) {
      const p: unknown = prompt[i];
      if (typeof p === "string" && p.length > maxChars) return { param: prompt.length === 1 ? "prompt" : `prompt[${i}]`, chars: p.length };
    }
  }
  if (Array.isArray(messages)) {
    const chars = contentChars(messages);
    if (chars > maxChars) return { param: "messages", chars };
  }
  const itemChars = inputItemChars(input, instructions);
  if (itemChars > maxChars) return { param: "input", chars: itemChars };
  return null;
}
