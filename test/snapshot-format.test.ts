// The snapshot envelope and its seal, where the logic is subtle: a page delta that must
// rebuild memory exactly, a header whose every field is untrusted, and a seal that binds
// the bytes to one run, its metadata and a not-after time.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { QuickJS } from "quickjs-wasi";
import { baseImage } from "../src/sandbox/worker/base-image.js";
import { decodeSnapshot, encodeSnapshot, ENCODING_DELTA, SnapshotFormatError } from "../src/sandbox/worker/snapshot-codec.js";
import { guestVmOptions } from "../src/sandbox/worker/vm-options.js";
import { SnapshotAuthError, SnapshotSealer } from "../src/sandbox/snapshot-seal.js";

const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));

async function vmWith(setup: (vm: QuickJS) => void) {
  const vm = await QuickJS.create(guestVmOptions(wasm, 64 * 1024 * 1024, () => false));
  setup(vm);
  return vm;
}

describe("snapshot envelope", () => {
  it("round-trips memory exactly, as a small delta, and the restored VM keeps its state", async () => {
    const vm = await vmWith((v) => {
      const state = v.hostToHandle({ rows: Array.from({ length: 5000 }, (_, i) => i * 3) });
      v.global.setProp("state", state);
      state.dispose();
    });
    const snap = vm.snapshot();
    const base = await baseImage(wasm);
    const encoded = encodeSnapshot(snap, base);
    expect(encoded.encoding).toBe(ENCODING_DELTA);
    expect(encoded.envelope.byteLength).toBeLessThan(64 * 1024);
    const decoded = decodeSnapshot(encoded.envelope, base);
    expect(Buffer.compare(Buffer.from(decoded.memory), Buffer.from(snap.memory))).toBe(0);
    expect([decoded.stackPointer, decoded.runtimePtr, decoded.contextPtr]).toEqual([snap.stackPointer, snap.runtimePtr, snap.contextPtr]);
    const restored = await QuickJS.restore(decoded, guestVmOptions(wasm, 64 * 1024 * 1024, () => false));
    const rows = restored.global.getProp("state").getProp("rows");
    expect(rows.getProp("length").toNumber()).toBe(5000);
    expect(rows.getProp("4999").toNumber()).toBe(4999 * 3);
    restored.dispose();
    vm.dispose();
  });

  it("the base image is byte-identical in another process (fixed clock and randomness, same prelude bytecode)", async () => {
    const here = (await baseImage(wasm)).fingerprint.toString("hex");
    const script = `
      import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
      import { baseImage } from ${JSON.stringify(new URL("../dist/sandbox/worker/base-image.js", import.meta.url).href)};
      const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
      process.stdout.write((await baseImage(wasm)).fingerprint.toString("hex"));`;
    const there = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: fileURLToPath(new URL("..", import.meta.url)), encoding: "utf8" });
    expect(there.stderr).toBe("");
    expect(there.stdout).toBe(here);
  });

  it("refuses malformed headers, another build's fingerprint, and truncated or oversized payloads", async () => {
    const vm = await vmWith(() => undefined);
    const base = await baseImage(wasm);
    const good = Buffer.from(encodeSnapshot(vm.snapshot(), base).envelope);
    vm.dispose();
    const broken = (edit: (b: Buffer) => Buffer) => () => decodeSnapshot(edit(Buffer.from(good)), base);
    expect(broken((b) => (b.writeUInt32LE(0, 0), b))).toThrow(SnapshotFormatError);
    expect(broken((b) => (b.writeUInt8(2, 4), b))).toThrow(/version 2 is not supported/);
    expect(broken((b) => (b.writeUInt8(7, 5), b))).toThrow(/malformed/);
    expect(broken((b) => ((b[8] = b[8]! ^ 1), b))).toThrow(/different sandbox build/);
    expect(broken((b) => (b.writeUInt32LE(0xffff0000, 40), b))).toThrow(/memory size/);
    expect(broken((b) => b.subarray(0, b.byteLength - 1))).toThrow(/payload length/);
    // A payload cut short (its length field adjusted to match) does not decompress.
    expect(broken((b) => (b.writeUInt32LE(b.byteLength - 60 - 10, 56), b.subarray(0, b.byteLength - 10)))).toThrow(/does not decompress|wrong size|truncated/);
  });
});

describe("snapshot seal", () => {
  const sealer = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEY: "k".repeat(40) });
  const ctx = { codeModeRunId: "cm_1", scopeKey: '["a","s","k","r"]', meta: '["{}","yield",[],0]' };
  const envelope = Buffer.from("an envelope");

  it("opens what it sealed, and refuses another key, run, scope, metadata, a flipped bit, or an old seal", () => {
    const now = Date.now();
    const sealed = sealer.seal(envelope, ctx, now + 1000);
    expect(Buffer.from(sealer.open(sealed, ctx, now)).toString()).toBe("an envelope");
    const other = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEY: "x".repeat(40) });
    expect(() => other.open(sealed, ctx, now)).toThrow(SnapshotAuthError);
    expect(() => sealer.open(sealed, { ...ctx, codeModeRunId: "cm_2" }, now)).toThrow(SnapshotAuthError);
    expect(() => sealer.open(sealed, { ...ctx, scopeKey: '["a","s","k","other"]' }, now)).toThrow(SnapshotAuthError);
    expect(() => sealer.open(sealed, { ...ctx, meta: '["{}","pending_tools",[],0]' }, now)).toThrow(SnapshotAuthError);
    const flipped = Buffer.from(sealed);
    flipped[3] = flipped[3]! ^ 1;
    expect(() => sealer.open(flipped, ctx, now)).toThrow(SnapshotAuthError);
    expect(() => sealer.open(sealed, ctx, now + 1000 + 61_000)).toThrow(/expired/);
    expect(() => sealer.open(sealed.subarray(0, 10), ctx, now)).toThrow(SnapshotAuthError);
  });

  it("needs a key of at least 32 characters, and makes a per-process one when none is set", () => {
    expect(() => SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEY: "short" })).toThrow(/at least 32/);
    expect(SnapshotSealer.fromEnv({}).shared).toBe(false);
    expect(sealer.shared).toBe(true);
  });
});
