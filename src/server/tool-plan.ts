// A request's tools and how its reply is parsed (tool-calls.ts makes the plan; tool-grammars.ts
// constrains the reply by it), on their own, a leaf, so the grammar side does not import the
// module that imports it (no import cycle, type-only ones included;
// test/package/import-cycles.test.ts).
import type { Json } from "./fields.js";
import type { ToolParserName } from "./tool-parsers.js";

export interface ToolDefinition {
  name: string;
  description?: string;
  /** The parameters' JSON schema (an object schema; {"type": "object"} when the tool gives none). */
  parameters: Json;
}

/** What the reply needs: how to parse it. Null when tool_choice is "none" or no tools are given. */
export interface ToolPlan {
  parser: ToolParserName;
  tools: ToolDefinition[];
  choice: "auto" | "required" | { name: string };
  parallel: boolean;
}
