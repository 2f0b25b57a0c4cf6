/**
 * Large tool answers parsed in the VM while the main thread validates them
 * (src/sandbox/worker/staged-answers.ts).
 *
 * On a real one-thread pool: the answer marked staged settles from what the VM parsed
 * ahead (it carries no text of its own); a withdrawn text leaves nothing the program can
 * see; a text the VM cannot parse ahead (out of memory, a leading BOM, nesting past the
 * stack guard) fails the exec exactly as the same answer not staged; the program sees the
 * same value staged or not, whatever characters the text holds; a drain's suspension
 * waits for a staged text's verdict. The value settled from an answer parsed ahead is held
 * after the program lets go of it only when it takes at most 1/16 of the memory limit
 * (measured, not judged by its text), only the last one, and not past a snapshot.
 * Through a real `codemode start` (BridgeCallback, codemode.run, ExecSession with and
 * without the answer's scope): a large answer the sidecar refuses (too deep) is refused and
 * the call stays open, so the gateway's next answer is what the program sees, and a large
 * valid answer arrives whole.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EMPTY_GUEST_CATALOG, type NestedCallMessage, type TaskOutcome } from "../../src/sandbox/pool/task-protocol.js";
import type { ExecEvents, ExecHandle } from "../../src/sandbox/pool/pool-contract.js";
import { silentLogger } from "../../src/shared/logger.js";
import { toWireMcpServer, toWireTool } from "../../src/shared/tool-wire.js";
import { execute, scope as newScope, startStack, type Stack } from "../helpers/harness.js";
import { openRun } from "../helpers/gateway.js";

// The built pool, whose worker file is dist's (the sources' own would look for it beside them).
const { startPool } = (await import(
  new URL("../../dist/sandbox/pool/pool-start.js", import.meta.url).href
)) as typeof import("../../src/sandbox/pool/pool-start.js");

const limits = (memoryLimitBytes = 64 * 1024 * 1024) => ({
  timeoutMs: 20_000,
  memoryLimitBytes,
  maxOutputBytes: 4 * 1024 * 1024,
  maxPendingToolCalls: 4,
  maxSnapshotBytes: 8 * 1024 * 1024,
});
const task = (source: string, memoryLimitBytes?: number) =>
  ({
    kind: "exec",
    source,
    language: "javascript",
    limits: limits(memoryLimitBytes),
    catalog: EMPTY_GUEST_CATALOG,
    contextJson: "null",
    outputBytesUsed: 0,
    surface: "code",
  }) as const;

/** `count` rows as JSON text: about 60 characters a row. */
const rowsText = (count: number, tag: string) => JSON.stringify(Array.from({ length: count }, (_, i) => ({ id: i, tag, note: `row ${i} of ${tag}` })));
const A = rowsText(2_000, "a");
const B = JSON.stringify({ small: "b" });
/** Returns what the tool answered, as the program sees it. */
const ECHO = `const v = await tools.call("lookup", {}); return Array.isArray(v) ? { rows: v.length, first: v[0], last: v[v.length - 1] } : v;`;
const seen = (text: string) => {
  const v = JSON.parse(text) as unknown;
  return Array.isArray(v) ? { rows: v.length, first: v[0], last: v[v.length - 1] } : v;
};

