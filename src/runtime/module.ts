/**
 * Loads build/kernels.wasm (AssemblyScript → WebAssembly SIMD128 + threads) and
 * builds the imports every instance gets: the one shared memory, and `abort`,
 * which AssemblyScript calls on a failed assertion.
 */
import { readFileSync } from "node:fs";

export const WASM_PAGE = 65536;
/** wasm32 addresses one memory of at most 65536 pages = 4 GiB. */
export const MAX_PAGES = 65536;
export const MAX_MEMORY_BYTES = MAX_PAGES * WASM_PAGE;

const WASM_URL = new URL("../../../build/kernels.wasm", import.meta.url);

let compiled: WebAssembly.Module | undefined;

/** Compiles the kernel module once per process (or per worker). */
export function kernelModule(): WebAssembly.Module {
  if (!compiled) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(WASM_URL);
    } catch (e) {
      throw new Error(`cannot read the kernel module ${WASM_URL.pathname}: run \`npm run build\` first (${(e as Error).message})`);
    }
    compiled = new WebAssembly.Module(bytes);
  }
  return compiled;
}

/** Reads an AssemblyScript string (UTF-16, byte length at ptr − 4) from memory. */
function readAsString(memory: WebAssembly.Memory, ptr: number): string {
  if (!ptr) return "";
  const bytes = new Uint32Array(memory.buffer, ptr - 4, 1)[0]!;
  const units = new Uint16Array(memory.buffer.slice(ptr, ptr + bytes));
  return String.fromCharCode(...units);
}

export function kernelImports(memory: WebAssembly.Memory): WebAssembly.Imports {
  return {
    env: {
      memory,
      abort(msg: number, file: number, line: number, column: number): never {
        const where = file ? ` at ${readAsString(memory, file)}:${line}:${column}` : "";
        throw new Error(`abort: ${readAsString(memory, msg)}${where}`);
      },
    },
  };
}

/** Names of the module's exported functions, in export order (the same in every thread). */
export function kernelNames(module: WebAssembly.Module): string[] {
  return WebAssembly.Module.exports(module)
    .filter((e) => e.kind === "function")
    .map((e) => e.name);
}

export type KernelExports = Record<string, (...args: number[]) => number>;

export function instantiate(module: WebAssembly.Module, memory: WebAssembly.Memory): KernelExports {
  return new WebAssembly.Instance(module, kernelImports(memory)).exports as unknown as KernelExports;
}
