/**
 * The service's gRPC ports receive with the larger HTTP/2 windows of
 * src/protocol/flow-window.ts (grpc-js servers keep 64 KiB otherwise): a raw HTTP/2
 * client reads what each port advertises. And a tool answer of nearly the bridge's 3 MiB
 * cap, far over one window, still reaches the guest whole.
 */
import http2 from "node:http2";
import { afterAll, beforeAll, expect, it } from "vitest";
import { CONNECTION_WINDOW_BYTES, STREAM_WINDOW_BYTES } from "../../src/protocol/flow-window.js";
import { gatewayExec, openRun } from "../helpers/gateway.js";
import { startStack, type Stack } from "../helpers/harness.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
}, 60_000);
afterAll(async () => {
  await stack?.stop();
});

/** The stream window a port advertises and the connection window it grants, as an HTTP/2 peer sees them. */
async function windowsOf(address: string): Promise<{ stream: number | undefined; connection: number }> {
  const session = http2.connect(`http://${address}`);
  try {
    const settings = await new Promise<http2.Settings>((resolve, reject) => {
      session.once("remoteSettings", resolve);
      session.once("error", reject);
    });
    // The connection window grows by a WINDOW_UPDATE sent with the session's start: ping once so it has arrived.
    await new Promise<void>((resolve, reject) => session.ping((err) => (err ? reject(err) : resolve())));
    return { stream: settings.initialWindowSize, connection: session.state.remoteWindowSize ?? 0 };
  } finally {
    session.close();
  }
}

it("advertises the larger receive windows on the sandbox, orchestrator and link ports", async () => {
  for (const address of [stack.sandboxAddress, stack.orchestratorAddress, stack.proc.ready.link!]) {
    expect(await windowsOf(address), address).toEqual({ stream: STREAM_WINDOW_BYTES, connection: CONNECTION_WINDOW_BYTES });
  }
});

it("delivers a 2.5 MB tool answer to the guest whole", async () => {
  const big = "x".repeat(2_500_000);
  const tools = [{ name: "blob", description: "Returns a large string", parameters: { type: "object", properties: {} }, handler: () => big }];
  const { scope } = await openRun(stack, tools);
  const out = await gatewayExec(stack, scope, tools, "const s = await tools.blob({}); return [s.length, s === 'x'.repeat(2500000)]");
  expect(out.model.value).toEqual([2_500_000, true]);
});
