/**
 * `codemode start` opens and closes a run through its own Control port before its ready
 * line (src/cli/start-check.ts): with the gateway token when one is set, and not at all when
 * the gateway ports use TLS (test/tls.test.ts). The run is gone once the ready line is out.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { selfAddress, START_CHECK_AGENT } from "../../src/cli/start-check.js";
import { logged, spawnCodemode, type Proc } from "../helpers/harness.js";

const START = ["start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0", "--threads", "1"];

describe("codemode start's check before its ready line", () => {
  let proc: Proc | undefined;
  afterEach(async () => {
    if (proc) expect(await proc.stop()).toBe(0);
    proc = undefined;
  });

  /** The check's run, from its "run opened" line; asserts it came before the ready line's "started". */
  async function checkedRun(p: Proc) {
    const opened = JSON.parse(await logged(p, /"agentRunId":"start-check-[^"]*".*"msg":"run opened"/)) as { agentRunId: string };
    await logged(p, /"msg":"started"/);
    const at = (re: RegExp) => p.stderr.findIndex((l) => re.test(l));
    expect(at(/start-up check: a run opened and closed/)).toBeGreaterThan(-1);
    expect(at(/start-up check: a run opened and closed/)).toBeLessThan(at(/"msg":"started"/));
    expect(p.stderr.some((l) => l.includes("start-up check failed"))).toBe(false);
    const id = opened.agentRunId;
    return { agentId: START_CHECK_AGENT, sessionId: id, sessionKey: id, agentRunId: id };
  }

  it("opens and closes a run through the Control port; it is gone after the ready line", async () => {
    proc = await spawnCodemode(START, { CODEMODE_LOG_LEVEL: "debug" });
    const scope = await checkedRun(proc);
    const control = createClient(Control, proc.ready.orchestrator!);
    try {
      await expect(control.describeSurface({ scope })).rejects.toMatchObject({ code: "not_found" });
    } finally {
      control.close();
    }
  });

  it("sends the gateway token when the ports require one", async () => {
    proc = await spawnCodemode(START, { CODEMODE_LOG_LEVEL: "debug", CODEMODE_AUTH_TOKEN: "start-check-token-0123456789" });
    await checkedRun(proc);
  });

  it("reaches a process listening on every interface through loopback", () => {
    expect(selfAddress("0.0.0.0:7301")).toBe("127.0.0.1:7301");
    expect(selfAddress("[::]:7301")).toBe("[::1]:7301");
    expect(selfAddress("127.0.0.1:7301")).toBe("127.0.0.1:7301");
    expect(selfAddress("10.1.2.3:7301")).toBe("10.1.2.3:7301");
  });
});
