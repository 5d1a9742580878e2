// The engine settings a caller gives (serve, the worker protocol), on their own, a leaf:
// engine-config.ts resolves them (one defaults table) and protocol.ts carries them to the
// worker, and neither imports the other for them (no import cycle, type-only ones included;
// test/package/import-cycles.test.ts).
import type { SpeculativeConfig } from "./speculative-config.js";

/** Engine settings (vLLM's names in camelCase). */
export interface EngineSettings {
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  maxWaitingRequests?: number;
  enablePrefixCaching?: boolean;
  /** Speculative decoding (vLLM's --speculative-config: its JSON object or text, or a resolved config). */
  speculativeConfig?: SpeculativeConfig | Record<string, unknown> | string;
}
