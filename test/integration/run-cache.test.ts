/**
 * The sidecar's run cache, through real processes (an orchestrator on the in-memory store
 * and two sidecars, each with metrics): a known run's exec makes no ResolveRun round trip,
 * and every change of the run reaches the cache before the gateway hears back, whichever
 * sidecar serves the next exec: OpenRun again, CloseRun, a namespace registered, the
 * counters moved by the other sidecar. A sidecar that does not ack an invalidation is
 * disconnected and the change still returns.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { SidecarLink } from "../../src/gen/codemode/orchestrator/v1/link_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { toWireTool } from "../../src/shared/tool-wire.js";
import { serializeNamespaceScope } from "../../src/shared/namespace-scope.js";
import { collectStream, lineIndex, logged, scope as newScope, spawnCodemode, type Proc } from "../helpers/harness.js";
import { until } from "../helpers/until.js";

let orchestrator: Proc;
let sidecars: Array<{ proc: Proc; sandbox: ServiceClient<typeof Sandbox.method> }>;
let control: ServiceClient<typeof Control.method>;

beforeAll(async () => {
  orchestrator = await spawnCodemode(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0"]);
  control = createClient(Control, orchestrator.ready.orchestrator!);
  sidecars = [];
  for (let i = 0; i < 2; i++) {
    const proc = await spawnCodemode([
      "sandbox",
      "--sandbox-address",
      "127.0.0.1:0",
      "--orchestrator-address",
      orchestrator.ready.link!,
      "--threads",
      "1",
      "--metrics-address",
      "127.0.0.1:0",
    ]);
    sidecars.push({ proc, sandbox: createClient(Sandbox, proc.ready.sandbox!) });
  }
});
afterAll(async () => {
  control.close();
  for (const s of sidecars) {
    s.sandbox.close();
    expect(await s.proc.stop()).toBe(0);
  }
  expect(await orchestrator.stop()).toBe(0);
});

async function cacheLookups(i: number): Promise<{ hit: number; miss: number }> {
  const text = await (await fetch(`http://${sidecars[i]!.proc.ready.metrics}/metrics`)).text();
  const n = (r: string) => Number(new RegExp(`codemode_run_cache_lookups_total\\{result="${r}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
  return { hit: n("hit"), miss: n("miss") };
}

const tool = (name: string) => toWireTool({ name, description: `the ${name} tool`, parameters: { type: "object" } });

async function open(scope: ReturnType<typeof newScope>, names: string[], config: Record<string, unknown> = {}): Promise<void> {
  await control.openRun({ scope, catalog: { case: "tools", value: { tools: names.map(tool) } }, config });
}

/** Runs `code` on sidecar `i`, answering every nested call with its input. */
async function run(i: number, scope: ReturnType<typeof newScope>, code: string) {
  const s = sidecars[i]!.sandbox;
  return collectStream(
    s.exec({ scope, code }),
    (call) => void s.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: call.inputJson } }),
  );
}