describe("answers parsed ahead, on a real pool (one thread)", () => {
  const poolReady = startPool({ threads: 1, execsPerWorker: 4, log: silentLogger() });
  afterAll(async () => (await poolReady).close());

  /** Starts `source` and resolves once its VM awaits its first tool call. */
  async function calling(source: string, memoryLimitBytes?: number): Promise<{ handle: ExecHandle; callId: string }> {
    const pool = await poolReady;
    let called!: (c: NestedCallMessage) => void;
    const call = new Promise<NestedCallMessage>((resolve) => (called = resolve));
    const events: ExecEvents = { onOutput() {}, onToolCall: (c) => called(c), onRequest() {}, onYield() {} };
    const handle = pool.exec(task(source, memoryLimitBytes), events, "t");
    return { handle, callId: (await call).callId };
  }
  const value = (o: TaskOutcome) => (o.status === "completed" ? (JSON.parse(o.valueJson) as unknown) : o);

  it("settles an answer marked staged from what the VM parsed ahead", async () => {
    const same = await calling(ECHO);
    same.handle.stage(same.callId, A);
    same.handle.answer(same.callId, { ok: true, json: A });
    expect(value(await same.handle.outcome)).toEqual(seen(A));

    // The answer message carries no text once its text was staged on the port: the VM's value
    // is A's even though this answer says B (a caller never does this; it shows the path taken).
    const probe = await calling(ECHO);
    probe.handle.stage(probe.callId, A);
    probe.handle.answer(probe.callId, { ok: true, json: B });
    expect(value(await probe.handle.outcome)).toEqual(seen(A));
  });

  it("leaves nothing of a withdrawn text: the call stays open and the next answer is what the program sees", async () => {
    const { handle, callId } = await calling(ECHO);
    handle.stage(callId, A);
    handle.unstage(callId);
    handle.answer(callId, { ok: true, json: B });
    expect(value(await handle.outcome)).toEqual({ small: "b" });
  });

  it("fails a text the VM cannot parse ahead exactly as the same answer not staged", async () => {
    // Too much for a 2 MiB heap: the guest's parse runs out of memory, ahead and at settlement alike.
    const huge = rowsText(40_000, "huge");
    const outcomes: TaskOutcome[] = [];
    for (const staged of [true, false]) {
      const { handle, callId } = await calling(ECHO, 2 * 1024 * 1024);
      if (staged) handle.stage(callId, huge);
      handle.answer(callId, { ok: true, json: huge });
      outcomes.push(await handle.outcome);
    }
    expect(outcomes[0]).toMatchObject({ status: "failed" });
    expect(outcomes[0]!.status === "failed" && outcomes[0]!.error).toMatch(/out of memory/);
    expect(outcomes[0]!.status === "failed" && outcomes[0]!.error).toBe(outcomes[1]!.status === "failed" && outcomes[1]!.error);
  });

  /** The outcomes of `text` answered with and without staging it first. */
  async function stagedAndNot(text: string, source = ECHO): Promise<TaskOutcome[]> {
    const outcomes: TaskOutcome[] = [];
    for (const staged of [true, false]) {
      const { handle, callId } = await calling(source);
      if (staged) handle.stage(callId, text);
      handle.answer(callId, { ok: true, json: text });
      outcomes.push(await handle.outcome);
    }
    return outcomes;
  }
  const pad = "x".repeat(40_000);

  it("gives the program the same value staged or not, whatever characters the text holds", async () => {
    // Non-ASCII in every UTF-8 length, escapes, and a raw lone surrogate (no UTF-8 form: answered unstaged).
    const unicode = JSON.stringify({ pad, s: "é日本😀\u2028", rows: Array.from({ length: 500 }, (_, i) => ({ i, n: `ünï ${i} 🎉` })) });
    const lone = `{"pad":"${pad}","s":"a\ud800b"}`;
    const CODES = `const v = await tools.call("lookup", {}); return [...(v.s ?? "")].map((c) => c.codePointAt(0)).concat(v.rows ? [v.rows.length, v.rows[499].n] : []);`;
    for (const text of [unicode, lone]) {
      const [staged, plain] = await stagedAndNot(text, CODES);
      expect(staged).toMatchObject({ status: "completed" });
      expect(staged!.status === "completed" && staged!.valueJson).toBe(plain!.status === "completed" && plain!.valueJson);
    }
    const [lonely] = await stagedAndNot(lone, CODES);
    expect(lonely!.status === "completed" && JSON.parse(lonely!.valueJson)).toEqual([97, 0xd800, 98]);
  });

  it("fails a text that does not parse ahead (a leading BOM, nesting past the stack guard) exactly as unstaged", async () => {
    // The main thread refuses both before any program could see them; here they are let through to compare the two paths.
    for (const text of [`\uFEFF{"pad":"${pad}"}`, "[".repeat(200_000) + "]".repeat(200_000)]) {
      const [staged, plain] = await stagedAndNot(text);
      expect(staged).toMatchObject({ status: "failed" });
      expect(staged!.status === "failed" && staged!.error).toBe(plain!.status === "failed" && plain!.error);
    }
    // Refused and withdrawn: the deep text leaves the VM whole, and the next answer is what the program sees.
    const { handle, callId } = await calling(ECHO);
    handle.stage(callId, "[".repeat(200_000) + "]".repeat(200_000));
    handle.unstage(callId);
    handle.answer(callId, { ok: true, json: B });
    expect(value(await handle.outcome)).toEqual({ small: "b" });
  });

  it("takes a staged answer's verdict before suspending for a drain", async () => {
    // The port delivers in order: the VM stages the text, then learns of the drain, then gets the verdict.
    const accepted = await calling(ECHO);
    accepted.handle.stage(accepted.callId, A);
    accepted.handle.suspend();
    accepted.handle.answer(accepted.callId, { ok: true, json: A });
    expect(value(await accepted.handle.outcome)).toEqual(seen(A));

    const refused = await calling(ECHO);
    refused.handle.stage(refused.callId, A);
    refused.handle.suspend();
    refused.handle.unstage(refused.callId);
    const o = await refused.handle.outcome;
    expect(o).toMatchObject({ status: "suspended", reason: "pending_tools", pending: [{ callId: refused.callId, kind: "call" }] });
  });
});

