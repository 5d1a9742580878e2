/**
 * WebGPU's numeric flags (the spec's GPUBufferUsage and GPUMapMode values).
 * Written out because in Node the `webgpu` package does not install its
 * globals, and kvflash does not assign them onto globalThis for it.
 */
export const BufferUsage = {
  MAP_READ: 0x0001,
  COPY_SRC: 0x0004,
  COPY_DST: 0x0008,
  UNIFORM: 0x0040,
  STORAGE: 0x0080,
  QUERY_RESOLVE: 0x0200,
} as const;

export const MapMode = { READ: 0x0001 } as const;
