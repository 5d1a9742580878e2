/**
 * The `--device cpu|webgpu|auto` setting and its parser: a leaf with no
 * WebGPU types, so the flag parsers and the server's options (the main
 * entry's types) name it without pulling in @webgpu/types. adapter.ts
 * acts on it.
 */
import { ArgumentError, show } from "../errors.js";

export const DEVICE_KINDS = ["cpu", "webgpu", "auto"] as const;
export type DeviceKind = (typeof DEVICE_KINDS)[number];

/** Parses a `--device` value, naming the flag and the value when it is not one of DEVICE_KINDS. */
export function parseDeviceKind(value: unknown, argument = "--device"): DeviceKind {
  if (typeof value !== "string" || !(DEVICE_KINDS as readonly string[]).includes(value)) {
    throw new ArgumentError(argument, `must be one of ${DEVICE_KINDS.join(" | ")}, got ${show(value)}`);
  }
  return value as DeviceKind;
}
