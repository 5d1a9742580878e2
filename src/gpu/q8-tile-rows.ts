/**
 * Rows of the CPU's q8 / q4 weight tiles as plain int8 codes and f32 scales:
 * what the WebGPU runner uploads for those formats (gpu-weights.ts), and what
 * quant-blocks.ts repacks into ggml's Q4_0 blocks. A leaf, so neither imports the other.
 */
/**
 * Codes [n, blocks·32] and scales [n, blocks] of rows [r0, r0 + n) of a q8
 * or q4 Weight, from its tiles (assembly/linalg/layout.ts): tile (g, b) of
 * 8 rows × 32 columns at (g·blocks + b)·tileBytes; half h = rows 8g + 4h … + 3.
 *   q8  half at 144h: column 2j + s of lane r at 8j + 2r + s (int8); scale r at 128 + 4r
 *   q4  half at 80h: u16 at 16m + 4r + 2s, nibble k is column 2·(4m + k) + s (4-bit
 *       two's complement); scale r at 64 + 4r
 */
export function unpackQ8Rows(tiles: Uint8Array, format: "q8" | "q4", blocks: number, r0: number, n: number): { codes: Int8Array; scales: Float32Array } {
  const tileBytes = format === "q8" ? 288 : 160;
  const halfBytes = format === "q8" ? 144 : 80;
  const scaleAt = format === "q8" ? 128 : 64;
  const view = new DataView(tiles.buffer, tiles.byteOffset, tiles.byteLength);
  const codes = new Int8Array(n * blocks * 32);
  const scales = new Float32Array(n * blocks);
  for (let i = 0; i < n; i++) {
    const row = r0 + i;
    const g = row >> 3;
    const h = (row >> 2) & 1;
    const r = row & 3;
    for (let b = 0; b < blocks; b++) {
      const half = (g * blocks + b) * tileBytes + h * halfBytes;
      scales[i * blocks + b] = view.getFloat32(half + scaleAt + 4 * r, true);
      const dst = i * blocks * 32 + b * 32;
      if (format === "q8") {
        for (let c = 0; c < 32; c++) codes[dst + c] = view.getInt8(half + 8 * (c >> 1) + 2 * r + (c & 1));
      } else {
        for (let m = 0; m < 4; m++) {
          for (let s = 0; s < 2; s++) {
            const u = view.getUint16(half + 16 * m + 4 * r + 2 * s, true);
            for (let k = 0; k < 4; k++) {
              const nib = (u >> (4 * k)) & 15;
              codes[dst + 2 * (4 * m + k) + s] = nib >= 8 ? nib - 16 : nib;
            }
          }
        }
      }
    }
  }
  return { codes, scales };
}
