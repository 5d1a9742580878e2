// walkFlags: `--flag value` and `--flag=value`, list values, switches, and
// errors that name the flag and the value.
import assert from "node:assert/strict";
import { test } from "node:test";
import { type FlagReader, walkFlags } from "../../src/cli/flags.js";

function parse(argv: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const read: Record<string, (r: FlagReader) => unknown> = {
    "--name": (r) => r.string(),
    "--names": (r) => [r.string(), ...r.more()],
    "--x": (r) => r.number(),
    "--gib": (r) => r.positive(),
    "--n": (r) => r.integer(1),
    "--json": () => true,
  };
  walkFlags(argv, { usage: "usage: test", what: "a test option", switches: ["--json"] }, (flag, r) => {
    const f = read[flag];
    if (f === undefined) return false;
    out[flag] = f(r);
    return true;
  });
  return out;
}

test("values inline or next, lists, switches", () => {
  assert.deepEqual(parse(["--name", "a", "--x=-1.5", "--names", "p", "q", "--n", "3", "--json", "--gib=0.5"]), {
    "--name": "a",
    "--x": -1.5,
    "--names": ["p", "q"],
    "--n": 3,
    "--json": true,
    "--gib": 0.5,
  });
  assert.deepEqual(parse(["--names=p", "--name=--dash"]), { "--names": ["p"], "--name": "--dash" });
});

test("errors name the flag and the value", () => {
  assert.throws(() => parse(["--name"]), /--name needs a value/);
  assert.throws(() => parse(["--name", "--x", "1"]), /--name needs a value/);
  assert.throws(() => parse(["--x", "abc"]), /--x must be a number, got "abc"/);
  assert.throws(() => parse(["--x", ""]), /--x must be a number, got ""/);
  assert.throws(() => parse(["--gib", "0"]), /--gib must be a number > 0, got "0"/);
  assert.throws(() => parse(["--n", "2.5"]), /--n must be an integer ≥ 1, got "2.5"/);
  assert.throws(() => parse(["--n", "0"]), /--n must be an integer ≥ 1, got "0"/);
  assert.throws(() => parse(["--json=yes"]), /--json takes no value/);
  assert.throws(() => parse(["--frob"]), /--frob is not a test option\nusage: test/);
  assert.throws(() => parse(["stray"]), /stray is not an option \(options start with --\)/);
});
