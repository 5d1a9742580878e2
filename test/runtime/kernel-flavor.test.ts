// Kernel flavors (src/runtime/module.ts): the default follows what the engine
// validates and how it lowers the relaxed int8 dot, $KVFLASH_KERNELS and the `kernels` option override it, bad or
// unavailable values are errors naming the source and the value, and every
// thread of a runtime runs the module its rt.kernels names.
import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import {
  ArgumentError,
  type KernelFlavor,
  createRuntime,
  defaultInt8Dot,
  defaultKernelFlavor,
  kernelFlavorAvailable,
  relaxedPreferred,
  resolveKernelFlavor,
} from "../../src/ops-entry.js";
import { kquantWideDefault, relaxedInt8DotLoweringHere } from "../../src/runtime/module.js";

const savedEnv = process.env["KVFLASH_KERNELS"];
const savedDot = process.env["KVFLASH_INT8_DOT"];
afterEach(() => {
  if (savedEnv === undefined) delete process.env["KVFLASH_KERNELS"];
  else process.env["KVFLASH_KERNELS"] = savedEnv;
  if (savedDot === undefined) delete process.env["KVFLASH_INT8_DOT"];
  else process.env["KVFLASH_INT8_DOT"] = savedDot;
});

const relaxedHere = kernelFlavorAvailable("relaxed");

test("the baseline module validates everywhere", () => {
  assert.equal(kernelFlavorAvailable("baseline"), true);
});

test("the default is relaxed where the engine validates it, but not on x64 under V8 12 (Node 22) without a one-instruction int8 dot", async () => {
  delete process.env["KVFLASH_KERNELS"];
  const v8 = Number(process.versions.v8.split(".")[0]);
  const lowering = relaxedHere ? relaxedInt8DotLoweringHere() : "unknown";
  const want = relaxedHere && (process.arch !== "x64" || lowering === "unsigned" || lowering === "signed" || v8 >= 13) ? "relaxed" : "baseline";
  assert.equal(defaultKernelFlavor(), want);
  assert.equal(resolveKernelFlavor(), want);
  // The probe on the scratch instance agrees with a relaxed runtime's own.
  if (relaxedHere) {
    const rt = await createRuntime({ threads: 1, kernels: "relaxed" });
    assert.equal(rt.int8DotLowering, lowering);
    assert.equal(rt.int8Dot, defaultInt8Dot("relaxed", process.arch, lowering));
    await rt.dispose();
  }
  const rt = await createRuntime({ threads: 1 });
  assert.equal(rt.kernels, want);
  await rt.dispose();
});

test("relaxed is preferred everywhere but on x64 under V8 12 whose relaxed int8 dot is not one instruction", () => {
  assert.equal(relaxedPreferred("x64", "unsigned", 12), true);
  assert.equal(relaxedPreferred("x64", "signed", 12), true);
  assert.equal(relaxedPreferred("x64", "saturating", 12), false);
  assert.equal(relaxedPreferred("x64", "unknown", 12), false);
  assert.equal(relaxedPreferred("x64", "saturating", 13), true);
  assert.equal(relaxedPreferred("x64", "saturating", 14), true);
  assert.equal(relaxedPreferred("arm64", "saturating", 12), true);
  assert.equal(relaxedPreferred("arm64", "signed", 12), true);
});

test("a model with native K-quant matrices prefers relaxed on x64 under V8 12 too (its int8 pair dots), and gets it by default where relaxed runs", async () => {
  delete process.env["KVFLASH_KERNELS"];
  assert.equal(relaxedPreferred("x64", "saturating", 12, true), true);
  assert.equal(relaxedPreferred("x64", "unknown", 12, true), true);
  assert.equal(relaxedPreferred("x64", "saturating", 12, false), false);
  const want = relaxedHere ? "relaxed" : "baseline";
  assert.equal(defaultKernelFlavor(true), want);
  assert.equal(resolveKernelFlavor(undefined, true), want);
  const rt = await createRuntime({ threads: 1, kquantWeights: true });
  assert.equal(rt.kernels, want);
  await rt.dispose();
  // The option and $KVFLASH_KERNELS still win.
  assert.equal(resolveKernelFlavor("baseline", true), "baseline");
  process.env["KVFLASH_KERNELS"] = "baseline";
  assert.equal(resolveKernelFlavor(undefined, true), "baseline");
});

test("the K-quant prefill widens its codes on baseline always, on relaxed only under V8 < 13; the option overrides", async () => {
  assert.equal(kquantWideDefault("baseline", 11), true);
  assert.equal(kquantWideDefault("baseline", 13), true);
  assert.equal(kquantWideDefault("relaxed", 12), true);
  assert.equal(kquantWideDefault("relaxed", 13), false);
  const v8 = Number(process.versions.v8.split(".")[0]);
  for (const kernels of relaxedHere ? (["baseline", "relaxed"] as const) : (["baseline"] as const)) {
    const rt = await createRuntime({ threads: 1, kernels });
    assert.equal(rt.kquantWide, kquantWideDefault(kernels, v8));
    await rt.dispose();
    const forced = await createRuntime({ threads: 1, kernels, kquantWide: !kquantWideDefault(kernels, v8) });
    assert.equal(forced.kquantWide, !kquantWideDefault(kernels, v8));
    await forced.dispose();
  }
});

