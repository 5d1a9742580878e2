/**
 * Block hashes for automatic prefix caching (vLLM v1's `hash_block_tokens`).
 *
 * A full block's hash chains its parent's hash with its own token ids and
 * optional extra keys (e.g. a cache salt), so equal hashes mean equal whole
 * prefixes, not merely equal blocks:
 *
 *   h_0 = SHA-256(ROOT ‖ n ‖ tokens[0..bs) ‖ extra_0)
 *   h_i = SHA-256(h_{i−1} ‖ n ‖ tokens[i·bs..(i+1)·bs) ‖ extra_i)
 *
 * with n the token count (uint32 LE), each token an int32 LE, and the extra
 * keys JSON-encoded. The encoding is unambiguous, so two different prefixes
 * share a hash only on a SHA-256 collision: for N distinct blocks ever hashed
 * the chance of any is below N²/2²⁵⁷ (≈ 10⁻⁵⁸ for N = 10¹⁰). vLLM chose
 * SHA-256 for the same reason: a weaker hash lets one user's prompt read
 * another's KV.
 */
import { createHash } from "node:crypto";

/** The parent of a sequence's first block. Fixed, so hashes are stable across processes. */
export const ROOT_BLOCK_HASH: string = createHash("sha256").update("kvflash prefix cache v1").digest("hex");

/**
 * The hash of the block `tokenIds[start, end)` whose prefix hashes to `parent`:
 * 64 hex digits. Token ids are integers in [0, 2³¹) (checked by Request).
 */
export function hashBlockTokens(
  parent: string,
  tokenIds: ArrayLike<number>,
  start: number,
  end: number,
  extraKeys?: readonly (string | number)[],
): string {
  const buf = Buffer.allocUnsafe(4 + 4 * (end - start));
  buf.writeUInt32LE(end - start, 0);
  for (let i = start; i < end; i++) buf.writeInt32LE(tokenIds[i]!, 4 + 4 * (i - start));
  const h = createHash("sha256").update(parent, "hex").update(buf);
  if (extraKeys !== undefined && extraKeys.length > 0) h.update(JSON.stringify(extraKeys));
  return h.digest("hex");
}
