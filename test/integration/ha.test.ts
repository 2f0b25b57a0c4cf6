// The kill test: two orchestrators and two sidecars on one Redis, each a real process.
// Sidecars and the gateway reach the orchestrators through one address, as in Kubernetes
// through a Service: a TCP balancer here (kube-proxy's part) sends each new connection to
// an orchestrator that accepts it. Steady traffic with suspensions (slow tools answered
// later, yields) runs through both sidecars; mid-traffic one sidecar and one orchestrator
// are killed with SIGKILL. What the product guarantees, and what is checked:
// - no suspended run is lost: every run that returned `waiting` ends `completed`, unless a
//   wait of it was computing on the killed sidecar after its VM made a new call: resuming
//   the stored snapshot would repeat that call, so the next wait reports the run lost;
// - every run ends with a result: completed, or a clear failure, and a failure only for
//   a run whose VM was live in the killed sidecar (its Exec stream ends UNAVAILABLE) or
//   that met the orchestrator's death before it could suspend (`runtime_unavailable`);
// - the surviving sidecar's link fails over to the surviving orchestrator;
// - when everything settled, the store holds no run.
// A wait that was resuming a run on the killed sidecar holds the run's claim until the
// orchestrator it was linked to releases the dead sidecar's claims; when that orchestrator
// died too, the claim holds for its lease (5 minutes): the test moves that lease to now in
// Redis instead of waiting (it counts such runs).
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorCode, Refusal, ResultStatus } from "../../src/gen/codemode/common/v1/common_pb.js";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import type { ServiceError } from "../../src/protocol/service-error.js";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { collectStream, SHARED_SNAPSHOT_KEY, spawnCodemode, type ExecOutcome, type Proc, type ToolCallEvent } from "../helpers/harness.js";
import { startBalancer } from "../helpers/balancer.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";

type Side = { proc: Proc; address: string; client: ServiceClient<typeof Sandbox.method>; dead: boolean };
type RunScope = NonNullable<Parameters<ServiceClient<typeof Control.method>["openRun"]>[0]["scope"]>;
type Fate = {
  run: number;
  scope: RunScope;
  status: "completed" | "failed";
  suspended: boolean;
  how: string;
  waits: number;
  leaseMoved: boolean;
  rewaits?: number;
};

const tools: TestTool[] = [
  { name: "slow", description: "A tool slower than the exec's timeout, sometimes", parameters: { type: "object", properties: { i: { type: "number" } } } },
];
const PROGRAM = `
  const a = await tools.slow({ i: 1 });
  yield_control("checkpoint");
  const b = await tools.slow({ i: 2 });
  return a + b;
`;
const RUNS = 28;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const isUnavailable = (err: unknown) => (err as ServiceError)?.code === "unavailable";

let redis: RedisServer;
let balancer: Awaited<ReturnType<typeof startBalancer>>;
/** The Service's second port: the orchestrators' SidecarLink ports. */
let linkBalancer: Awaited<ReturnType<typeof startBalancer>>;
const orchestrators: Proc[] = [];
const sides: Side[] = [];
let control: ServiceClient<typeof Control.method>;

beforeAll(async () => {
  redis = await startRedis();
  for (let i = 0; i < 2; i++)
    orchestrators.push(
      await spawnCodemode([
        "orchestrator",
        "--orchestrator-address",
        "127.0.0.1:0",
        "--link-address",
        "127.0.0.1:0",
        "--store",
        redis.url,
        "--max-suspended-runs",
        "200",
      ]),
    );
  balancer = await startBalancer(orchestrators.map((o) => o.ready.orchestrator!));
  linkBalancer = await startBalancer(orchestrators.map((o) => o.ready.link!));
  for (let i = 0; i < 2; i++) {
    const proc = await spawnCodemode(["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", linkBalancer.address, "--threads", "1"], {
      CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY,
    });
    sides.push({ proc, address: proc.ready.sandbox!, client: createClient(Sandbox, proc.ready.sandbox!), dead: false });
  }
  control = createClient(Control, balancer.address);
}, 120_000);

afterAll(async () => {
  control?.close();
  for (const s of sides) {
    s.client.close();
    if (!s.dead) expect(await s.proc.stop()).toBe(0);
  }
  for (const o of orchestrators) if (o.child.exitCode === null && o.child.signalCode === null) expect(await o.stop()).toBe(0);
  await balancer?.close();
  await linkBalancer?.close();
  await redis?.stop();
});