describe("a value parsed ahead is held after the program lets go of it (never freed object by object)", () => {
  // QuickJS frees an object when its last reference goes and clears its WeakRefs then, so a
  // WeakRef to the answer tells the program whether the prelude still holds it (read in a
  // later job: the job that resumed the program still references the value it resumed with).
  const poolReady = startPool({ threads: 1, execsPerWorker: 4, log: silentLogger() });
  afterAll(async () => (await poolReady).close());
  const STILL_THERE = `const w = new WeakRef(await tools.call("lookup", {})); await null; return w.deref() !== undefined;`;

  /** Runs `source`, answering its calls in order with `answers` (each staged first when `stage`). */
  async function run(source: string, answers: string[], opts: { memoryLimitBytes?: number; stage?: boolean; suspendAt?: number } = {}) {
    const pool = await poolReady;
    const calls: string[] = [];
    let handle!: ExecHandle;
    const events: ExecEvents = {
      onOutput() {},
      onToolCall: (c) => {
        const i = calls.push(c.callId) - 1;
        if (i === opts.suspendAt) return handle.suspend();
        if (opts.stage !== false) handle.stage(c.callId, answers[i]!);
        handle.answer(c.callId, { ok: true, json: answers[i]! });
      },
      onRequest() {},
      onYield() {},
    };
    handle = pool.exec(task(source, opts.memoryLimitBytes), events, "t");
    return { outcome: await handle.outcome, calls };
  }
  const value = (o: TaskOutcome) => (o.status === "completed" ? (JSON.parse(o.valueJson) as unknown) : o);

  it("holds a staged answer whose parsed value takes at most 1/16 of the memory limit, whatever its text's length", async () => {
    expect(value((await run(STILL_THERE, [A])).outcome)).toBe(true);
    // 36 KB of text, about 1 MB of objects: held under 64 MiB (4 MiB may be held), not under 8 MiB (512 KiB).
    const empties = `[${"{},".repeat(12_000)}{}]`;
    expect(value((await run(STILL_THERE, [empties])).outcome)).toBe(true);
    expect(value((await run(STILL_THERE, [empties], { memoryLimitBytes: 8 * 1024 * 1024 })).outcome)).toBe(false);
    // An answer not staged (parsed by the guest at settlement) is never held.
    expect(value((await run(STILL_THERE, [A], { stage: false })).outcome)).toBe(false);
  });

  it("holds only the last one: the one before is freed when the next settles", async () => {
    const source = `const w1 = new WeakRef(await tools.call("lookup", {})); const w2 = new WeakRef(await tools.call("lookup", {}));
      await null; return [w1.deref() !== undefined, w2.deref() !== undefined];`;
    expect(value((await run(source, [A, A])).outcome)).toEqual([false, true]);
  });

  it("lets go of it before a snapshot: the resumed run no longer holds it", async () => {
    const source = `const w = new WeakRef(await tools.call("lookup", {})); await tools.call("lookup", {}); return w.deref() !== undefined;`;
    const first = await run(source, [A], { suspendAt: 1 });
    expect(first.outcome).toMatchObject({ status: "suspended", reason: "pending_tools" });
    if (first.outcome.status !== "suspended") return;
    const pool = await poolReady;
    const resumed = pool.exec(
      {
        kind: "resume",
        envelope: first.outcome.envelope,
        pending: first.outcome.pending,
        answers: [{ t: "answer", callId: first.calls[1]!, ok: true, json: B }],
        limits: limits(),
        outputBytesUsed: 0,
      },
      { onOutput() {}, onToolCall() {}, onRequest() {}, onYield() {} },
      "t",
    );
    expect(value(await resumed.outcome)).toBe(false);
  });
});

