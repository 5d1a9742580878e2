// A GGUF metadata value's type (format.ts; ggml's gguf.cpp), a leaf: the reader makes them and
// metadata.ts reads them, and the reader's tokenizer limits read metadata, so the type lives
// apart (no import cycle, type-only ones included; test/package/import-cycles.test.ts).

/** A metadata value: scalars as JS values (64-bit integers as numbers when safe, else bigint), arrays as JS arrays. */
export type GgufScalar = number | bigint | boolean | string;
export type GgufValue = GgufScalar | GgufScalar[];
