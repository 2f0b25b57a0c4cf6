// The snapshot envelope and its seal, where the logic is subtle: a page delta that must
// rebuild memory exactly, a header whose every field is untrusted, and a seal that
// encrypts the bytes and binds them to one run, its metadata, its generation in the
// store and a not-after time, under rotating key ids.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { QuickJS } from "quickjs-wasi";
import { baseImage } from "../../src/sandbox/worker/base-image.js";
import { decodeSnapshot, encodeSnapshot, ENCODING_DELTA, SnapshotFormatError } from "../../src/sandbox/worker/snapshot-codec.js";
import { guestVmOptions } from "../../src/sandbox/worker/vm-options.js";
import { derivedKeyId, sealOverhead, SnapshotAuthError, SnapshotKeyUnavailableError, SnapshotSealer } from "../../src/sandbox/suspend/snapshot-seal.js";

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
    const restored = await QuickJS.restore(
      decoded,
      guestVmOptions(wasm, 64 * 1024 * 1024, () => false),
    );
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
      import { baseImage } from ${JSON.stringify(new URL("../../dist/sandbox/worker/base-image.js", import.meta.url).href)};
      const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
      process.stdout.write((await baseImage(wasm)).fingerprint.toString("hex"));`;
    const there = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      cwd: fileURLToPath(new URL("../../", import.meta.url)),
      encoding: "utf8",
    });
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
    expect(broken((b) => (b.writeUInt8(3, 4), b))).toThrow(/version 3 is not supported/);
    expect(broken((b) => (b.writeUInt8(7, 5), b))).toThrow(/malformed/);
    expect(broken((b) => ((b[8] = b[8]! ^ 1), b))).toThrow(/different sandbox build/);
    expect(broken((b) => (b.writeUInt32LE(0xffff0000, 40), b))).toThrow(/memory size/);
    expect(broken((b) => b.subarray(0, b.byteLength - 1))).toThrow(/payload length/);
    // A payload cut short (its length field adjusted to match) does not decompress.
    expect(broken((b) => (b.writeUInt32LE(b.byteLength - 64 - 10, 56), b.subarray(0, b.byteLength - 10)))).toThrow(/does not decompress|wrong size|truncated/);
  });
});

describe("snapshot seal", () => {
  const A = "a".repeat(40);
  const B = "b".repeat(40);
  const sealer = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEY: "k".repeat(40) });
  const ctx = { codeModeRunId: "cm_1", scopeKey: '["a","s","k","r"]', meta: '["{}","yield",[],0]', generation: 3 };
  const envelope = Buffer.from("an envelope");
  /** Offsets in a sealed snapshot: magic 4, version 1, id length 1, id, nonce 12, generation 8, not-after 8, ciphertext, tag 16. */
  const layout = (sealed: Uint8Array) => {
    const idLength = sealed[5]!;
    const nonce = 6 + idLength;
    return { id: 6, nonce, generation: nonce + 12, notAfter: nonce + 20, ciphertext: nonce + 28, tag: sealed.byteLength - 16 };
  };
  const flip = (b: Buffer, at: number, bits: number) => {
    b[at] = b[at]! ^ bits;
  };
  const edit = (sealed: Uint8Array, change: (b: Buffer) => void) => {
    const copy = Buffer.from(sealed);
    change(copy);
    return copy;
  };

  it("opens what it sealed, and refuses another key, run, scope, metadata, generation, a flipped bit, or an old seal", () => {
    const now = Date.now();
    const sealed = sealer.seal(envelope, ctx, now + 1000);
    expect(Buffer.from(sealer.open(sealed, ctx, now)).toString()).toBe("an envelope");
    const other = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEY: "x".repeat(40) });
    expect(() => other.open(sealed, ctx, now)).toThrow(SnapshotKeyUnavailableError);
    expect(() => sealer.open(sealed, { ...ctx, codeModeRunId: "cm_2" }, now)).toThrow(/seal does not match/);
    expect(() => sealer.open(sealed, { ...ctx, scopeKey: '["a","s","k","other"]' }, now)).toThrow(/seal does not match/);
    expect(() => sealer.open(sealed, { ...ctx, meta: '["{}","pending_tools",[],0]' }, now)).toThrow(/seal does not match/);
    expect(() => sealer.open(sealed, { ...ctx, generation: 4 }, now)).toThrow(/sealed for generation 3 of this run but the store is at generation 4/);
    expect(() => sealer.open(sealed, { ...ctx, generation: 2 }, now)).toThrow(SnapshotAuthError);
    const flipped = Buffer.from(sealed);
    flipped[3] = flipped[3]! ^ 1;
    expect(() => sealer.open(flipped, ctx, now)).toThrow(SnapshotAuthError);
    expect(() => sealer.open(sealed, ctx, now + 1000 + 61_000)).toThrow(/expired/);
    expect(() => sealer.open(sealed.subarray(0, 10), ctx, now)).toThrow(SnapshotAuthError);
    expect(() => sealer.open(sealed.subarray(0, sealed.byteLength - 1), ctx, now)).toThrow(/seal does not match/);
  });

  it("encrypts: a known plaintext marker is nowhere in the sealed bytes, and each seal has its own nonce", () => {
    const marker = "PLAINTEXT-MARKER-7f3a9c";
    const plain = Buffer.from(`${"x".repeat(1000)}${marker}${"tool result: the secret answer ".repeat(50)}${marker}`);
    const now = Date.now();
    const one = Buffer.from(sealer.seal(plain, ctx, now + 1000));
    const two = Buffer.from(sealer.seal(plain, ctx, now + 1000));
    for (const sealed of [one, two]) {
      expect(sealed.includes(marker)).toBe(false);
      expect(sealed.includes("tool result")).toBe(false);
      expect(sealed.includes("x".repeat(16))).toBe(false);
      expect(sealed.byteLength).toBe(plain.byteLength + sealOverhead(sealer.sealingKeyId));
      expect(Buffer.compare(Buffer.from(sealer.open(sealed, ctx, now)), plain)).toBe(0);
    }
    const at = layout(one);
    expect(one.subarray(at.nonce, at.nonce + 12).equals(two.subarray(at.nonce, at.nonce + 12))).toBe(false);
    expect(one.subarray(at.ciphertext, at.tag).equals(two.subarray(at.ciphertext, at.tag))).toBe(false);
    expect(one.subarray(0, 4).toString()).toBe("CMSS");
    expect(one[4]).toBe(2);
    expect(one.toString("latin1", at.id, at.nonce)).toBe(sealer.sealingKeyId);
    expect(one.readBigUInt64LE(at.generation)).toBe(3n);
  });

  it("refuses a sealed snapshot whose key id, nonce, generation, not-after, ciphertext, tag, version or magic was tampered with", () => {
    const two = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `ka:${A},kb:${B}` });
    const now = Date.now();
    const sealed = two.seal(envelope, ctx, now + 1000);
    const at = layout(sealed);
    expect(Buffer.from(sealed).toString("latin1", at.id, at.nonce)).toBe("ka");
    expect(Buffer.from(two.open(sealed, ctx, now)).toString()).toBe("an envelope");
    // Another configured key id: the AEAD check under that key fails.
    expect(() =>
      two.open(
        edit(sealed, (b) => b.write("kb", at.id, "latin1")),
        ctx,
        now,
      ),
    ).toThrow(/seal does not match/);
    // A key id nobody configured here, or one that is not a key id at all.
    expect(() =>
      two.open(
        edit(sealed, (b) => b.write("kc", at.id, "latin1")),
        ctx,
        now,
      ),
    ).toThrow(SnapshotKeyUnavailableError);
    expect(() =>
      two.open(
        edit(sealed, (b) => b.write("k\n", at.id, "latin1")),
        ctx,
        now,
      ),
    ).toThrow(/key id is malformed/);
    expect(() =>
      two.open(
        edit(sealed, (b) => (b[5] = 0)),
        ctx,
        now,
      ),
    ).toThrow(/key id is malformed/);
    expect(() =>
      two.open(
        edit(sealed, (b) => flip(b, at.nonce, 1)),
        ctx,
        now,
      ),
    ).toThrow(/seal does not match/);
    expect(() =>
      two.open(
        edit(sealed, (b) => flip(b, at.nonce + 11, 0x80)),
        ctx,
        now,
      ),
    ).toThrow(/seal does not match/);
    // The generation is refused as such; rewritten together with the store's, the AEAD check fails.
    const regenerated = edit(sealed, (b) => b.writeBigUInt64LE(4n, at.generation));
    expect(() => two.open(regenerated, ctx, now)).toThrow(/generation 4 of this run but the store is at generation 3/);
    expect(() => two.open(regenerated, { ...ctx, generation: 4 }, now)).toThrow(/seal does not match/);
    // A not-after pushed out (to replay past the TTL) fails the AEAD check.
    expect(() =>
      two.open(
        edit(sealed, (b) => b.writeBigUInt64LE(BigInt(now + 3_600_000), at.notAfter)),
        ctx,
        now,
      ),
    ).toThrow(/seal does not match/);
    expect(() =>
      two.open(
        edit(sealed, (b) => flip(b, at.ciphertext, 1)),
        ctx,
        now,
      ),
    ).toThrow(/seal does not match/);
    expect(() =>
      two.open(
        edit(sealed, (b) => flip(b, at.tag - 1, 1)),
        ctx,
        now,
      ),
    ).toThrow(/seal does not match/);
    expect(() =>
      two.open(
        edit(sealed, (b) => flip(b, at.tag, 1)),
        ctx,
        now,
      ),
    ).toThrow(/seal does not match/);
    expect(() =>
      two.open(
        edit(sealed, (b) => flip(b, sealed.byteLength - 1, 1)),
        ctx,
        now,
      ),
    ).toThrow(/seal does not match/);
    expect(() =>
      two.open(
        edit(sealed, (b) => (b[4] = 1)),
        ctx,
        now,
      ),
    ).toThrow(/seal version 1 is not supported/);
    expect(() =>
      two.open(
        edit(sealed, (b) => flip(b, 0, 1)),
        ctx,
        now,
      ),
    ).toThrow(/not sealed in a format this build reads/);
  });

  it("rotates keys: the first listed key seals, every listed key opens, and a key no longer listed is refused by id", () => {
    const now = Date.now();
    const old = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k1:${A}` });
    const rotated = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k2:${B}, k1:${A}` });
    const retired = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k2:${B}` });
    expect([old.sealingKeyId, rotated.sealingKeyId, rotated.keyIds, retired.keyIds]).toEqual(["k1", "k2", ["k2", "k1"], ["k2"]]);

    const underK1 = old.seal(envelope, ctx, now + 1000);
    expect(Buffer.from(rotated.open(underK1, ctx, now)).toString()).toBe("an envelope");
    let refusal: unknown;
    try {
      retired.open(underK1, ctx, now);
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toBeInstanceOf(SnapshotKeyUnavailableError);
    expect((refusal as SnapshotKeyUnavailableError).keyId).toBe("k1");
    expect((refusal as Error).message).toBe('the snapshot was sealed under key id "k1", which this sidecar does not have');

    const underK2 = rotated.seal(envelope, ctx, now + 1000);
    expect(Buffer.from(retired.open(underK2, ctx, now)).toString()).toBe("an envelope");
    expect(() => old.open(underK2, ctx, now)).toThrow(SnapshotKeyUnavailableError);
  });

  it("still takes CODEMODE_SNAPSHOT_KEY: a bare secret with a derived id, readable after moving to CODEMODE_SNAPSHOT_KEYS", () => {
    const now = Date.now();
    const legacy = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEY: A });
    expect(legacy.shared).toBe(true);
    expect(legacy.sealingKeyId).toBe(derivedKeyId(A));
    expect(legacy.sealingKeyId).toMatch(/^key-[0-9a-f]{12}$/);
    expect(legacy.sealingKeyId).not.toContain(A.slice(0, 4));
    const sealed = legacy.seal(envelope, ctx, now + 1000);
    // Beside the new list it is accepted for reading only; listed bare, the same.
    for (const env of [{ CODEMODE_SNAPSHOT_KEYS: `k2:${B}`, CODEMODE_SNAPSHOT_KEY: A }, { CODEMODE_SNAPSHOT_KEYS: `k2:${B},${A}` }]) {
      const next = SnapshotSealer.fromEnv(env);
      expect(next.keyIds).toEqual(["k2", derivedKeyId(A)]);
      expect(Buffer.from(next.open(sealed, ctx, now)).toString()).toBe("an envelope");
    }
    // Another single key is another id: refused as a key this sidecar does not have.
    expect(() => SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEY: B }).open(sealed, ctx, now)).toThrow(SnapshotKeyUnavailableError);
  });

  it("needs keys of at least 32 characters and valid ids, never quotes a secret, and makes a per-process key when none is set", () => {
    expect(() => SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEY: "short" })).toThrow(/CODEMODE_SNAPSHOT_KEY must be at least 32/);
    expect(() => SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k2:${B},k1:short` })).toThrow(/key id "k1".*at least 32/);
    expect(() => SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: "tooshort" })).toThrow(/at least 32/);
    const badId = () => SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `se/cret:${A}` });
    expect(badId).toThrow(/invalid key id/);
    expect(badId).not.toThrow(/se\/cret/);
    expect(() => SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k1:${A},k1:${B}` })).toThrow(/key id "k1" with two different secrets/);
    expect(SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k1:${A},k1:${A}` }).keyIds).toEqual(["k1"]);
    expect(() => SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: " , ," })).toThrow(/lists no keys/);

    const mine = SnapshotSealer.fromEnv({});
    const theirs = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: "", CODEMODE_SNAPSHOT_KEY: "" });
    expect([mine.shared, theirs.shared, sealer.shared]).toEqual([false, false, true]);
    expect(mine.sealingKeyId).toMatch(/^process-[0-9a-f]{12}$/);
    expect(mine.sealingKeyId).not.toBe(theirs.sealingKeyId);
    const now = Date.now();
    const sealed = mine.seal(envelope, ctx, now + 1000);
    expect(Buffer.from(mine.open(sealed, ctx, now)).toString()).toBe("an envelope");
    expect(() => theirs.open(sealed, ctx, now)).toThrow(SnapshotKeyUnavailableError);
  });
});
