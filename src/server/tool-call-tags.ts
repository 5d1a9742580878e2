/**
 * The `<tool_call>…</tool_call>` spans of a reply, as the Hermes and Qwen3-Coder
 * formats both wrap their calls: text outside the spans is content, each span's
 * body goes to the format's own parser. While streaming (`final` false) a
 * partial opening tag at the end is held back; an unclosed span at the end is a
 * call cut short, not text.
 */
import { partialTagAtEnd } from "./partial-text.js";

export const TOOL_CALL_OPEN = "<tool_call>";
export const TOOL_CALL_CLOSE = "</tool_call>";

/** `parseBody(body, closed)` gives the span's call, or null to keep the span as text. */
export function taggedToolCalls<T>(text: string, final: boolean, parseBody: (body: string, closed: boolean) => T | null): { content: string; calls: T[] } {
  const calls: T[] = [];
  let content = "";
  let at = 0;
  for (;;) {
    const open = text.indexOf(TOOL_CALL_OPEN, at);
    if (open < 0) {
      const rest = text.slice(at);
      content += final ? rest : rest.slice(0, rest.length - partialTagAtEnd(rest, TOOL_CALL_OPEN));
      break;
    }
    content += text.slice(at, open);
    const close = text.indexOf(TOOL_CALL_CLOSE, open + TOOL_CALL_OPEN.length);
    const call = parseBody(text.slice(open + TOOL_CALL_OPEN.length, close < 0 ? undefined : close), close >= 0);
    if (call !== null) calls.push(call);
    else if (close >= 0 || final) content += text.slice(open, close < 0 ? undefined : close + TOOL_CALL_CLOSE.length);
    if (close < 0) break;
    at = close + TOOL_CALL_CLOSE.length;
  }
  return { content, calls };
}
