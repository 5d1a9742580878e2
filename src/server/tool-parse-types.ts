// What the tool-call parsers take and give (tool-parsers.ts picks one; tool-parsers-json.ts and
// tool-parser-qwen3-coder.ts are bodies it calls), on their own, a leaf: the bodies import these
// and not the module that imports them (no import cycle, type-only ones included;
// test/package/import-cycles.test.ts).

/** What a parser may need of a tool: its name and its parameters' JSON schema (qwen3_coder types its values by it). */
export interface ToolSchema {
  name: string;
  parameters: unknown;
}

export interface ParsedToolCall {
  name: string;
  /** The arguments' JSON text so far (all of it once `done`). */
  arguments: string;
  /** The call's text is complete and parses. */
  done: boolean;
}

export interface ParsedOutput {
  content: string;
  calls: ParsedToolCall[];
}
