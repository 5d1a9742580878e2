// The part of the WebAssembly JS API that kvflash uses. TypeScript ships these
// types only in lib.dom; Node's own types (v20) do not declare them.
declare namespace WebAssembly {
  interface MemoryDescriptor {
    initial: number;
    maximum?: number;
    shared?: boolean;
  }
  class Memory {
    constructor(descriptor: MemoryDescriptor);
    readonly buffer: ArrayBuffer | SharedArrayBuffer;
    grow(delta: number): number;
  }
  interface ModuleExportDescriptor {
    kind: "function" | "table" | "memory" | "global";
    name: string;
  }
  interface ModuleImportDescriptor {
    kind: "function" | "table" | "memory" | "global";
    module: string;
    name: string;
  }
  class Module {
    constructor(bytes: BufferSource);
    static exports(module: Module): ModuleExportDescriptor[];
    static imports(module: Module): ModuleImportDescriptor[];
  }
  type ImportValue = Function | Memory | number;
  type Imports = Record<string, Record<string, ImportValue>>;
  type Exports = Record<string, Function | Memory | unknown>;
  class Instance {
    constructor(module: Module, imports?: Imports);
    readonly exports: Exports;
  }
  class RuntimeError extends Error {}
  function compile(bytes: BufferSource): Promise<Module>;
  function validate(bytes: BufferSource): boolean;
}
type BufferSource = ArrayBufferView | ArrayBuffer;