describe("large answers through a real sidecar", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    expect(await stack?.stop()).toBe(0);
  });

  /** Runs `request`, answering its one nested call with `refused` (expected INVALID_ARGUMENT) and then `good`; returns the outcome and the refusals. */
  async function refusedThenAnswered(request: Parameters<typeof execute>[1] & { scope: ReturnType<typeof newScope> }, refused: string, good: string) {
    const refusals: string[] = [];
    const answered: Promise<unknown>[] = [];
    const out = await execute(stack, request, (call) => {
      const answer = (value: string) => stack.sandbox.bridgeCallback({ scope: request.scope, callId: call.callId, outcome: { case: "resultJson", value } });
      answered.push(
        answer(refused)
          .then(undefined, (err: Error) => refusals.push(err.message))
          .then(() => answer(good)),
      );
    });
    await Promise.all(answered);
    return { out, refusals };
  }

  it("refuses a large answer nested too deep, keeps the call open, and delivers the next answer whole", async () => {
    const { scope } = await openRun(stack, [{ name: "lookup" }]);
    // Valid JSON for any parser, over the stage threshold, but deeper than the bridge allows.
    const deep = JSON.stringify({ pad: "x".repeat(40_000), deep: JSON.parse("[".repeat(200) + "]".repeat(200)) });
    const { out, refusals } = await refusedThenAnswered({ scope, code: ECHO.replace(`tools.call("lookup", {})`, "tools.lookup({})") }, deep, A);
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatch(/nests deeper than 128/);
    expect(out.model).toMatchObject({ status: "completed", value: seen(A) });
  });

  it("does the same for a codemode.run script (MCP_RUN surface, whose prelude has its own deliver)", async () => {
    const scope = newScope("staged-mcprun");
    await stack.control.openRun({
      scope,
      catalog: {
        case: "tools",
        value: {
          tools: [toWireTool({ name: "lookup", source: "mcp", owner: "Docs", parameters: { type: "object" } })],
          mcpServers: [toWireMcpServer({ name: "Docs", title: "Docs", version: "1.0.0" })],
        },
      },
      mcpRun: { enabled: true },
    });
    const deep = JSON.stringify({ structuredContent: { pad: "x".repeat(40_000), deep: JSON.parse("[".repeat(200) + "]".repeat(200)) } });
    const good = `{"structuredContent":{"rows":${A}}}`;
    const code = `import { lookup } from "@codemode/servers/docs"; const v = await lookup({}); globalThis.__codemode_result__ = v.deep ? "refused answer seen" : { rows: v.rows.length, last: v.rows[v.rows.length - 1] };`;
    const { out, refusals } = await refusedThenAnswered({ scope, execCallId: "call-1", inputJson: JSON.stringify({ code }) }, deep, good);
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatch(/nests deeper than 128/);
    const rows = JSON.parse(A) as unknown[];
    expect(JSON.parse(out.result.valueJson)).toEqual({ rows: rows.length, last: rows.at(-1) });
  });

  it("does the same over ExecSession, for answers with and without their scope", async () => {
    const { scope } = await openRun(stack, [{ name: "lookup" }]);
    const deep = JSON.stringify({ pad: "é".repeat(40_000), deep: JSON.parse("[".repeat(200) + "]".repeat(200)) });
    const good = JSON.stringify({ pad: "é😀".repeat(20_000), rows: JSON.parse(A) as unknown });
    const code = `const v = await tools.lookup({}); return { pad: v.pad.length, rows: v.rows.length, last: v.rows[v.rows.length - 1] };`;
    for (const withScope of [true, false]) {
      const s = stack.sandbox.execSession();
      s.send({ message: { case: "exec", value: { scope, code } } });
      const refusals: string[] = [];
      let result: { valueJson: string; status: number } | undefined;
      for await (const ev of s.messages) {
        if (ev.event.case === "toolCall") {
          const callId = ev.event.value.callId;
          for (const value of [deep, good])
            s.send({ message: { case: "answer", value: { ...(withScope ? { scope } : {}), callId, outcome: { case: "resultJson", value } } } });
        } else if (ev.event.case === "answerRefused") refusals.push(ev.event.value.message);
        else if (ev.event.case === "result") {
          result = ev.event.value;
          s.end();
        }
      }
      expect(refusals).toEqual([expect.stringMatching(/nests deeper than 128/)]);
      const rows = JSON.parse(A) as unknown[];
      expect(JSON.parse(result!.valueJson)).toEqual({ pad: 20_000 * 3, rows: rows.length, last: rows.at(-1) });
    }
  });
});
