/**
 * `codemode start`'s check before its ready line: a run is opened on an internal scope
 * through the process's own Control port, and closed again. That proves the orchestrator
 * takes runs on its gateway port (and its store stores them), and it runs once what a
 * gateway's first run would otherwise run cold: a new gRPC connection and unary calls on a
 * server, OpenRun's config checks, catalog and model surface, and CloseRun. It runs while
 * the sidecar waits for its pool, so it costs the ready line nothing.
 *
 * Its traces are those of any run: "run opened" and "run closed" in the log (agent
 * START_CHECK_AGENT), two Control calls in the metrics, and its one-tool catalog in the
 * catalog store (content-addressed: the same entry every start). With TLS on the
 * gateway ports, or a tenants file, it is skipped (this process holds no certificate its
 * own client would trust, nor any tenant's token). It never fails the start: a failure or a check slower than CHECK_DEADLINE_MS is
 * logged and the start goes on.
 */
import { randomBytes } from "node:crypto";
import { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import type { ServerSecurity } from "../protocol/credentials.js";
import { createClient } from "../protocol/grpc-client.js";
import type { Logger } from "../shared/logger.js";

/** The agent id of the check's runs. */
export const START_CHECK_AGENT = "codemode-start-check";
/** How long the check may take before the start goes on without it. */
const CHECK_DEADLINE_MS = 2_000;

const TOOL = {
  name: "start_check",
  label: "Start check",
  description: "The tool of codemode start's check run; never called.",
  parametersJson: JSON.stringify({ type: "object", properties: { note: { type: "string" } } }),
  source: 1, // TOOL_SOURCE_OPENCLAW
  sourceName: "core",
  origin: 1, // TOOL_ORIGIN_CORE
};

/** An address the process can reach itself at: a wildcard host becomes loopback. */
export function selfAddress(address: string): string {
  const at = address.lastIndexOf(":");
  const host = address.slice(0, at);
  const port = address.slice(at + 1);
  if (host === "0.0.0.0") return `127.0.0.1:${port}`;
  if (host === "[::]" || host === "::") return `[::1]:${port}`;
  return address;
}

/** Opens and closes a run through the Control port at `address`; never throws. */
export async function startCheck(address: string, security: ServerSecurity, log: Logger, tenants = false): Promise<void> {
  if (security.tls) {
    log.debug({}, "start-up check skipped: the gateway ports use TLS");
    return;
  }
  if (tenants) {
    log.debug({}, "start-up check skipped: with a tenants file every Control call needs a tenant's token");
    return;
  }
  const started = performance.now();
  const id = randomBytes(6).toString("base64url");
  const scope = { agentId: START_CHECK_AGENT, sessionId: `start-check-${id}`, sessionKey: `start-check-${id}`, agentRunId: `start-check-${id}` };
  const control = createClient(Control, selfAddress(address), {}, security.token !== undefined ? { token: security.token } : {});
  try {
    await control.openRun({ scope, catalog: { case: "tools", value: { tools: [TOOL] } } }, { deadlineMs: CHECK_DEADLINE_MS });
    await control.closeRun({ scope }, { deadlineMs: CHECK_DEADLINE_MS });
    log.debug({ ms: Math.round(performance.now() - started) }, "start-up check: a run opened and closed through the Control port");
  } catch (err) {
    log.warn(
      { err, ms: Math.round(performance.now() - started) },
      "start-up check failed (a run could not be opened and closed through the Control port); starting anyway",
    );
  } finally {
    control.close();
  }
}
