/**
 * Replay records' seals (src/sandbox/suspend/snapshot-seal.ts `sealRecord` / `openRecord`,
 * docs/replay.md#the-record): a record verifies only under a key this sidecar holds, for the
 * run and scope it was recorded for, byte for byte as sealed; a rebuild by replay
 * (src/sandbox/suspend/rebuild.ts) refuses every record that does not, before anything of it
 * runs. No process, no port: the link is a stub that hands out stored texts.
 */
import { describe, expect, it } from "vitest";
import type { Scope } from "../../src/shared/scope.js";
import { scopeKeyOf } from "../../src/shared/scope.js";
import { silentLogger } from "../../src/shared/logger.js";
import { RecordAuthError, RecordKeyUnavailableError, SnapshotSealer } from "../../src/sandbox/suspend/snapshot-seal.js";
import { rebuildByReplay, verifiedSegments } from "../../src/sandbox/suspend/rebuild.js";
import { recordStart, segmentRecordJson, type SegmentRecord } from "../../src/sandbox/exec/replay-record.js";
import type { OrchestratorLink } from "../../src/sandbox/link/orchestrator-link.js";
import type { Submission } from "../../src/sandbox/pool/pool-contract.js";
import type { TaskOutcome } from "../../src/sandbox/pool/task-protocol.js";
import type { Tape } from "../../src/sandbox/worker/replay-tape.js";