describe("the run cache", () => {
  it("serves a known run without a round trip, and sees OpenRun again and CloseRun at once on either sidecar", async () => {
    const scope = newScope("cache");
    await open(scope, ["alpha"]);
    const names = `return ALL_TOOLS.map((t) => t.name).join(",")`;
    expect((await run(0, scope, names)).model.value).toBe("alpha");
    const before = await cacheLookups(0);
    for (let k = 0; k < 5; k++) expect((await run(0, scope, names)).model.value).toBe("alpha");
    const after = await cacheLookups(0);
    expect(after.hit - before.hit).toBe(5);
    expect(after.miss - before.miss).toBe(0);

    // Both sidecars hold it now; a new opening reaches both before OpenRun returns.
    expect((await run(1, scope, names)).model.value).toBe("alpha");
    await open(scope, ["beta"]);
    expect((await run(0, scope, names)).model.value).toBe("beta");
    expect((await run(1, scope, names)).model.value).toBe("beta");

    await control.closeRun({ scope });
    await expect(run(0, scope, "return 1")).rejects.toMatchObject({ code: "failed_precondition" });
    await expect(run(1, scope, "return 1")).rejects.toMatchObject({ code: "failed_precondition" });
  });

  it("sees a namespace registered after the run was cached", async () => {
    const scope = newScope("cache-ns");
    await control.openRun({
      scope,
      catalog: {
        case: "tools",
        value: { tools: [toWireTool({ name: "cache_lookup", owner: "cache-test", description: "looks up", parameters: { type: "object" } })] },
      },
    });
    const probe = `return typeof globalThis.CacheNs`;
    expect((await run(0, scope, probe)).model.value).toBe("undefined");
    await control.registerNamespace({
      namespace: {
        id: "cache-ns",
        pluginId: "cache-test",
        globalName: "CacheNs",
        description: "cache test",
        prompt: "CacheNs.answer",
        requiredToolNames: ["cache_lookup"],
        scopeJson: serializeNamespaceScope({ answer: 42 }),
      },
    });
    try {
      expect((await run(0, scope, `return CacheNs.answer`)).model.value).toBe(42);
    } finally {
      await control.clearNamespaces({ pluginId: "cache-test" });
    }
    expect((await run(0, scope, probe)).model.value).toBe("undefined");
  });

  it("keeps the per-run call cap across sidecars: counters recorded by one reach the other's cache", async () => {
    const scope = newScope("cache-cap");
    await open(scope, ["echo"], { maxToolCallsPerRun: 3 });
    const two = `const a = await tools.echo({ n: 1 }); const b = await tools.echo({ n: 2 }); return a.n + b.n`;
    // Sidecar 1 caches the run with no calls counted.
    expect((await run(1, scope, "return 0")).model.value).toBe(0);
    expect((await run(0, scope, two)).model.value).toBe(3);
    // The record leaves sidecar 0 after its result: wait until the orchestrator has it.
    await until(async () => (await control.getTrajectory({ scope })).steps.some((s) => s.nestedCalls.length === 2), "the segment to be recorded");
    const capped = await run(1, scope, `await tools.echo({ n: 1 }); try { await tools.echo({ n: 2 }); return "not capped"; } catch (e) { return e.message; }`);
    expect(capped.model.value).toMatch(/made 3 tool calls, its limit \(maxToolCallsPerRun\)/);
  });

  it("disconnects a sidecar that does not ack an invalidation, and the change still returns", async () => {
    const link = createClient(SidecarLink, orchestrator.ready.link!);
    const stream = link.attach();
    stream.send({ message: { case: "hello", value: { sidecarId: "silent-sidecar", address: "127.0.0.1:1", version: "test" } } });
    const ended = (async () => {
      try {
        for await (const _ of stream.messages) {
          // welcome, then an invalidation this sidecar never acks
        }
        return "ended";
      } catch (err) {
        return (err as { code?: string }).code;
      }
    })();
    const scope = newScope("cache-silent");
    await open(scope, ["delta"]);
    // Attached by now (the hello was sent before OpenRun): resolving makes it a holder.
    await until(async () => (await link.resolveRun({ scope, sidecarId: "silent-sidecar" })).cacheable, "the silent sidecar to become cache-eligible");
    const from = orchestrator.stderr.length;
    await open(scope, ["epsilon"]);
    expect(await ended).toBe("unavailable");
    // The change waited for the ack until its deadline: the silent sidecar was disconnected
    // before the run was opened again (the orchestrator logs both, in that order).
    const reopened = new RegExp(`"agentRunId":"${scope.agentRunId}".*"msg":"run opened"`);
    await logged(orchestrator, reopened, { from });
    const disconnected = lineIndex(orchestrator, /"sidecarId":"silent-sidecar".*disconnecting a sidecar: its cached runs cannot be trusted/, from);
    expect(disconnected).toBeGreaterThan(-1);
    expect(disconnected).toBeLessThan(lineIndex(orchestrator, reopened, from));
    link.close();
  });
});
