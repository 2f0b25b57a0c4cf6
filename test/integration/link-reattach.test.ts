// A sidecar whose link went silent attaches again while the orchestrator still holds the
// old stream; when that old stream finally ends, the sidecar must stay attached.
//
// Sidecar A reaches the orchestrator through a TCP balancer that can freeze its open
// connections (bytes stop, sockets stay open: a silent network path). A's keepalive gives
// up on the frozen link (1 s here, CODEMODE_TEST_LINK_KEEPALIVE_MS, instead of the product's
// 10 s) and A attaches again over a new connection; the orchestrator sees
// nothing of the old one until the balancer closes it. Before the fix, that late end
// detached A's new link too: an answer a gateway sent to sidecar B for a call of A's live
// VM was no longer forwarded to A (and A's cached runs stopped getting invalidations).
import { afterAll, beforeAll, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { startBalancer, type Balancer } from "../helpers/balancer.js";
import { openRun } from "../helpers/gateway.js";
import { collectStream, logged, spawnCodemode, type Proc } from "../helpers/harness.js";

let orchestrator: Proc;
let balancer: Balancer;
let a: Proc;
let b: Proc;
let control: ServiceClient<typeof Control.method>;

beforeAll(async () => {
  orchestrator = await spawnCodemode(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0"]);
  balancer = await startBalancer([orchestrator.ready.link!]);
  a = await spawnCodemode(["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", balancer.address, "--threads", "1"], {
    CODEMODE_TEST_LINK_KEEPALIVE_MS: "1000",
  });
  b = await spawnCodemode(["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", orchestrator.ready.link!, "--threads", "1"]);
  control = createClient(Control, orchestrator.ready.orchestrator!);
}, 60_000);

afterAll(async () => {
  control?.close();
  for (const p of [a, b, orchestrator]) if (p) await p.stop();
  await balancer?.close();
});

/** An exec on A whose one tool call is answered through B's BridgeCallback; what B was told, and the exec's value. */
async function answeredThroughB(): Promise<{ deliveredLive: boolean | string; value: unknown }> {
  const { scope } = await openRun({ control }, [{ name: "ping", description: "Answers a number", parameters: { type: "object", properties: {} } }]);
  const onA = createClient(Sandbox, a.ready.sandbox!);
  const onB = createClient(Sandbox, b.ready.sandbox!);
  try {
    let delivered: Promise<boolean | string> | undefined;
    const out = await collectStream(onA.exec({ scope, code: "return await tools.ping({})", config: { timeoutMs: 3_000 } }), (call) => {
      delivered = onB.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: "7" } }).then(
        (r) => r.deliveredLive,
        (err: unknown) => String(err),
      );
    });
    return { deliveredLive: (await delivered) ?? false, value: out.model.value ?? out.model.error };
  } finally {
    onA.close();
    onB.close();
  }
}

it("keeps a sidecar attached when its earlier link ends after it attached again, so answers still reach its VMs", async () => {
  const sidecarA = JSON.parse(await logged(a, /"sandbox listening"/)).sidecarId as string;
  await logged(a, /"orchestrator link up"/);
  await logged(b, /"orchestrator link up"/);
  // Through the intact links, an answer sent to B reaches A's VM.
  expect(await answeredThroughB()).toEqual({ deliveredLive: true, value: 7 });

  balancer.freeze();
  // A's keepalive (a ping after 1 s, then 0.5 s for its answer) ends the frozen link; A attaches again.
  await logged(a, /"orchestrator link down"/, 30_000);
  await logged(orchestrator, new RegExp(`"sidecarId":"${sidecarA}".*"replacedLink":true.*"sidecar attached"`), 30_000);
  // Only now does the orchestrator see the old link end.
  balancer.cutFrozen();
  const ended = await logged(
    orchestrator,
    new RegExp(`"sidecarId":"${sidecarA}".*"msg":"(an earlier link of a sidecar ended; its newer link stays attached|sidecar detached)"`),
    10_000,
  );
  expect(ended).toContain("its newer link stays attached");

  expect(await answeredThroughB()).toEqual({ deliveredLive: true, value: 7 });
}, 90_000);