/** Every log line of every process that names `id`, for a failure message. */
const logsOf = (id: string) =>
  [...orchestrators.map((o, i) => [`orchestrator ${i}`, o] as const), ...sides.map((s, i) => [`sidecar ${i}`, s.proc] as const)]
    .flatMap(([name, p]) => p.stderr.filter((l) => id && l.includes(id)).map((l) => `${name}: ${l}`))
    .join("\n");

const live = () => sides.filter((s) => !s.dead);
const pick = (n: number) => live()[n % live().length]!;

/** Calls `fn` on sidecars, starting with `first`, moving to another live one when a sidecar is unreachable. */
async function onSidecar<T>(first: Side, fn: (s: Side) => Promise<T>): Promise<T> {
  let side = first;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn(side);
    } catch (err) {
      if (!isUnavailable(err) || attempt >= 20) throw err;
      await sleep(100);
      side = pick(attempt + 1);
    }
  }
}

/** The gateway's answer to a nested call, later: on the sidecar that asked, or another when that one is gone. */
function answerLater(run: { scope: Parameters<typeof control.openRun>[0]["scope"] }, asker: Side, call: ToolCallEvent, delayMs: number): Promise<void> {
  return sleep(delayMs).then(() =>
    onSidecar(asker.dead ? pick(0) : asker, (s) =>
      s.client.bridgeCallback({ scope: run.scope!, callId: call.callId, outcome: { case: "resultJson", value: String(JSON.parse(call.inputJson).i) } }),
    ).then(
      () => undefined,
      // The run's VM died with its sidecar, or the answer raced its run's end (nothing awaits it
      // any more), or a retry of an answer whose reply was lost (it was kept the first time).
      (err: unknown) => void expect(["failed_precondition", "not_found", "already_exists"], String(err)).toContain((err as ServiceError).code),
    ),
  );
}

/** One run as a gateway drives it: exec, answer nested calls, wait until it ends. */
async function drive(n: number, killed: () => boolean): Promise<Fate> {
  const { scope } = await onSidecar(pick(n), () => openRun({ control }, tools, {}, { config: { timeoutMs: 700 } }));
  const run = { scope };
  const answers: Promise<void>[] = [];
  const onCall = (side: Side) => (call: ToolCallEvent) => answers.push(answerLater(run, side, call, 150 + ((n * 397) % 1300)));
  let side = pick(n);
  let out: ExecOutcome;
  try {
    out = await collectStream(side.client.exec({ scope, execCallId: `exec-${n}`, code: PROGRAM }), onCall(side));
  } catch (err) {
    await Promise.allSettled(answers);
    // The VM was live in a sidecar that died: the exec's stream fails, there is no run to wait for.
    if (isUnavailable(err) && side.dead)
      return { run: n, scope, status: "failed", suspended: false, how: "exec stream cut by the killed sidecar", waits: 0, leaseMoved: false };
    throw err;
  }
  let suspended = false;
  let waits = 0;
  let leaseMoved = false;
  let lastRunId = "";
  let rewaits = 0;
  /** A wait of this run was cut by the killed sidecar. */
  let cutWait = false;
  for (;;) {
    const r = out.result;
    if (r.status === ResultStatus.COMPLETED) {
      await Promise.allSettled(answers);
      expect(out.model.value).toBe(3);
      return { run: n, scope, status: "completed", suspended, how: "completed", waits, leaseMoved, rewaits };
    }
    if (r.status === ResultStatus.FAILED) {
      const refusal = r.refusal;
      if (refusal === Refusal.WAIT_IN_FLIGHT && killed()) {
        // A wait on the killed sidecar holds the claim for its lease: move the lease to now.
        const store = new Redis(redis.url);
        try {
          await store.hset(`codemode:run:${lastRunId}`, "lease", "0");
        } finally {
          store.disconnect();
        }
        leaseMoved = true;
      } else if (refusal === Refusal.RUN_LOST && cutWait) {
        // Its VM had sent a call since its stored snapshot when its sidecar died: reported lost, never repeated.
        await Promise.allSettled(answers);
        return { run: n, scope, status: "failed", suspended, how: "lost: a wait of it was computing on the killed sidecar", waits, leaseMoved };
      } else if (r.code === ErrorCode.RUNTIME_UNAVAILABLE && suspended) {
        // The orchestrator went away under this wait; the run is still stored: the model waits again.
        rewaits++;
        await sleep(200);
      } else {
        await Promise.allSettled(answers);
        expect(suspended, `run ${n} failed after suspending: ${r.error}\n${logsOf(lastRunId)}`).toBe(false);
        expect(r.code, `run ${n} failed without a clear code: ${r.error}`).toBe(ErrorCode.RUNTIME_UNAVAILABLE);
        return { run: n, scope, status: "failed", suspended, how: `exec failed: ${r.error}`, waits, leaseMoved };
      }
    } else {
      suspended = true;
      lastRunId = r.codeModeRunId;
    }
    expect(waits++, `run ${n} did not settle`).toBeLessThan(60);
    const runId = lastRunId;
    out = await onSidecar(pick(n + waits), async (s) => {
      side = s;
      try {
        return await collectStream(s.client.wait({ scope, codeModeRunId: runId, waitCallId: `wait-${n}-${waits}` }), onCall(s));
      } catch (err) {
        if (isUnavailable(err) && s.dead) cutWait = true;
        throw err;
      }
    });
  }
}

