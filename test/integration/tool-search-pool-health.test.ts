/**
 * Tool Search falls back from mode code to mode tools on the pool health sidecars report
 * over their links, against real processes: an orchestrator, a sidecar whose pool cannot
 * start (Node's permission model denies worker threads) started with
 * `--serve-without-pool`, and a healthy sidecar. With no sidecar attached the surface stays
 * mode code; with only the pool-less sidecar attached, OpenRun and DescribeSurface give
 * mode tools (`fallback`, with the sidecar's reason), noted once in the run's trajectory
 * and the log; a healthy sidecar attaching brings mode code back, its leaving takes it
 * away again. A sidecar of an older build (a hello without pool health) counts as able to
 * run code, and a sidecar's later reports move the surface both ways (both played by the
 * test over a real Attach stream). The pool-less sidecar serves the structured tools, fails code with
 * runtime_unavailable, and refuses a wait before claiming the run. Then the same with the
 * Redis run registry (the trajectory note is a Lua script there).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResultStatus, SurfaceKind } from "../../src/gen/codemode/common/v1/common_pb.js";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { SidecarLink } from "../../src/gen/codemode/orchestrator/v1/link_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { toWireTool } from "../../src/shared/tool-wire.js";
import { collectStream, logged, scope as newScope, spawnCodemode, type Proc } from "../helpers/harness.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";

/** Node's permission model without --allow-worker: the sandbox pool cannot start. */
const NO_WORKERS = { NODE_OPTIONS: "--experimental-permission --allow-fs-read=*" };
const STRUCTURED = ["tool_search", "tool_describe", "tool_call"];

type Sidecar = { proc: Proc; id: string; sandbox: ServiceClient<typeof Sandbox.method> };

