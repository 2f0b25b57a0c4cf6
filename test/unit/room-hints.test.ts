/**
 * Which execs start on a grown VM instance (src/sandbox/pool/room-hints.ts): after a session's
 * exec grew its instance, that session's next execs ask for a grown one; other sessions'
 * execs take an image-sized instance, so a small program never pays the reset of a grown
 * one (all of its memory written) because some other session had a large answer.
 *
 * Through a real one-thread pool: the session that grew takes the idle grown instance,
 * which leaves the image-sized one to another session's exec running at the same time; a
 * run that fills the grown instance's room renews its session's hint, a small one does not.
 */
import { afterAll, describe, expect, it } from "vitest";
import { ROOMY_EXECS, RoomHints } from "../../src/sandbox/pool/room-hints.js";
import { EMPTY_GUEST_CATALOG, type NestedCallMessage } from "../../src/sandbox/pool/task-protocol.js";
import type { ExecEvents } from "../../src/sandbox/pool/pool-contract.js";
import { silentLogger } from "../../src/shared/logger.js";

// The built pool, whose worker file is dist's (the sources' own would look for it beside them).
const { startPool } = (await import(
  new URL("../../dist/sandbox/pool/pool-start.js", import.meta.url).href
)) as typeof import("../../src/sandbox/pool/pool-start.js");

const task = (source: string) =>
  ({
    kind: "exec",
    source,
    language: "javascript",
    limits: { timeoutMs: 20_000, memoryLimitBytes: 64 * 1024 * 1024, maxOutputBytes: 1_024, maxPendingToolCalls: 4, maxSnapshotBytes: 1_024 },
    catalog: EMPTY_GUEST_CATALOG,
    contextJson: "null",
    outputBytesUsed: 0,
    surface: "code",
  }) as const;
const ignore: ExecEvents = { onOutput() {}, onToolCall() {}, onRequest() {}, onYield() {} };
/** Parses 12,000 rows: more heap than an image has, so the instance grows. */
const GROWS = `const rows = JSON.parse(JSON.stringify(Array.from({ length: 12000 }, (_, i) => ({ id: i, s: "row" + i })))); return rows.length;`;

describe("room hints", () => {
  it("gives a session room for its next execs after one grew, counting down", () => {
    const hints = new RoomHints();
    expect(hints.take("a")).toBe(false);
    hints.grew("a");
    for (let i = 0; i < ROOMY_EXECS; i++) expect(hints.take("a")).toBe(true);
    expect(hints.take("a")).toBe(false);
    expect(hints.take("b")).toBe(false);
  });
});

describe("grown instances on a real pool (one thread)", () => {
  const poolReady = startPool({ threads: 1, execsPerWorker: 4, log: silentLogger() });
  afterAll(async () => (await poolReady).close());

  it("starts the grown session's exec on the grown instance and another session's on an image-sized one", async () => {
    const pool = await poolReady;
    const grew = await pool.exec(task(GROWS), ignore, "big").outcome;
    expect(grew).toMatchObject({ status: "completed", valueJson: "12000", grew: true });
    // Another session's small exec: the only idle instance is grown, so it gets a new image-sized one.
    const small = await pool.exec(task("return 1"), ignore, "small").outcome;
    expect(small).toMatchObject({ status: "completed", vmStart: "restored" });
    expect(small.grew).toBeUndefined();

    // Now both kinds are idle. The grown session's exec holds its VM (awaiting a tool answer)
    // while the other session's exec runs: each gets its own kind, so that one is reused.
    let call: NestedCallMessage | undefined;
    let called!: () => void;
    const calledNow = new Promise<void>((resolve) => (called = resolve));
    const held = pool.exec(task(`await tools.call("lookup", {}); return 2;`), { ...ignore, onToolCall: (c) => ((call = c), called()) }, "big");
    await calledNow;
    const beside = await pool.exec(task("return 3"), ignore, "small").outcome;
    expect(beside).toMatchObject({ status: "completed", valueJson: "3", vmStart: "reused" });
    held.answer(call!.callId, { ok: true, json: "{}" });
    // It ran on the grown instance: the room was there, nothing grew, and it used none of it.
    const roomy = await held.outcome;
    expect(roomy).toMatchObject({ status: "completed", valueJson: "2", vmStart: "reused" });
    expect(roomy.grew).toBeUndefined();
  });

  it("renews the room for a session whose exec used the room of the grown instance it started on", async () => {
    const pool = await poolReady;
    expect(await pool.exec(task(GROWS), ignore, "steady").outcome).toMatchObject({ status: "completed", grew: true });
    // Its next exec starts on the grown instance and fills past the image's size without
    // growing it: that counts as needing room, so a session of large answers keeps it
    // (before, its every ROOMY_EXECS + 1st exec got an image-sized instance and grew it).
    const again = await pool.exec(task(GROWS), ignore, "steady").outcome;
    expect(again).toMatchObject({ status: "completed", valueJson: "12000", vmStart: "reused", grew: true });
  });
});
