/**
 * BridgeCallback: a gateway's answer to a nested call (a result, an error, or a person's
 * approval mark or decision), checked and delivered into the live VM here that awaits it, or
 * handed to the orchestrator when none does (the call belongs to a suspended run, or to a run
 * live on another sidecar). A large answer goes to its VM while it is checked
 * (../worker/staged-answers.ts); a secret one never does before it is checked. ExecSession
 * takes its answers through this same handler (../exec-session.ts).
 */
import type { Sandbox } from "../../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { RunScope } from "../../gen/codemode/common/v1/common_pb.js";
import type { CallContext, ServiceHandlers } from "../../protocol/grpc-service.js";
import { ServiceError } from "../../protocol/service-error.js";
import { answerToWire, APPROVAL_ERRORS, isApprovalMark, type GatewayAnswer } from "../../shared/link-wire.js";
import type { Logger } from "../../shared/logger.js";
import { checkIdLength } from "../../shared/request-limits.js";
import { scopeKeyOf, type Scope } from "../../shared/scope.js";
import { isStoreUnavailable } from "../../shared/store-errors.js";
import type { OrchestratorLink } from "../link/orchestrator-link.js";
import { MAX_BRIDGE_BYTES, parseBridgeJson } from "../worker/json-bridge.js";
import { answerBytes, STAGE_MIN } from "./answer-wire.js";
import { approvalMarkOf } from "./approvals.js";
import type { CallRegistry } from "./call-registry.js";

type Handler = NonNullable<Partial<ServiceHandlers<typeof Sandbox.method>>["bridgeCallback"]>;

export function bridgeCallbackHandler(deps: {
  calls: CallRegistry;
  link: OrchestratorLink;
  log: Logger;
  /** The request's scope, as the caller's tenant's. */
  scopeOf: (s: RunScope | undefined, ctx: CallContext | undefined) => Scope;
}): Handler {
  const { calls, link, log, scopeOf } = deps;
  return async (req, ctx) => {
    const scope = scopeOf(req.scope, ctx);
    if (!req.callId) throw new ServiceError("invalid_argument", "call_id is required");
    checkIdLength("call_id", req.callId);
    const scopeKey = scopeKeyOf(scope);
    let answer: GatewayAnswer;
    let withdraw: (() => void) | undefined;
    if (req.outcome.case === "resultJson") {
      // A large text goes to its VM first, which parses it while it is checked here
      // (../worker/staged-answers.ts); one that arrived as bytes (./answer-wire.ts) goes
      // before it is even decoded, which reading `value` does.
      // A secret answer is never staged: the replay record must not see its text (../worker/replay-tape.ts).
      const raw = req.secret ? undefined : answerBytes(req);
      if (raw && raw.byteLength <= MAX_BRIDGE_BYTES) withdraw = calls.stage(req.callId, scopeKey, raw);
      const json = req.outcome.value;
      if (!raw && !req.secret && json.length >= STAGE_MIN && json.length <= MAX_BRIDGE_BYTES) withdraw = calls.stage(req.callId, scopeKey, json);
      try {
        parseBridgeJson(json, "result_json");
      } catch (err) {
        withdraw?.();
        throw new ServiceError("invalid_argument", (err as Error).message);
      }
      answer = { ok: true, json };
    } else if (req.outcome.case === "error") {
      const e = req.outcome.value;
      answer = { ok: false, error: { name: e.name || "Error", message: e.message } };
    } else if (req.outcome.case === "approvalPending") {
      answer = approvalMarkOf(req.outcome.value);
    } else if (req.outcome.case === "approvalDenied") {
      answer = { ok: false, error: { name: APPROVAL_ERRORS.denied, message: req.outcome.value.message } };
    } else {
      throw new ServiceError("invalid_argument", "set result_json, error, approval_pending or approval_denied");
    }
    if (req.secret && !isApprovalMark(answer)) answer.secret = true;
    try {
      if (calls.answerLive(req.callId, scopeKey, answer)) return { deliveredLive: true };
    } finally {
      withdraw?.(); // nothing once the answer went to the VM
    }
    try {
      const routed = await link.rpc.routeToolResult({ scope, answer: answerToWire(req.callId, answer), sidecarId: link.sidecarId }, { deadlineMs: 10_000 });
      return { deliveredLive: routed.deliveredLive };
    } catch (err) {
      if (err instanceof ServiceError && err.code === "not_found") throw calls.explainUndeliverable(req.callId, scopeKey);
      if (err instanceof ServiceError && ["permission_denied", "already_exists", "failed_precondition", "invalid_argument"].includes(err.code)) throw err;
      log.warn({ err, callId: req.callId }, "could not route a tool answer to the orchestrator");
      // The store's own message says so; anything else is the orchestrator not answering.
      if (isStoreUnavailable(err)) throw err;
      throw new ServiceError("unavailable", "the answer could not be handed to the orchestrator; retry");
    }
  };
}