async function startOrchestrator(args: string[] = []) {
  const proc = await spawnCodemode(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0", ...args]);
  return { proc, link: proc.ready.link!, control: createClient(Control, proc.ready.orchestrator!) };
}

/** A sidecar attached to `orch`, once the orchestrator has its pool report. */
async function startSidecar(orch: Proc, link: string, withoutPool: boolean): Promise<Sidecar> {
  const args = [
    "sandbox",
    "--sandbox-address",
    "127.0.0.1:0",
    "--orchestrator-address",
    link,
    "--threads",
    "1",
    ...(withoutPool ? ["--serve-without-pool"] : []),
  ];
  const proc = await spawnCodemode(args, withoutPool ? NO_WORKERS : {});
  const id = (JSON.parse(await logged(proc, /"sandbox listening"/)) as { sidecarId: string }).sidecarId;
  await logged(orch, new RegExp(`^(?=.*"sidecar pool ${withoutPool ? "cannot" : "can"} run code")(?=.*"sidecarId":"${id}")`));
  return { proc, id, sandbox: createClient(Sandbox, proc.ready.sandbox!) };
}

async function stopSidecar(orch: Proc, s: Sidecar): Promise<void> {
  s.sandbox.close();
  expect(await s.proc.stop()).toBe(0);
  await logged(orch, new RegExp(`^(?=.*"sidecar detached")(?=.*"sidecarId":"${s.id}")`));
}

/**
 * A sidecar as the link sees it, played by this test over a real Attach stream: its hello
 * (with `pool`, or without, as older builds send it), later pool reports, and its leaving.
 */
async function linkPeer(orch: Proc, linkAddress: string, sidecarId: string, pool?: { canRunCode: boolean; reason: string }) {
  const client = createClient(SidecarLink, linkAddress);
  const ac = new AbortController();
  const stream = client.attach({ signal: ac.signal });
  stream.send({ message: { case: "hello", value: { sidecarId, address: "127.0.0.1:1", version: "0.0.9", ...(pool ? { pool } : {}) } } });
  // The orchestrator's answers (welcome), read until the peer leaves (cancelling its stream).
  const answers = (async () => {
    for await (const _ of stream.messages);
  })().catch(() => undefined);
  await logged(orch, new RegExp(`^(?=.*"sidecar pool ${pool?.canRunCode === false ? "cannot" : "can"} run code")(?=.*"sidecarId":"${sidecarId}")`));
  return {
    report: (p: { canRunCode: boolean; reason: string }) => stream.send({ message: { case: "poolHealth", value: p } }),
    async leave() {
      ac.abort();
      await answers;
      client.close();
      await logged(orch, new RegExp(`^(?=.*"sidecar detached")(?=.*"sidecarId":"${sidecarId}")`));
    },
  };
}

const TOOLS = { case: "tools" as const, value: { tools: [toWireTool({ name: "message", description: "Send a chat message" })] } };

describe("Tool Search mode code falls back to mode tools on the sidecars' pool health", () => {
  let orch: Awaited<ReturnType<typeof startOrchestrator>>;
  let poolless: Sidecar | undefined;
  let healthy: Sidecar | undefined;
  const scope = newScope("pool-health");
  const surface = async () => (await orch.control.describeSurface({ scope })).surface!;
  const notes = async () => (await orch.control.getTrajectory({ scope })).steps.filter((s) => s.kind === "tool_search_fallback").map((s) => s.status);

  beforeAll(async () => {
    orch = await startOrchestrator();
  });
  afterAll(async () => {
    orch?.control.close();
    if (healthy) await stopSidecar(orch.proc, healthy);
    if (poolless) await stopSidecar(orch.proc, poolless);
    expect(await orch?.proc.stop()).toBe(0);
  });

  it("with no sidecar attached, mode code is offered (no evidence against the runtime)", async () => {
    const opened = await orch.control.openRun({ scope, catalog: TOOLS, toolSearch: { enabled: true } });
    expect(opened.surface).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_CODE, fallback: false });
    expect(await notes()).toEqual([]);
  });

  it("with only a sidecar whose pool cannot start, mode tools is offered before the model sees the surface", async () => {
    poolless = await startSidecar(orch.proc, orch.link, true);
    await logged(orch.proc, /"Tool Search falls back from mode code to mode tools: no attached sidecar can run code"/);
    const s = await surface();
    expect(s).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_TOOLS, fallback: true, codeModeActive: false });
    expect(s.fallbackReason).toContain(
      `no sandbox sidecar attached to the orchestrator can run code (${poolless!.id}: the sandbox pool cannot start, so no code can run: worker threads are denied`,
    );
    expect(s.tools.map((t) => t.name)).toEqual(STRUCTURED);
    // Described again: noted once in the trajectory and the log.
    expect((await surface()).kind).toBe(SurfaceKind.TOOL_SEARCH_TOOLS);
    expect(await notes()).toEqual(["fallback"]);
    const step = (await orch.control.getTrajectory({ scope })).steps.find((x) => x.kind === "tool_search_fallback")!;
    expect(step).toMatchObject({ errorCode: "runtime_unavailable", errorMessage: s.fallbackReason });
    await logged(
      orch.proc,
      new RegExp(
        `^(?=.*"Tool Search falls back from mode code to mode tools for the run: no attached sidecar can run code")(?=.*"agentRunId":"${scope.agentRunId}")`,
      ),
    );
    // A run opened now gets mode tools at once.
    const other = newScope("pool-health-open");
    const opened = await orch.control.openRun({ scope: other, catalog: TOOLS, toolSearch: { enabled: true } });
    expect(opened.surface).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_TOOLS, fallback: true });
    // A run in mode tools by config is not a fallback.
    const tools = newScope("pool-health-tools");
    expect((await orch.control.openRun({ scope: tools, catalog: TOOLS, toolSearch: { enabled: true, mode: "tools" } })).surface).toMatchObject({
      kind: SurfaceKind.TOOL_SEARCH_TOOLS,
      fallback: false,
    });
  });

  it("the pool-less sidecar serves the structured tools, fails code with runtime_unavailable, and refuses a wait before claiming", async () => {
    const found = await poolless!.sandbox.toolSearch({ scope, callId: "s1", query: "send a chat message" });
    expect(found.tools.map((t) => t.id)).toEqual(["openclaw:core:message"]);
    const codeScope = newScope("pool-health-code");
    await orch.control.openRun({ scope: codeScope, catalog: TOOLS });
    const { model } = await collectStream(poolless!.sandbox.exec({ scope: codeScope, code: "return 1" }));
    expect(model).toMatchObject({ status: "failed", code: "runtime_unavailable", error: expect.stringContaining("the sandbox pool cannot start") });
    const waited = await collectStream(poolless!.sandbox.wait({ scope: codeScope, codeModeRunId: "cm_unknown", waitCallId: "w1" }));
    expect(waited.model).toMatchObject({
      status: "failed",
      code: "runtime_unavailable",
      error: expect.stringContaining("this sidecar cannot resume code mode runs"),
    });
  });

  it("a sidecar of an older build (no pool health in its hello) counts as able to run code", async () => {
    const older = await linkPeer(orch.proc, orch.link, "sc_older");
    expect(await surface()).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_CODE, fallback: false });
    await older.leave();
    expect(await surface()).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_TOOLS, fallback: true });
    expect(await notes()).toEqual(["fallback", "restored", "fallback"]);
  });

  it("a sidecar's later pool reports move the surface both ways", async () => {
    const peer = await linkPeer(orch.proc, orch.link, "sc_changing", { canRunCode: false, reason: "every worker fails to start" });
    expect((await surface()).fallbackReason).toContain("sc_changing: every worker fails to start");
    peer.report({ canRunCode: true, reason: "" });
    await logged(orch.proc, /^(?=.*"sidecar pool can run code")(?=.*"sidecarId":"sc_changing")/);
    expect(await surface()).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_CODE, fallback: false });
    peer.report({ canRunCode: false, reason: "workers keep dying" });
    await logged(orch.proc, /^(?=.*"sidecar pool cannot run code")(?=.*"sidecarId":"sc_changing")(?=.*"reason":"workers keep dying")/);
    expect(await surface()).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_TOOLS, fallback: true });
    await peer.leave();
    expect(await notes()).toEqual(["fallback", "restored", "fallback", "restored", "fallback"]);
  });

  it("a healthy sidecar attaching brings mode code back; its leaving takes it away; none attached is mode code", async () => {
    healthy = await startSidecar(orch.proc, orch.link, false);
    const s = await surface();
    expect(s).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_CODE, fallback: false, fallbackReason: "" });
    expect(s.tools.map((t) => t.name)).toEqual(["tool_search_code"]);
    const ran = await collectStream(healthy.sandbox.exec({ scope, code: "return (await openclaw.tools.search('send a chat message', { limit: 1 }))[0].id" }));
    expect(ran.result.status).toBe(ResultStatus.COMPLETED);
    expect(ran.model.value).toBe("openclaw:core:message");

    await stopSidecar(orch.proc, healthy);
    healthy = undefined;
    expect(await surface()).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_TOOLS, fallback: true });
    await stopSidecar(orch.proc, poolless!);
    poolless = undefined;
    expect(await surface()).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_CODE, fallback: false });
    expect(await notes()).toEqual(["fallback", "restored", "fallback", "restored", "fallback", "restored", "fallback", "restored"]);
  });
});