const A = "record-seal-secret-a-0123456789abcdefghij";
const B = "record-seal-secret-b-0123456789abcdefghij";
const sealer = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k1:${A}` });
const scope: Scope = { agentId: "a", sessionId: "s", sessionKey: "k", agentRunId: "r" };
const ctx = { codeModeRunId: "cm_1", scopeKey: scopeKeyOf(scope) };

/** A small exec segment's record, as a sidecar makes it (`secret`: its VM received a secret answer). */
function record(source: string, answer: string, secret = false): string {
  const submission = {
    kind: "exec",
    source,
    language: "javascript",
    contextJson: "{}",
    catalog: { staticJson: "{}", allToolsJson: "[]", convenienceJson: "[]", needsContext: false },
    limits: { timeoutMs: 300 },
    outputBytesUsed: 0,
  } as unknown as Submission;
  const tape: Tape = {
    clock: [],
    seeds: ["1"],
    ids: ["c1"],
    events: [{ batch: [secret ? { c: "c1", secret: 1, ok: true } : { c: "c1", j: answer }] }],
    sent: [{ call: "c1", via: "tools", target: "lookup", path: "", input: '{"n":1}' }],
    polls: 0,
    ...(secret ? { tainted: true as const } : {}),
  };
  const ended = { status: "completed", valueJson: answer, outputBytes: 0, tape } as unknown as TaskOutcome;
  return segmentRecordJson(
    recordStart(submission, { version: "0.0.0", quickjs: "0" }, 1),
    ended,
    tape,
    {
      from: 0,
      result: {
        input: { status: "completed", valueJson: answer },
        telemetry: {} as SegmentRecord["result"]["telemetry"],
        priorOutputs: [],
        modelJson: `{"status":"completed","value":${answer}}`,
      },
    },
    { sealer, ...ctx },
  );
}

describe("a replay record's seal", () => {
  const sealed = record('return (await tools.lookup({ n: 1 })).v + "\\u2028\\"é"', '{"v":"real"}');

  it("is the record's last member, and opening it gives the record as sealed", () => {
    const parsed = JSON.parse(sealed) as SegmentRecord;
    expect(parsed.seal).toMatch(/^cmrs1:k1:[A-Za-z0-9_-]{43}$/);
    expect(Object.keys(parsed).at(-1)).toBe("seal");
    const opened = sealer.openRecord(sealed, ctx);
    const { seal: _seal, ...rest } = parsed;
    expect(opened).toBe(JSON.stringify(rest));
    expect(JSON.parse(opened)).toEqual(rest);
  });

  it("refuses an altered program, an altered answer, any flipped character, and an appended member", () => {
    const program = sealed.replace("(await tools.lookup({ n: 1 })).v", '"pwned"');
    const answer = sealed.replace('\\"real\\"', '\\"evil\\"');
    expect(program).not.toBe(sealed);
    expect(answer).not.toBe(sealed);
    for (const altered of [program, answer, sealed.replace('"from":0', '"from":1'), `${sealed.slice(0, -1)},"x":1}`]) {
      expect(() => sealer.openRecord(altered, ctx)).toThrow(RecordAuthError);
    }
    for (let i = 1; i < sealed.length - 60; i += 97) {
      const flipped = sealed.slice(0, i) + String.fromCharCode(sealed.charCodeAt(i) ^ 1) + sealed.slice(i + 1);
      expect(() => sealer.openRecord(flipped, ctx), `character ${i}`).toThrow(RecordAuthError);
    }
    expect(() => sealer.openRecord(program, ctx)).toThrow(/seal does not match/);
  });

  it("refuses a record moved to another run or scope", () => {
    expect(() => sealer.openRecord(sealed, { ...ctx, codeModeRunId: "cm_2" })).toThrow(/seal does not match/);
    expect(() => sealer.openRecord(sealed, { ...ctx, scopeKey: scopeKeyOf({ ...scope, agentRunId: "r2" }) })).toThrow(/seal does not match/);
    expect(() => sealer.openRecord(sealed, { ...ctx, scopeKey: scopeKeyOf({ ...scope, tenant: "other" }) })).toThrow(/seal does not match/);
  });

  it("refuses a record without a seal as unsealed, and a malformed seal as altered", () => {
    const { seal: _seal, ...rest } = JSON.parse(sealed) as SegmentRecord;
    const bare = JSON.stringify(rest);
    const err = (() => {
      try {
        sealer.openRecord(bare, ctx);
      } catch (e) {
        return e as RecordAuthError;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(RecordAuthError);
    expect(err?.unsealed).toBe(true);
    expect(err?.message).toMatch(/carries no seal/);
    // A seal moved off the end, or one in another format, is no missing seal: it was altered.
    const moved = `{"seal":"${(JSON.parse(sealed) as SegmentRecord).seal}",${bare.slice(1)}`;
    for (const bad of [moved, sealed.replace(/"seal":"cmrs1:/, '"seal":"cmrs9:'), sealed.replace(/"seal":"cmrs1:k1:/, '"seal":"cmrs1:k1:x:')]) {
      const e = (() => {
        try {
          sealer.openRecord(bad, ctx);
        } catch (x) {
          return x as RecordAuthError;
        }
        return undefined;
      })();
      expect(e).toBeInstanceOf(RecordAuthError);
      expect(e?.unsealed).toBe(false);
    }
  });

  it("names a key id this sidecar does not hold; a rotated-out key still listed opens", () => {
    const other = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k2:${B}` });
    expect(() => other.openRecord(sealed, ctx)).toThrow(RecordKeyUnavailableError);
    expect(() => other.openRecord(sealed, ctx)).toThrow(/key id "k1"/);
    // The same id with another secret is not the key: the seal does not match.
    expect(() => SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k1:${B}` }).openRecord(sealed, ctx)).toThrow(/seal does not match/);
    // Rotation: k2 seals now, k1 (still listed) opens what it sealed.
    const rotated = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k2:${B},k1:${A}` });
    expect(rotated.openRecord(sealed, ctx)).toBe(sealer.openRecord(sealed, ctx));
    expect(JSON.parse(rotated.sealRecord('{"a":1}', ctx)).seal).toMatch(/^cmrs1:k2:/);
    // A bare secret's derived id works the same way.
    const single = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEY: A });
    const bySingle = single.sealRecord('{"a":1}', ctx);
    expect(SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k3:${B}`, CODEMODE_SNAPSHOT_KEY: A }).openRecord(bySingle, ctx)).toBe('{"a":1}');
  });

  it("a per-process key opens only its own process's records", () => {
    const mine = SnapshotSealer.fromEnv({});
    const theirs = SnapshotSealer.fromEnv({});
    const text = mine.sealRecord('{"a":1}', ctx);
    expect(mine.openRecord(text, ctx)).toBe('{"a":1}');
    expect(() => theirs.openRecord(text, ctx)).toThrow(RecordKeyUnavailableError);
  });

  it("covers the record as stored: a secret answer's record keeps only hashes, and they are sealed", () => {
    const tainted = record("return (await tools.lookup({})).v", '{"v":"the secret"}', true);
    expect(tainted).not.toContain("the secret");
    const opened = JSON.parse(sealer.openRecord(tainted, ctx)) as SegmentRecord;
    expect(opened.outcome).toMatchObject({ status: "completed", valueJson: expect.stringMatching(/^sha256:/) });
    expect(() =>
      sealer.openRecord(
        tainted.replace(/"valueJson":"sha256:[0-9a-f]/, (m) => m.slice(0, -1) + (m.endsWith("0") ? "1" : "0")),
        ctx,
      ),
    ).toThrow(RecordAuthError);
  });
});

describe("a rebuild by replay checks every segment's seal first", () => {
  const link = (segments: string[]) => ({ client: { replayRecord: async () => ({ segments }) } }) as unknown as OrchestratorLink;
  const log = silentLogger();
  const one = record("return (await tools.lookup({ n: 1 })).v", '{"v":"real"}');
  const two = record("return (await tools.lookup({ n: 1 })).v + 1", '{"v":"real"}');

  it("hands on the texts as sealed, seals off, when every segment verifies", () => {
    const v = verifiedSegments(sealer, scope, "cm_1", [one, two], log);
    expect(v).toEqual({ ok: true, texts: [sealer.openRecord(one, ctx), sealer.openRecord(two, ctx)] });
  });

  it("refuses a tampered segment, naming it, before any replay", async () => {
    const tampered = two.replace("+ 1", '+ "pwned"');
    const r = await rebuildByReplay(link([one, tampered]), scope, "cm_1", 1, log, sealer);
    expect(r).toEqual({
      ok: false,
      reason: expect.stringMatching(/^its replay record failed authentication \(segment 2 of 2: the replay record's seal does not match/),
    });
  });

  it("refuses another run's record, an unsealed one, and one under a key it does not hold", async () => {
    expect(await rebuildByReplay(link([one]), scope, "cm_other", 1, log, sealer)).toMatchObject({ ok: false, reason: /failed authentication/ });
    const { seal: _s, ...bare } = JSON.parse(one) as SegmentRecord;
    expect(await rebuildByReplay(link([JSON.stringify(bare)]), scope, "cm_1", 1, log, sealer)).toMatchObject({
      ok: false,
      reason: /^its replay record \(segment 1 of 1\) is not sealed/,
    });
    const other = SnapshotSealer.fromEnv({ CODEMODE_SNAPSHOT_KEYS: `k2:${B}` });
    expect(await rebuildByReplay(link([one]), scope, "cm_1", 1, log, other)).toMatchObject({
      ok: false,
      reason: /sealed under key id "k1", which is not among this sidecar's snapshot keys/,
    });
    // Per-process keys: a rebuild runs on another process than the one that recorded, so it can never verify.
    expect(await rebuildByReplay(link([one]), scope, "cm_1", 1, log, SnapshotSealer.fromEnv({}))).toMatchObject({
      ok: false,
      reason: /sealed by another sidecar process \(key id "k1"\), and this sidecar has no shared snapshot key/,
    });
  });

  it("refuses a run with no record", async () => {
    expect(await rebuildByReplay(link([]), scope, "cm_1", 1, log, sealer)).toMatchObject({ ok: false, reason: /no replay record is kept/ });
  });
});
