/**
 * Rows of the CPU's q8 / q4 / q5 weight tiles as plain int8 codes and f32 scales:
 * what the WebGPU runner uploads for q8 and q5 (gpu-weights.ts), and what
 * quant-blocks.ts repacks into ggml's Q4_0 blocks. A leaf, so neither imports the other.
 */
/**
 * Codes [n, blocks·32] and scales [n, blocks] of rows [r0, r0 + n) of a q8
 * q4 or q5 Weight, from its tiles (assembly/linalg/layout.ts): tile (g, b) of
 * 8 rows × 32 columns at (g·blocks + b)·tileBytes; half h = rows 8g + 4h … + 3.
 *   q8  half at 144h: column 2j + s of lane r at 8j + 2r + s (int8); scale r at 128 + 4r
 *   q4  half at 80h: u16 at 16m + 4r + 2s, nibble k is column 2·(4m + k) + s (4-bit
 *       two's complement); scale r at 64 + 4r
 *   q5  half at 112h: u16 at 16u + 4r + 2s; u < 5: bits 5f … 5f + 4 are column
 *       2·(3u + f) + s, u = 5: bits 0 … 4 column 30 + s (ggml's q ∈ [0, 31], code q − 16);
 *       scale r at 96 + 4r
 */
const TILE_GEOMETRY = {
  q8: { tileBytes: 288, halfBytes: 144, scaleAt: 128 },
  q4: { tileBytes: 160, halfBytes: 80, scaleAt: 64 },
  q5: { tileBytes: 224, halfBytes: 112, scaleAt: 96 },
} as const;

export function unpackQ8Rows(tiles: Uint8Array, format: "q8" | "q4" | "q5", blocks: number, r0: number, n: number): { codes: Int8Array; scales: Float32Array } {
  const { tileBytes, halfBytes, scaleAt } = TILE_GEOMETRY[format];
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
      } else if (format === "q5") {
        for (let c = 0; c < 32; c++) {
          const j = c >> 1, u = j < 15 ? Math.floor(j / 3) : 5, f = j < 15 ? j % 3 : 0;
          const word = view.getUint16(half + 16 * u + 4 * r + 2 * (c & 1), true);
          codes[dst + c] = ((word >> (5 * f)) & 31) - 16;
        }
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