describe("the pool-health fallback with the Redis run registry", () => {
  let redis: RedisServer;
  let orch: Awaited<ReturnType<typeof startOrchestrator>>;
  beforeAll(async () => {
    redis = await startRedis();
    orch = await startOrchestrator(["--store", redis.url]);
  });
  afterAll(async () => {
    orch?.control.close();
    expect(await orch?.proc.stop()).toBe(0);
    await redis?.stop();
  });

  it("notes the fallback once per change in the run's trajectory", async () => {
    const scope = newScope("pool-health-redis");
    await orch.control.openRun({ scope, catalog: TOOLS, toolSearch: { enabled: true } });
    const poolless = await startSidecar(orch.proc, orch.link, true);
    for (let i = 0; i < 2; i++)
      expect((await orch.control.describeSurface({ scope })).surface).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_TOOLS, fallback: true });
    // Opening the run again keeps its trajectory and what it noted.
    expect((await orch.control.openRun({ scope, catalog: TOOLS, toolSearch: { enabled: true } })).surface).toMatchObject({
      kind: SurfaceKind.TOOL_SEARCH_TOOLS,
      fallback: true,
    });
    await stopSidecar(orch.proc, poolless);
    expect((await orch.control.describeSurface({ scope })).surface).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_CODE, fallback: false });
    const steps = (await orch.control.getTrajectory({ scope })).steps.filter((s) => s.kind === "tool_search_fallback");
    expect(steps.map((s) => s.status)).toEqual(["fallback", "restored"]);
  });
});
