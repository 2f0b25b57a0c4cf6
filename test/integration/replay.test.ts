/**
 * Replay against real processes (an orchestrator and two sidecars): a recorded code-mode
 * run (its exec and its waits, on either sidecar) re-runs in fresh VMs with its recorded
 * answers and gives "same", suspend/resume, timers, parallel calls, clocks and random numbers
 * included; a changed program or a changed answer is reported where it first diverges; a
 * secret answer stops the replay there and says so; a record moves out and back in
 * (`codemode replay --export` and `--from`); another scope's run is not found.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { BIN, collectStream, startCluster, type Cluster, type ToolCallEvent } from "../helpers/harness.js";

let cluster: Cluster;
beforeAll(async () => {
  cluster = await startCluster({ sidecars: 2 });
});
afterAll(async () => {
  expect(await cluster.stop()).toEqual([0, 0, 0]);
});

const TOOLS: TestTool[] = [
  { name: "lookup", description: "answers later", parameters: { type: "object" } },
  { name: "fetch", description: "answers at once", parameters: { type: "object" } },
];
const a = () => cluster.sidecars[0]!;
const b = () => cluster.sidecars[1]!;
const ok = (value: unknown) => ({ case: "resultJson" as const, value: JSON.stringify(value) });

type Scope = Awaited<ReturnType<typeof openRun>>["scope"];

/** Runs `code` on sidecar A, answers each call with `answer` (from sidecar B), and follows every `waiting` with a wait on B. */
async function runToEnd(scope: Scope, code: string, answer: (c: ToolCallEvent) => unknown, options: { secret?: boolean; live?: boolean } = {}) {
  const answerOf = (c: ToolCallEvent) =>
    void (options.live ? a() : b()).sandbox.bridgeCallback({ scope, callId: c.callId, outcome: ok(answer(c)), secret: options.secret === true });
  let out = await collectStream(a().sandbox.exec({ scope, code }), options.live ? answerOf : undefined);
  let runId = out.model.runId ?? out.result.codeModeRunId;
  const pending: ToolCallEvent[] = [];
  if (!options.live) for (const e of out.events) if (e.event.case === "toolCall") pending.push(e.event.value);
  for (let i = 0; out.model.status === "waiting" && i < 10; i++) {
    for (const c of pending.splice(0)) answerOf(c);
    await new Promise((r) => setTimeout(r, 50));
    out = await collectStream(b().sandbox.wait({ scope, codeModeRunId: runId, waitCallId: `w${i}` }), (c) => pending.push(c));
    runId = out.result.codeModeRunId || runId;
  }
  return { out, runId };
}

const replay = (scope: Scope, runId: string) => cluster.control.replayRun({ scope, codeModeRunId: runId });

