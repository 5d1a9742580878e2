/** Reads and parses a JSON file; errors name the path and say what went wrong. */
import { readFileSync } from "node:fs";
import { ArgumentError } from "./errors.js";

export function readJsonFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new ArgumentError(path, `cannot be read: ${(e as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ArgumentError(path, `is not valid JSON: ${(e as Error).message}`);
  }
}
