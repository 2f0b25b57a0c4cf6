/**
 * A sidecar whose pool started but can no longer run code reports it at runtime
 * (src/sandbox/pool/pool-health.ts), against real processes: an orchestrator, and a sidecar
 * started from a copy of dist/ in a temp directory (bin/ and package.json copied,
 * node_modules symlinked), so the test can break the copy without touching the repo.
 * The copied worker module is renamed, then a native loop that ignores its deadline gets
 * its thread killed: the replacement cannot load. The sidecar logs that its pool cannot
 * run code once, with the reason, and reports it over its link: the orchestrator gives
 * a Tool Search run of mode code mode tools with that reason, an exec fails at once with
 * runtime_unavailable (not after its timeoutMs), a wait is refused before claiming, and the
 * metrics gauge reads 0; the thread is retried with a growing backoff, one thread start per
 * retry, and the pool's change is logged and reported once. The module put back, the sidecar's retry starts a thread that runs
 * code: `canRunCode` reaches the orchestrator again, mode code is offered, an exec completes,
 * and a later kill's replacement thread works as before.
 */
import { renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResultStatus, SurfaceKind } from "../../src/gen/codemode/common/v1/common_pb.js";
import { Control, type ModelSurface } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { toWireTool } from "../../src/shared/tool-wire.js";
import { collectStream, copyPackage, logged, openEmptyRun, scope as newScope, spawnCodemode, type Proc } from "../helpers/harness.js";
import { until } from "../helpers/until.js";

const TOOLS = { case: "tools" as const, value: { tools: [toWireTool({ name: "message", description: "Send a chat message" })] } };
/** A native loop: QuickJS's interrupt handler is never polled, so only the host's kill stops it. */
const NATIVE_LOOP = 'new Array(2 ** 32 - 1).join("")';

/** `codemode <args>` from the copy at `dir` (debug logs, to see the retries). */
function spawnFrom(dir: string, args: string[]): Promise<Proc> {
  return spawnCodemode(args, { CODEMODE_LOG_LEVEL: "debug" }, join(dir, "bin", "codemode.js"));
}

/** The first line of `proc`'s stderr from line `from` on that matches `pattern` (a generous deadline). */
const loggedSince = (proc: Proc, from: number, pattern: RegExp) => logged(proc, pattern, { ms: 60_000, from });

/** The surface once it is of `kind` (asked again until it is). */
async function surfaceOf(read: () => Promise<ModelSurface>, kind: SurfaceKind): Promise<ModelSurface> {
  let last: ModelSurface | undefined;
  return until(
    async () => {
      last = await read();
      return last.kind === kind && last;
    },
    `the surface to be of kind ${SurfaceKind[kind]}`,
    { ms: 60_000, everyMs: 200, detail: () => JSON.stringify(last) },
  );
}

