/**
 * A live VM's checkpoints (src/sandbox/suspend/checkpoints.ts) against a fake store that
 * stalls as a SIGSTOPped Redis does: while stalled, every call fails UNAVAILABLE at once, yet
 * the store runs it later, in order, once it is back (a late try). The held call goes out when
 * the store is back before the VM ends; when the VM ends first it is dropped, and the stored
 * checkpoint is kept even though a late try of its invalidation lands. A clear refusal is not
 * an outage and holds nothing, nor does a first try still in flight when the VM ends.
 */
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ServiceError } from "../../src/protocol/service-error.js";
import type { CodeModeConfig } from "../../src/shared/config.js";
import { STORE_UNAVAILABLE } from "../../src/shared/store-errors.js";
import type { Segment } from "../../src/sandbox/exec/segment.js";
import type { CheckpointMessage } from "../../src/sandbox/pool/pool-contract.js";
import { Checkpoints } from "../../src/sandbox/suspend/checkpoints.js";
import type { SuspendContext } from "../../src/sandbox/suspend/suspension.js";
import { until } from "../helpers/until.js";

const ms = (n: number) => new Promise((r) => setTimeout(r, n));

type Req = Record<string, unknown> & { claimToken: string; generation?: bigint; run?: { generation: bigint; snapshot: Uint8Array } };

/** The store's view of one run, and a switch that stalls it. */
function fakeStore() {
  const s = {
    generation: 0,
    lost: false,
    claim: undefined as string | undefined,
    snapshot: undefined as Uint8Array | undefined,
    stalled: false,
    /** How long an answer takes when the store is up. */
    slowMs: 0,
    late: [] as Array<() => void>,
  };
  const call = <T>(op: () => T): Promise<T> => {
    if (!s.stalled) return s.slowMs > 0 ? ms(s.slowMs).then(op) : Promise.resolve(op());
    s.late.push(() => void op());
    return Promise.reject(new ServiceError("unavailable", `${STORE_UNAVAILABLE}: could not do it; try again later`));
  };
  const rpc = {
    suspendRun: (req: Req) =>
      call(() => {
        const generation = Number(req.run!.generation);
        if (req.reclaim && s.claim !== req.claimToken) return { refused: "claim lost", answeredCallIds: [] };
        if (generation !== s.generation + 1) return { refused: "stale", answeredCallIds: [] };
        Object.assign(s, { generation, lost: false, snapshot: req.run!.snapshot, claim: req.checkpoint ? req.claimToken : undefined });
        return { refused: "", answeredCallIds: [] };
      }),
    invalidateRun: (req: Req) =>
      call(() => {
        const generation = Number(req.generation);
        if (s.claim !== req.claimToken) return { invalidated: false };
        if (s.lost) return { invalidated: s.generation === generation + 1 };
        if (s.generation !== generation) return { invalidated: false };
        Object.assign(s, { lost: true, snapshot: undefined, generation: generation + 1 });
        return { invalidated: true };
      }),
  };
  const resume = () => {
    s.stalled = false;
    for (const op of s.late.splice(0)) op();
  };
  return { s, rpc, resume };
}

function setUp() {
  const store = fakeStore();
  const logged: string[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => void logged.push((JSON.parse(line) as { msg: string }).msg) });
  const seg = {
    log,
    made: new Map([["a", { callId: "a", kind: "call", toolId: "t_a", toolName: "slow_a" }]]),
    answers: new Map(),
    awaitingApproval: new Map(),
    handOver: () => {},
    commitSession: async () => undefined,
    answerFromStore: () => {},
    cancel: () => {},
  } as unknown as Segment;
  const ctx = {
    scope: {},
    scopeKey: "scope",
    codeModeRunId: "cm_1",
    execCallId: "exec_1",
    config: { maxSnapshotBytes: 1_000_000, snapshotTtlSeconds: 60 } as CodeModeConfig,
    catalogVersion: "",
    link: { rpc: store.rpc, sidecarId: "sc_1" },
    sealer: { seal: (envelope: Uint8Array) => envelope.slice() },
    signal: new AbortController().signal,
  } as unknown as SuspendContext;
  const checkpoints = new Checkpoints(seg, ctx, false);
  const envelope = new Uint8Array([1, 2, 3]);
  checkpoints.take({ t: "checkpoint", envelope, pending: [{ callId: "a", kind: "call" }], outputBytes: 0 } as CheckpointMessage);
  return { store, logged, checkpoints, envelope };
}

