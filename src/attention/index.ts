// The attention operators (../shared/ARCHITECTURE.md, "Attention semantics").
export type { AttentionLayout, AttentionOptions, AttentionResult } from "./types.js";
export { type FlashAttentionOptions, flashAttention } from "./flash-attention.js";
export { type IncreFlashAttentionOptions, increFlashAttention } from "./incre-flash-attention.js";
export { AttentionPlan, type AttentionPlanOptions, MAX_DECODE_QLEN } from "./plan.js";
export { type MergeStatesOptions, mergeStates } from "./merge-states.js";
export { type ReferenceResult, referenceFlashAttention, referenceIncreFlashAttention } from "./reference/attention.js";
export { referenceMergeStates } from "./reference/merge-states.js";