describe("two orchestrators, two sidecars, one Redis: SIGKILL mid-traffic", () => {
  it("loses no suspended run, and every run ends with a result", async () => {
    let killedAt = 0;
    let survivor: Proc | undefined;
    const runs: Promise<Fate>[] = [];
    for (let n = 0; n < RUNS; n++) {
      runs.push(drive(n, () => killedAt > 0));
      await sleep(120);
      if (n === Math.floor(RUNS / 2)) {
        // Mid-traffic: the first sidecar and the orchestrator the second sidecar is linked to
        // die at once, no drain, so the surviving sidecar has to fail over.
        const linkedTo = orchestrators.findIndex((o) => o.stderr.some((l) => l.includes("sidecar attached") && l.includes(`"address":"${sides[1]!.address}"`)));
        expect(linkedTo).toBeGreaterThanOrEqual(0);
        sides[0]!.dead = true;
        sides[0]!.proc.child.kill("SIGKILL");
        orchestrators[linkedTo]!.child.kill("SIGKILL");
        survivor = orchestrators[1 - linkedTo]!;
        killedAt = Date.now();
      }
    }
    const fates = await Promise.all(runs);
    const summary = fates
      .map((f) => `${f.run}:${f.status}${f.suspended ? "+suspended" : ""}${f.leaseMoved ? "+lease" : ""}${f.rewaits ? `+rewait${f.rewaits}` : ""} ${f.how}`)
      .join("\n");
    // Every run ended; every run that suspended completed, or was lost with a wait the killed sidecar ran.
    expect(fates).toHaveLength(RUNS);
    for (const f of fates) if (f.suspended && !f.how.startsWith("lost")) expect(f.status, summary).toBe("completed");
    const completed = fates.filter((f) => f.status === "completed");
    expect(completed.length, summary).toBeGreaterThanOrEqual(RUNS / 2);
    expect(fates.filter((f) => f.suspended).length, summary).toBeGreaterThan(RUNS / 3);
    // Failures only where a VM was live in the killed sidecar, or the orchestrator died under an exec.
    for (const f of fates.filter((x) => x.status === "failed")) expect(f.how, summary).toMatch(/killed sidecar|exec failed: code mode/);

    // The survivors: the sidecar's link went down with its orchestrator and came back up
    // through the same address, now attached to the surviving orchestrator.
    const linkLog = sides[1]!.proc.stderr.filter((l) => l.includes("orchestrator link"));
    expect(
      linkLog.some((l) => l.includes("orchestrator link down")),
      linkLog.join("\n"),
    ).toBe(true);
    expect(linkLog.at(-1), linkLog.join("\n")).toContain("orchestrator link up");
    expect(survivor!.stderr.some((l) => l.includes("sidecar attached") && l.includes(`"address":"${sides[1]!.address}"`))).toBe(true);
    const after = await collectStream(sides[1]!.client.exec({ scope: (await openRun({ control }, tools)).scope, code: "return 'still here'" }));
    expect(after.model.value).toBe("still here");
    // What is left in the store: only runs the killed sidecar stored before it could send
    // the `waiting` result (the gateway never learnt their runId). They expire with their TTL,
    // and the gateway's CloseRun deletes them with the rest of the scope.
    const store = new Redis(redis.url);
    try {
      const cut = new Set(fates.filter((f) => f.how.includes("killed sidecar")).map((f) => f.scope.agentRunId));
      for (const id of await store.zrange("codemode:runs", 0, -1)) {
        expect(cut.has((await store.hget(`codemode:run:${id}`, "runid")) ?? ""), `${id} left in the store:\n${logsOf(id)}`).toBe(true);
      }
      for (const f of fates) await control.closeRun({ scope: f.scope });
      expect(await store.zcard("codemode:runs")).toBe(0);
    } finally {
      store.disconnect();
    }
    console.log(
      `ha: ${RUNS} runs, ${completed.length} completed, ${fates.filter((f) => f.suspended).length} suspended at least once, ${fates.filter((f) => f.leaseMoved).length} lease moved\n${summary}`,
    );
  }, 180_000);
});