test("the integer dot by default follows the lowering: i16 on baseline; u8 where unsigned, i7 where signed, i16 on x64 where saturating or unknown, i7 elsewhere", () => {
  assert.equal(defaultInt8Dot("baseline", "x64", null), "i16");
  assert.equal(defaultInt8Dot("baseline", "x64", "unsigned"), "i16");
  assert.equal(defaultInt8Dot("relaxed", "x64", "unsigned"), "u8");
  assert.equal(defaultInt8Dot("relaxed", "x64", "signed"), "i7");
  assert.equal(defaultInt8Dot("relaxed", "x64", "saturating"), "i16");
  assert.equal(defaultInt8Dot("relaxed", "x64", "unknown"), "i16");
  assert.equal(defaultInt8Dot("relaxed", "arm64", "signed"), "i7");
  assert.equal(defaultInt8Dot("relaxed", "arm64", "saturating"), "i7");
  assert.equal(defaultInt8Dot("relaxed", "arm64", "unsigned"), "u8");
});

test("the option wins over $KVFLASH_KERNELS, which wins over the default", () => {
  process.env["KVFLASH_KERNELS"] = "baseline";
  assert.equal(resolveKernelFlavor(), "baseline");
  assert.equal(resolveKernelFlavor("baseline"), "baseline");
  if (relaxedHere) {
    process.env["KVFLASH_KERNELS"] = "relaxed";
    assert.equal(resolveKernelFlavor(), "relaxed");
    assert.equal(resolveKernelFlavor("baseline"), "baseline");
  }
});

test("$KVFLASH_INT8_DOT picks the integer dot where the option does not; a bad or unavailable value is an ArgumentError naming it", async () => {
  process.env["KVFLASH_INT8_DOT"] = "i16";
  const rt = await createRuntime({ threads: 1, kernels: "baseline" });
  assert.equal(rt.int8Dot, "i16");
  await rt.dispose();
  process.env["KVFLASH_INT8_DOT"] = "i8";
  await assert.rejects(createRuntime({ threads: 1, kernels: "baseline" }), (e: Error) => e instanceof ArgumentError && e.argument === "KVFLASH_INT8_DOT" && /"i8"/.test(e.message));
  process.env["KVFLASH_INT8_DOT"] = "i7";
  await assert.rejects(createRuntime({ threads: 1, kernels: "baseline" }), (e: Error) => e instanceof ArgumentError && e.argument === "KVFLASH_INT8_DOT" && /only "i16"/.test(e.message));
  if (relaxedHere) {
    const r = await createRuntime({ threads: 1, kernels: "relaxed" });
    assert.equal(r.int8Dot, "i7");
    await r.dispose();
    const o = await createRuntime({ threads: 1, kernels: "relaxed", int8Dot: "i16" });
    assert.equal(o.int8Dot, "i16", "the option wins over $KVFLASH_INT8_DOT");
    await o.dispose();
  }
});

test("an unknown flavor is an ArgumentError naming where it came from and the value", () => {
  assert.throws(() => resolveKernelFlavor("fast"), (e: Error) => e instanceof ArgumentError && e.argument === "kernels" && /"fast"/.test(e.message));
  process.env["KVFLASH_KERNELS"] = "avx512";
  assert.throws(() => resolveKernelFlavor(), (e: Error) => e instanceof ArgumentError && e.argument === "KVFLASH_KERNELS" && /"avx512"/.test(e.message));
});

test("relaxed where the engine cannot run it is an error that says how to get it", { skip: relaxedHere && "this engine runs relaxed SIMD" }, () => {
  assert.throws(() => resolveKernelFlavor("relaxed"), (e: Error) => e instanceof ArgumentError && /"relaxed"/.test(e.message) && /Node ≥ 22/.test(e.message));
});

async function threadFlavors(kernels: KernelFlavor): Promise<{ reported: KernelFlavor; perItem: number[] }> {
  const rt = await createRuntime({ threads: 3, kernels });
  try {
    const items = 64;
    const out = rt.heap.alloc(items * 4, "flavor probe");
    new Int32Array(rt.memory.buffer, out, items).fill(-1);
    rt.parallelFor("task_kernels_relaxed", items, out);
    const perItem = [...new Int32Array(rt.memory.buffer, out, items)];
    rt.free(out);
    return { reported: rt.kernels, perItem };
  } finally {
    await rt.dispose();
  }
}

test("a baseline runtime runs build/kernels.wasm on every thread", async () => {
  const { reported, perItem } = await threadFlavors("baseline");
  assert.equal(reported, "baseline");
  assert.deepEqual(new Set(perItem), new Set([0]));
});

test("a relaxed runtime runs build/kernels-relaxed.wasm on every thread", { skip: !relaxedHere && "needs Node ≥ 22" }, async () => {
  const { reported, perItem } = await threadFlavors("relaxed");
  assert.equal(reported, "relaxed");
  assert.deepEqual(new Set(perItem), new Set([1]));
});
