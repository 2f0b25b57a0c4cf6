/**
 * The two processes apart: the sidecar's standing link to the orchestrator comes up,
 * goes down when the orchestrator stops, is re-opened when it returns (each state
 * logged), and the sidecar serves again. Both exit 0 on SIGTERM.
 */
import { expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { openEmptyRun, spawnCodemode } from "../helpers/harness.js";
import { until } from "../helpers/until.js";

it("the sidecar re-opens its orchestrator link after the orchestrator restarts", async () => {
  let orch = await spawnCodemode(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0"]);
  const orchAddress = orch.ready.orchestrator!;
  const linkAddress = orch.ready.link!;
  const side = await spawnCodemode(["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", linkAddress, "--threads", "1"]);
  const linkLogs = () => side.stderr.filter((l) => l.includes('"msg":"orchestrator link')).map((l) => (JSON.parse(l) as { link: string }).link);
  await until(() => linkLogs().includes("up"), "link up");
  expect(await orch.stop()).toBe(0);
  await until(() => linkLogs().includes("down"), "link down");
  orch = await spawnCodemode(["orchestrator", "--orchestrator-address", orchAddress, "--link-address", linkAddress]);
  await until(() => linkLogs().filter((s) => s === "up").length >= 2, "link up again");
  // The restarted orchestrator keeps runs in memory: the run is opened on it.
  const control = createClient(Control, orchAddress);
  const runScope = await openEmptyRun(control);
  control.close();
  const client = createClient(Sandbox, side.ready.sandbox!);
  let value = "";
  for await (const ev of client.exec({ scope: runScope, code: "return 'served'" })) {
    if (ev.event.case === "result") value = (JSON.parse(ev.event.value.modelJson) as { value: string }).value;
  }
  client.close();
  expect(value).toBe("served");
  expect(await side.stop()).toBe(0);
  expect(await orch.stop()).toBe(0);
});
