// A suspension whose orchestrator dies after the store ran it but before it replied.
//
// Two orchestrators share a real Redis behind one link address (a TCP balancer, as a
// Kubernetes Service). Redis is paused (SIGSTOP) while the sidecar stores a suspended
// run, so the first orchestrator's store command sits in Redis's socket; that
// orchestrator is then SIGKILLed and Redis resumed: the command runs, the reply is lost.
// The sidecar sends the same request again through the link address, reaching the other
// orchestrator, and the store takes it as already stored. Without the retry the model was
// told the exec failed while its run sat in the store until its TTL; without the store
// taking the resend, the retry was refused as a second suspension of a live run.
import { once } from "node:events";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ResultStatus } from "../../src/gen/codemode/common/v1/common_pb.js";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { startBalancer, type Balancer } from "../helpers/balancer.js";
import { openRun } from "../helpers/gateway.js";
import { collectStream, logged, SHARED_SNAPSHOT_KEY, spawnCodemode, waitFor, type Proc } from "../helpers/harness.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";

let redis: RedisServer;
const orchestrators: Proc[] = [];
let links: Balancer;
let controls: Balancer;
let sidecar: Proc;

beforeAll(async () => {
  redis = await startRedis();
  for (let i = 0; i < 2; i++)
    orchestrators.push(
      // Debug logs: the orchestrator says when it sends a suspended run to the store.
      await spawnCodemode(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0", "--store", redis.url], {
        CODEMODE_LOG_LEVEL: "debug",
      }),
    );
  links = await startBalancer(orchestrators.map((o) => o.ready.link!));
  controls = await startBalancer(orchestrators.map((o) => o.ready.orchestrator!));
  sidecar = await spawnCodemode(["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", links.address, "--threads", "1"], {
    CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY,
    CODEMODE_LOG_LEVEL: "debug",
  });
}, 60_000);

afterAll(async () => {
  redis?.resume();
  await sidecar?.stop();
  for (const o of orchestrators) if (o.child.exitCode === null && o.child.signalCode === null) await o.stop();
  await links?.close();
  await controls?.close();
  await redis?.stop();
});

it("a suspension whose reply died with its orchestrator is sent again through the link address; the store takes it once and the run goes on", async () => {
  const control = createClient(Control, controls.address);
  const client = createClient(Sandbox, sidecar.ready.sandbox!);
  const monitor = await new Redis(redis.url).monitor();
  try {
    const { scope } = await openRun({ control }, [{ name: "ping", description: "Answers 1", parameters: { type: "object", properties: {} } }]);
    // A first run suspends and ends, so Redis has the store's scripts (a script Redis does
    // not know fails at once, and would never reach the store).
    const warm = await collectStream(client.exec({ scope, code: 'yield_control("warm"); return 0;' }));
    expect((await waitFor(client, { scope, runId: warm.model.runId! })).model.value).toBe(0);
    const linkedTo = orchestrators.findIndex((o) => o.stderr.some((l) => l.includes("sidecar attached")));
    expect(linkedTo).toBeGreaterThanOrEqual(0);

    // Every store script run that names a run id, in the order Redis ran them.
    const ran: string[][] = [];
    monitor.on("monitor", (_time: string, args: string[]) => {
      if (["eval", "evalsha"].includes(args[0]?.toLowerCase() ?? "")) ran.push(args);
    });

    // Redis is paused once the VM runs (its tool call is out), then the call is answered:
    // the VM yields, and the sidecar's store request meets the paused Redis.
    const from = orchestrators[linkedTo]!.stderr.length;
    const exec = collectStream(
      client.exec({ scope, execCallId: "exec-1", code: 'const a = await tools.ping({}); yield_control("checkpoint"); return a;' }),
      (call) => {
        redis.pause();
        void client.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: "1" } });
      },
    );
    await logged(sidecar, /"VM snapshotted"/);
    // The store request reached that orchestrator, which logs it as it writes the command
    // to Redis's socket; then the orchestrator dies, and only then does Redis run it.
    await logged(orchestrators[linkedTo]!, /"storing a suspended run"/, { from });
    const killed = once(orchestrators[linkedTo]!.child, "exit");
    orchestrators[linkedTo]!.child.kill("SIGKILL");
    await killed;
    redis.resume();

    const out = await exec;
    expect(out.result.status, JSON.stringify(out.model)).toBe(ResultStatus.WAITING);
    const runId = out.model.runId!;
    // The killed orchestrator's store command ran, and so did the resend: one run, stored once.
    const suspends = ran.filter((args) => args.includes(runId) && args.includes("new"));
    expect(suspends.length, `store scripts naming ${runId}: ${suspends.length}`).toBe(2);
    expect(orchestrators[1 - linkedTo]!.stderr.some((l) => l.includes("suspended run stored") && l.includes(runId))).toBe(true);

    const done = await waitFor(client, { scope, runId });
    expect(done.model.value).toBe(1);
    expect(done.result.status).toBe(ResultStatus.COMPLETED);
    const store = new Redis(redis.url);
    try {
      expect(await store.zcard("codemode:runs")).toBe(0);
    } finally {
      store.disconnect();
    }
  } finally {
    monitor.disconnect();
    control.close();
    client.close();
  }
}, 60_000);