const settled = (p: Promise<unknown>) => {
  let done = false;
  void p.finally(() => (done = true));
  return () => done;
};

describe("checkpoints while the store cannot be reached", () => {
  it("holds the VM's next call until the invalidation lands, then lets it go out", async () => {
    const { store, logged, checkpoints } = setUp();
    await until(() => store.s.generation === 1, "the checkpoint stored");
    store.s.stalled = true;
    const cleared = checkpoints.beforeCall({ callId: "b", toolName: "slow_b" })!;
    const done = settled(cleared);
    await ms(500);
    expect(done()).toBe(false);
    store.resume();
    expect(await cleared).toBe(true);
    expect(checkpoints.heldBack).toBe(false);
    expect(store.s).toMatchObject({ generation: 2, lost: true });
    expect(logged.filter((m) => m.startsWith("held a nested call"))).toEqual([
      expect.stringMatching(/^held a nested call while the orchestrator's store could not be reached .*: the invalidation landed and the call went out$/),
    ]);
    expect(await checkpoints.end()).toMatchObject({ generation: 2 });
  });

  it("drops the held call when the VM ends first, and keeps the checkpoint though a late try of its invalidation lands", async () => {
    const { store, logged, checkpoints, envelope } = setUp();
    await until(() => store.s.generation === 1, "the checkpoint stored");
    store.s.stalled = true;
    const cleared = checkpoints.beforeCall({ callId: "b", toolName: "slow_b" })!;
    await ms(300);
    const ended = checkpoints.end();
    expect(await cleared).toBe(false);
    await ended;
    expect(checkpoints.heldBack).toBe(true);
    expect(checkpoints.keepStored(true).kept).toBe(true);
    expect(logged).toContainEqual(expect.stringMatching(/the VM parked first, so the call was not sent; the run is kept at its stored checkpoint/));
    await ms(300);
    // Still stalled: the store has not changed, and the tries wait for it.
    expect(store.s).toMatchObject({ generation: 1, lost: false });
    store.resume();
    // The late tries ran first (the checkpoint is lost), then the kept snapshot is stored again, unclaimed.
    await until(() => store.s.generation === 3, "the checkpoint stored again");
    expect(store.s).toMatchObject({ lost: false, claim: undefined, snapshot: envelope });
    expect(logged).toContainEqual(expect.stringMatching(/^the store answered again: the run is kept at its stored checkpoint, unclaimed/));
  });

  it("keeps nothing when the VM ended otherwise (it failed): the store is left as it is", async () => {
    const { store, checkpoints } = setUp();
    await until(() => store.s.generation === 1, "the checkpoint stored");
    store.s.stalled = true;
    const cleared = checkpoints.beforeCall({ callId: "b", toolName: "slow_b" })!;
    await ms(100);
    await checkpoints.end();
    expect(await cleared).toBe(false);
    expect(checkpoints.keepStored(false).kept).toBe(false);
    store.resume();
    await ms(300);
    expect(store.s).toMatchObject({ generation: 2, lost: true });
  });

  it("lets the first try of an invalidation finish when the VM ends meanwhile (nothing was held): the call goes out", async () => {
    const { store, logged, checkpoints } = setUp();
    await until(() => store.s.generation === 1, "the checkpoint stored");
    store.s.slowMs = 100;
    const cleared = checkpoints.beforeCall({ callId: "b", toolName: "slow_b" })!;
    const ended = checkpoints.end();
    expect(await cleared).toBe(true);
    expect(await ended).toMatchObject({ generation: 2 });
    expect(checkpoints.heldBack).toBe(false);
    expect(logged.some((m) => m.startsWith("held a nested call"))).toBe(false);
  });

  it("does not hold a call the store refuses clearly (the claim is no longer current)", async () => {
    const { store, logged, checkpoints } = setUp();
    await until(() => store.s.generation === 1, "the checkpoint stored");
    store.s.claim = "another-wait";
    expect(await checkpoints.beforeCall({ callId: "b", toolName: "slow_b" })).toBe(false);
    expect(checkpoints.heldBack).toBe(false);
    expect(logged).toContain("the run's claim was lost: its next nested call is not sent");
    // As before: no nested call goes out any more, and the segment is cancelled (src/sandbox/exec/segment.ts).
    expect(await checkpoints.beforeCall({ callId: "c", toolName: "slow_b" })).toBe(false);
  });
});
