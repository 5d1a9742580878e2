// The dtype codecs: exact round trips over every code, ties to even, the OCP
// FP8 NaN/Inf/saturation rules, and the kernels' decode/encode path held to the
// TypeScript codec bit for bit.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type CodedFloatDType, DTYPE_CODE, type Runtime, createRuntime, decodeToF32Bits, decodeValue, encodeValue } from "../../src/ops-entry.js";

const FORMATS: { dtype: CodedFloatDType; codes: number; nan: number; max: number; maxCode: number }[] = [
  { dtype: "f16", codes: 1 << 16, nan: 0x7e00, max: 65504, maxCode: 0x7bff },
  { dtype: "bf16", codes: 1 << 16, nan: 0x7fc0, max: 3.3895313892515355e38, maxCode: 0x7f7f },
  { dtype: "fp8e4m3", codes: 256, nan: 0x7f, max: 448, maxCode: 0x7e },
  { dtype: "fp8e5m2", codes: 256, nan: 0x7e, max: 57344, maxCode: 0x7b },
];

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const bitsOf = (x: number): number => ((f32[0] = x), u32[0]!);

describe("TypeScript codecs", () => {
  for (const f of FORMATS) {
    test(`${f.dtype}: every non-NaN code round-trips exactly; NaN codes decode to NaN and encode canonically`, () => {
      let nans = 0;
      for (let code = 0; code < f.codes; code++) {
        const v = decodeValue(f.dtype, code);
        if (Number.isNaN(v)) {
          nans++;
          assert.equal(encodeValue(f.dtype, v), f.nan);
          continue;
        }
        assert.equal(encodeValue(f.dtype, v), code, `code 0x${code.toString(16)} → ${v}`);
      }
      const expectedNans = { f16: 2 * 1023, bf16: 2 * 127, fp8e4m3: 2, fp8e5m2: 6 }[f.dtype];
      assert.equal(nans, expectedNans);
    });

    test(`${f.dtype}: a value halfway between two codes rounds to the even code`, () => {
      let checked = 0;
      for (let code = 0; code < f.maxCode; code++) {
        const lo = decodeValue(f.dtype, code);
        const hi = decodeValue(f.dtype, code + 1);
        const mid = (lo + hi) / 2; // exact in float64 for all four formats
        const even = code % 2 === 0 ? code : code + 1;
        assert.equal(encodeValue(f.dtype, mid), even, `midpoint of 0x${code.toString(16)} and next`);
        assert.equal(encodeValue(f.dtype, -mid), even | (f.codes >> 1), "negative midpoint");
        // Just off the midpoint, rounding goes to the nearer code.
        assert.equal(encodeValue(f.dtype, mid - (hi - lo) / 8), code);
        assert.equal(encodeValue(f.dtype, mid + (hi - lo) / 8), code + 1);
        checked++;
      }
      assert.ok(checked > 100);
    });
  }

  test("f16, bf16 and e5m2 overflow to Inf; e4m3fn overflows to NaN (OCP non-saturating)", () => {
    assert.equal(encodeValue("f16", 65519.99), 0x7bff);
    assert.equal(encodeValue("f16", 65520), 0x7c00); // tie with 65536 → even → Inf
    assert.equal(encodeValue("f16", -1e6), 0xfc00);
    assert.equal(encodeValue("f16", Infinity), 0x7c00);
    assert.equal(encodeValue("bf16", 3.4e38), 0x7f80);
    assert.equal(encodeValue("bf16", -Infinity), 0xff80);
    assert.equal(encodeValue("fp8e5m2", 61440), 0x7c); // tie between 57344 (odd) and 65536 → Inf
    assert.equal(encodeValue("fp8e5m2", 61439), 0x7b);
    assert.equal(encodeValue("fp8e5m2", -Infinity), 0xfc);
    assert.equal(encodeValue("fp8e4m3", 464), 0x7e); // tie between 448 (even) and 480 → 448
    assert.equal(encodeValue("fp8e4m3", 464.01), 0x7f); // beyond: NaN, E4M3FN has no Inf
    assert.equal(encodeValue("fp8e4m3", -1000), 0xff);
    assert.equal(encodeValue("fp8e4m3", Infinity), 0x7f);
  });

  test("saturating fp8 clamps overflow and ±Inf to ±max finite; NaN stays NaN", () => {
    for (const f of FORMATS.filter((x) => x.dtype.startsWith("fp8"))) {
      assert.equal(encodeValue(f.dtype, 1e9, { saturate: true }), f.maxCode);
      assert.equal(encodeValue(f.dtype, -1e9, { saturate: true }), f.maxCode | 0x80);
      assert.equal(encodeValue(f.dtype, Infinity, { saturate: true }), f.maxCode);
      assert.equal(encodeValue(f.dtype, -Infinity, { saturate: true }), f.maxCode | 0x80);
      assert.equal(encodeValue(f.dtype, NaN, { saturate: true }), f.nan);
      assert.equal(decodeValue(f.dtype, f.maxCode), f.max);
    }
  });

  test("signed zeros and subnormals", () => {
    assert.equal(encodeValue("f16", -0), 0x8000);
    assert.equal(encodeValue("f16", 2 ** -24), 0x0001);
    assert.equal(encodeValue("f16", 2 ** -25), 0x0000); // tie with 0 → even
    assert.equal(encodeValue("f16", 2 ** -25 * 3), 0x0002); // 1.5 quanta → 2 (even)
    assert.equal(encodeValue("fp8e4m3", 2 ** -9), 0x01);
    assert.equal(encodeValue("fp8e4m3", -(2 ** -10)), 0x80);
    assert.equal(decodeValue("fp8e5m2", 0x01), 2 ** -16);
    assert.equal(decodeValue("bf16", 0x0001), 2 ** -133);
  });

  test("int8 rounds half to even and saturates", () => {
    assert.deepEqual([0.5, 1.5, 2.5, -0.5, -1.5, 126.6, 1000, -1000, NaN].map((x) => encodeValue("int8", x)), [0, 2, 2, 0, -2, 127, 127, -128, 0]);
  });
});