/** The value of an unlabelled gauge in Prometheus text. */
async function gauge(metricsAt: string, name: string): Promise<number | undefined> {
  const text = await (await fetch(`http://${metricsAt}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

describe("a sidecar whose worker threads can no longer start reports it, and recovers", { timeout: 120_000 }, () => {
  let dir: string;
  let orch: Proc;
  let control: ServiceClient<typeof Control.method>;
  let sidecar: Proc;
  let sandbox: ServiceClient<typeof Sandbox.method>;
  let sidecarId: string;
  let workerFile: string;
  let broken = false;
  const toolSearchRun = newScope("runtime-health");
  const surface = async () => (await control.describeSurface({ scope: toolSearchRun })).surface!;
  const canRunCode = (state: "can" | "cannot") => new RegExp(`^(?=.*"sidecar pool ${state} run code")(?=.*"sidecarId":"${sidecarId}")`);

  beforeAll(async () => {
    dir = copyPackage("codemode-pool-health-");
    workerFile = join(dir, "dist", "sandbox", "worker", "worker.js");
    orch = await spawnCodemode(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0"]);
    control = createClient(Control, orch.ready.orchestrator!);
    sidecar = await spawnFrom(dir, [
      "sandbox",
      "--sandbox-address",
      "127.0.0.1:0",
      "--orchestrator-address",
      orch.ready.link!,
      "--threads",
      "1",
      "--metrics-address",
      "127.0.0.1:0",
    ]);
    sandbox = createClient(Sandbox, sidecar.ready.sandbox!);
    sidecarId = (JSON.parse(await logged(sidecar, /"sandbox listening"/)) as { sidecarId: string }).sidecarId;
    await logged(orch, canRunCode("can"), 30_000);
  });

  afterAll(async () => {
    if (broken) renameSync(`${workerFile}.moved`, workerFile);
    sandbox?.close();
    control?.close();
    const codes = [await sidecar?.stop(), await orch?.stop()];
    if (dir) rmSync(dir, { recursive: true, force: true });
    expect(codes).toEqual([0, 0]);
  });

  it("runs code from the copy, offers mode code, and its gauge says it can run code", async () => {
    expect((await control.openRun({ scope: toolSearchRun, catalog: TOOLS, toolSearch: { enabled: true } })).surface).toMatchObject({
      kind: SurfaceKind.TOOL_SEARCH_CODE,
      fallback: false,
    });
    const ran = await collectStream(sandbox.exec({ scope: await openEmptyRun(control, "runtime-health-ok"), code: "return 1" }));
    expect(ran.model).toMatchObject({ status: "completed", value: 1 });
    expect(await gauge(sidecar.ready.metrics!, "codemode_pool_can_run_code")).toBe(1);
  });

  it("a killed thread whose replacement cannot load: reported once with the reason, mode tools offered, execs fail at once", async () => {
    const orchMark = orch.stderr.length;
    renameSync(workerFile, `${workerFile}.moved`);
    broken = true;
    // The running thread loaded the module before; the loop gets it killed at its deadline.
    const looped = await collectStream(
      sandbox.exec({ scope: await openEmptyRun(control, "runtime-health-loop"), code: NATIVE_LOOP, config: { timeoutMs: 300 } }),
    );
    expect(looped.model).toMatchObject({ status: "failed", code: "timeout" });

    const down = JSON.parse(await loggedSince(sidecar, 0, /"sandbox pool cannot run code/)) as { reason: string };
    expect(down.reason).toContain("worker.js");
    const reported = JSON.parse(await loggedSince(orch, orchMark, canRunCode("cannot"))) as { reason: string };
    expect(reported.reason).toBe(down.reason);

    const s = await surfaceOf(surface, SurfaceKind.TOOL_SEARCH_TOOLS);
    expect(s).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_TOOLS, fallback: true });
    expect(s.fallbackReason).toContain(`no sandbox sidecar attached to the orchestrator can run code (${sidecarId}: ${down.reason}`);
    expect(s.tools.map((t) => t.name)).toEqual(["tool_search", "tool_describe", "tool_call"]);

    // Fails at once with the pool's reason, not "no sandbox worker became free in time" after timeoutMs.
    const code = await openEmptyRun(control, "runtime-health-down");
    for (let i = 0; i < 2; i++) {
      const failed = await collectStream(sandbox.exec({ scope: code, code: "return 1", config: { timeoutMs: 30_000 } }));
      expect(failed.model).toMatchObject({ status: "failed", code: "runtime_unavailable" });
      expect(failed.model.error).toContain("the sandbox pool cannot run code now");
      expect(failed.model.error).toContain(down.reason);
    }
    const waited = await collectStream(sandbox.wait({ scope: code, codeModeRunId: "cm_unknown", waitCallId: "w1" }));
    expect(waited.model).toMatchObject({
      status: "failed",
      code: "runtime_unavailable",
      error: expect.stringContaining("this sidecar cannot resume code mode runs"),
    });
    expect(await gauge(sidecar.ready.metrics!, "codemode_pool_can_run_code")).toBe(0);
    // The sidecar retries its thread with a growing backoff, one thread start per retry
    // (no respawn loop), and reports the pool down once.
    await loggedSince(sidecar, 0, /"worker thread cannot run code: retrying it with a backoff"/);
    await until(() => sidecar.stderr.filter((l) => l.includes('"worker thread still cannot run code"')).length >= 2, "two retries of the thread", {
      ms: 60_000,
      everyMs: 200,
    });
    const retries = sidecar.stderr
      .filter((l) => l.includes('"worker thread still cannot run code"'))
      .map((l) => (JSON.parse(l) as { retryInMs: number }).retryInMs);
    expect(retries.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < retries.length; i++) expect(retries[i]).toBeGreaterThanOrEqual(retries[i - 1]!);
    expect(retries[1]).toBeGreaterThan(retries[0]!);
    const threadStarts = sidecar.stderr.filter((l) => l.includes('"a retried worker thread failed again"')).length;
    expect(threadStarts).toBeLessThanOrEqual(sidecar.stderr.filter((l) => l.includes('"worker thread still cannot run code"')).length + 1);
    expect(sidecar.stderr.filter((l) => l.includes('"sandbox pool cannot run code')).length).toBe(1);
    expect(orch.stderr.slice(orchMark).filter((l) => canRunCode("cannot").test(l)).length).toBe(1);
    const still = await collectStream(sandbox.exec({ scope: code, code: "return 1", config: { timeoutMs: 30_000 } }));
    expect(still.model).toMatchObject({ status: "failed", code: "runtime_unavailable", error: expect.stringContaining(down.reason) });
  });

  it("the module put back: a retried thread runs code, the orchestrator hears it, mode code is back, execs complete", async () => {
    const orchMark = orch.stderr.length;
    const sidecarMark = sidecar.stderr.length;
    renameSync(`${workerFile}.moved`, workerFile);
    broken = false;
    await loggedSince(sidecar, sidecarMark, /"sandbox pool can run code again/);
    await loggedSince(orch, orchMark, canRunCode("can"));
    const s = await surfaceOf(surface, SurfaceKind.TOOL_SEARCH_CODE);
    expect(s).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_CODE, fallback: false, fallbackReason: "" });
    const ran = await collectStream(sandbox.exec({ scope: await openEmptyRun(control, "runtime-health-back"), code: "return 6 * 7" }));
    expect(ran.result.status).toBe(ResultStatus.COMPLETED);
    expect(ran.model.value).toBe(42);
    expect(await gauge(sidecar.ready.metrics!, "codemode_pool_can_run_code")).toBe(1);
    // piscina starts no thread by itself on a lane whose thread once failed to load: the next
    // kill's replacement comes from the warm-up's task, and the pool goes on.
    const looped = await collectStream(
      sandbox.exec({ scope: await openEmptyRun(control, "runtime-health-loop-2"), code: NATIVE_LOOP, config: { timeoutMs: 300 } }),
    );
    expect(looped.model).toMatchObject({ status: "failed", code: "timeout" });
    const again = await collectStream(sandbox.exec({ scope: await openEmptyRun(control, "runtime-health-again"), code: "return 'again'" }));
    expect(again.model).toMatchObject({ status: "completed", value: "again" });
    await loggedSince(sidecar, sidecarMark, /"new worker thread warmed: it takes work now"/);
    expect(orch.stderr.slice(orchMark).filter((l) => canRunCode("cannot").test(l))).toEqual([]);
  });
});