describe("replay", () => {
  it("a run that suspended and resumed on another sidecar replays the same: calls, clock, random numbers, timers, model_json", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    const code = `
      const t0 = Date.now(); const r0 = Math.random();
      const [x, y] = await Promise.all([tools.lookup({ n: 1 }), tools.fetch({ n: 2 })]);
      await new Promise((res) => setTimeout(res, 20));
      text('got ' + JSON.stringify([x, y]));
      const z = await tools.lookup({ n: x.n + y.n, at: Date.now() - t0 >= 0 });
      json({ r0, r1: Math.random(), perf: performance.now() > 0 });
      return { x, y, z, t0, spent: Date.now() - t0 };`;
    const { out, runId } = await runToEnd(scope, code, (c) => ({ n: JSON.parse(c.inputJson).n * 10 }));
    expect(out.model.status).toBe("completed");
    const r = await replay(scope, runId);
    const report = JSON.parse(r.reportJson);
    expect(r.summary).toMatch(/^same/);
    expect(r.verdict).toBe("same");
    expect(report.segments.length).toBeGreaterThanOrEqual(3);
    expect(report.segments.map((s: { kind: string }) => s.kind).slice(0, 2)).toEqual(["exec", "wait"]);
    expect(report.segments.every((s: { verdict: string }) => s.verdict === "same")).toBe(true);
  });

  it("a changed program diverges at its first changed call; a changed answer where its effect first shows", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    const code = "const a = await tools.lookup({ n: 1 }); const b = await tools.fetch({ m: a.n + 1 }); return b";
    const { out, runId } = await runToEnd(scope, code, (c) => ({ n: JSON.parse(c.inputJson).n ?? 7 }));
    expect(out.model.status).toBe("completed");
    const { recordJson } = await cluster.control.getReplayRecord({ scope, codeModeRunId: runId });
    const record = JSON.parse(recordJson);

    const program = structuredClone(record);
    program.segments[0].exec.source = code.replace("{ n: 1 }", "{ n: 2 }");
    const p = await cluster.control.replayRun({ recordJson: JSON.stringify(program) });
    expect(p.verdict).toBe("diverged");
    expect(p.summary).toMatch(/segment 1 of \d \(exec\) at nested call 1/);
    expect(JSON.parse(p.reportJson).segments[0].divergence.replayed.input).toBe('{"n":2}');

    // The first answer (n: 1) becomes n: 5: the second call's arguments differ (m: 6, not 2).
    const answer = structuredClone(record);
    const wait = answer.segments.find((s: { kind: string }) => s.kind === "wait");
    const batch = wait.tape.events.find((e: { batch?: unknown[] }) => e.batch).batch;
    batch[0].j = JSON.stringify({ n: 5 });
    const d = await cluster.control.replayRun({ recordJson: JSON.stringify(answer) });
    expect(d.verdict).toBe("diverged");
    expect(d.summary).toMatch(/\(wait\) at nested call 1: recorded .*\\"m\\":2.*replayed .*\\"m\\":6/);
  });

  it("a secret answer is not kept, nor what the program made of it: the replay stops there and says so", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    // The program passes the secret on to another tool, prints it and returns it.
    const code = "const k = await tools.lookup({}); await tools.fetch({ auth: k.key }); text(k.key); return k.key";
    const { out, runId } = await runToEnd(scope, code, () => ({ key: "hunter2-secret" }), { secret: true });
    expect(out.model).toMatchObject({ status: "completed", value: "hunter2-secret" });
    const { recordJson } = await cluster.control.getReplayRecord({ scope, codeModeRunId: runId });
    expect(recordJson).not.toContain("hunter2");
    const r = await replay(scope, runId);
    expect(r.verdict).toBe("incomplete");
    expect(r.summary).toMatch(/answered with a secret/);
  });

  it("a run answered live, within one exec, replays the same; another scope does not find it", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    const { out, runId } = await runToEnd(
      scope,
      "const xs = await Promise.all([1,2,3].map((n) => tools.fetch({ n }))); return xs",
      (c) => JSON.parse(c.inputJson).n,
      {
        live: true,
      },
    );
    expect(out.model).toMatchObject({ status: "completed", value: [1, 2, 3] });
    expect((await replay(scope, runId)).verdict).toBe("same");
    const other = (await openRun(cluster, TOOLS)).scope;
    await expect(replay(other, runId)).rejects.toMatchObject({ code: "not_found" });
  });

  it("codemode replay --export writes the record and --from replays it with no service", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    const { runId } = await runToEnd(scope, "await yield_control('x'); const v = await tools.lookup({}); return [v, Math.random() < 1]", () => "v");
    const exported = spawnSync(
      process.execPath,
      [BIN, "replay", "--export", runId, "--scope", JSON.stringify(scope), "--orchestrator", cluster.orchestratorAddress],
      { encoding: "utf8", timeout: 60_000 },
    );
    expect(exported.status, exported.stderr).toBe(0);
    const file = join(mkdtempSync(join(tmpdir(), "replay-")), "run.json");
    writeFileSync(file, exported.stdout);
    const offline = spawnSync(process.execPath, [BIN, "replay", "--from", file], { encoding: "utf8", timeout: 120_000 });
    expect(offline.stderr).toMatch(/codemode replay: same/);
    expect(offline.status).toBe(0);
    expect(JSON.parse(offline.stdout)).toMatchObject({ verdict: "same", codeModeRunId: runId });
    // A changed record, moved the same way, fails the replay with exit status 1.
    writeFileSync(file, exported.stdout.replace("return [v, Math.random() < 1]", "return [v, Math.random() > 1]"));
    const changed = spawnSync(process.execPath, [BIN, "replay", "--from", file], { encoding: "utf8", timeout: 120_000 });
    expect(changed.status).toBe(1);
    expect(changed.stderr).toMatch(/codemode replay: diverged/);
  });

  it("a record given whole that is not one is INVALID_ARGUMENT, naming what is wrong", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    const { runId } = await runToEnd(scope, "return await tools.fetch({ n: 1 })", () => 1, { live: true });
    const record = JSON.parse((await cluster.control.getReplayRecord({ scope, codeModeRunId: runId })).recordJson);
    delete record.segments[0].result.priorOutputs;
    await expect(cluster.control.replayRun({ recordJson: JSON.stringify(record) })).rejects.toMatchObject({
      code: "invalid_argument",
      message: expect.stringMatching(/segment 1 is not a segment record: its result needs/),
    });
    await expect(cluster.control.replayRun({ recordJson: "{" })).rejects.toMatchObject({ code: "invalid_argument" });
    // The replay thread is intact: the record as it was replays the same.
    expect((await replay(scope, runId)).verdict).toBe("same");
  });
});