describe("kernel codecs match the TypeScript codecs bit for bit", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime({ threads: 1 });
  });
  after(() => rt.dispose());

  for (const f of FORMATS) {
    test(`${f.dtype}: decode of every code`, () => {
      const bytes = f.codes > 256 ? 2 : 1;
      const src = rt.heap.alloc(f.codes * bytes);
      const dst = rt.heap.alloc(f.codes * 4);
      const codes = bytes === 2 ? new Uint16Array(rt.memory.buffer, src, f.codes) : new Uint8Array(rt.memory.buffer, src, f.codes);
      for (let c = 0; c < f.codes; c++) codes[c] = c;
      rt.exports["decode_to_f32"]!(DTYPE_CODE[f.dtype], src, dst, f.codes);
      const got = new Uint32Array(rt.memory.buffer, dst, f.codes);
      for (let c = 0; c < f.codes; c++) {
        const want = decodeToF32Bits(f.dtype, c);
        if (got[c] !== want) assert.fail(`code 0x${c.toString(16)}: kernel 0x${got[c]!.toString(16)}, codec 0x${want.toString(16)}`);
      }
      // The scalar tail path too: an odd count ends with 3 scalar decodes.
      rt.exports["decode_to_f32"]!(DTYPE_CODE[f.dtype], src + 5 * bytes, dst, 7);
      for (let i = 0; i < 7; i++) assert.equal(got[i], decodeToF32Bits(f.dtype, 5 + i));
      rt.free(src);
      rt.free(dst);
    });

    for (const saturate of f.dtype.startsWith("fp8") ? [false, true] : [false]) {
      test(`${f.dtype}: encode of specials, midpoints and random f32${saturate ? " (saturating)" : ""}`, () => {
        const values: number[] = [0, -0, NaN, -NaN, Infinity, -Infinity, 3.4e38, -3.4e38, 1e-45, -1e-45, 1, -1, 65504, 65520, 448, 464, 480, 57344, 61440];
        for (let code = 0; code < f.maxCode; code++) {
          const lo = decodeValue(f.dtype, code);
          const hi = decodeValue(f.dtype, code + 1);
          values.push(lo, -lo, Math.fround((lo + hi) / 2), -Math.fround((lo + hi) / 2));
        }
        let seed = 12345;
        for (let i = 0; i < 200000; i++) {
          seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
          u32[0] = seed;
          values.push(f32[0]!);
        }
        const n = values.length;
        const bytes = f.codes > 256 ? 2 : 1;
        const src = rt.heap.alloc(n * 4);
        const dst = rt.heap.alloc(n * bytes);
        new Float32Array(rt.memory.buffer, src, n).set(values);
        rt.exports["encode_from_f32"]!(DTYPE_CODE[f.dtype], src, dst, n, saturate ? 1 : 0);
        const got = bytes === 2 ? new Uint16Array(rt.memory.buffer, dst, n) : new Uint8Array(rt.memory.buffer, dst, n);
        const stored = new Float32Array(rt.memory.buffer, src, n);
        for (let i = 0; i < n; i++) {
          const x = stored[i]!; // the f32 the kernel saw
          const want = encodeValue(f.dtype, x, { saturate });
          if (got[i] !== want) assert.fail(`${x} (0x${bitsOf(x).toString(16)}): kernel 0x${got[i]!.toString(16)}, codec 0x${want.toString(16)}`);
        }
        rt.free(src);
        rt.free(dst);
      });
    }
  }

  test("int8: encode and decode", () => {
    const values = [0.5, 1.5, 2.5, -0.5, -1.5, 126.6, 1000, -1000, NaN, -127.5, 127.5];
    const n = values.length;
    const src = rt.heap.alloc(n * 4);
    const dst = rt.heap.alloc(n);
    new Float32Array(rt.memory.buffer, src, n).set(values);
    rt.exports["encode_from_f32"]!(DTYPE_CODE.int8, src, dst, n, 0);
    assert.deepEqual([...new Int8Array(rt.memory.buffer, dst, n)], values.map((x) => encodeValue("int8", x)));
    rt.exports["decode_to_f32"]!(DTYPE_CODE.int8, dst, src, n);
    assert.deepEqual([...new Float32Array(rt.memory.buffer, src, n)], values.map((x) => encodeValue("int8", x) + 0));
  });
});
