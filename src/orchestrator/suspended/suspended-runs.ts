/**
 * The SidecarLink methods for suspended runs: store one (SuspendRun, or a checkpoint of a
 * VM that lives on), claim one for a `wait` (ClaimRun), end the claim (ReleaseRun), mark a
 * run lost when its snapshot no longer matches its VM (InvalidateRun), keep a gateway's
 * answer with the run that awaits it (RouteToolResult), and long-poll for answers while a
 * run is resumed (AwaitToolResults). The store decides; this module translates between the
 * wire and the store, and turns refusals into the seed's messages.
 */
import { ErrorCode } from "../../gen/codemode/common/v1/common_pb.js";
import type { SidecarLink, SuspendedRun, ToolAnswer } from "../../gen/codemode/orchestrator/v1/link_pb.js";
import type { ServiceHandlers } from "../../protocol/grpc-service.js";
import { ServiceError } from "../../protocol/service-error.js";
import { DEFAULT_CONFIG, LIMITS, parseCodeModeConfig, type CodeModeConfig } from "../../shared/config.js";
import type { LiveForwarder } from "../link/live-forward.js";
import {
  answerFromWire,
  answerToWire,
  APPROVAL_KEEP_MS,
  clampApproval,
  pendingKindFromWire,
  pendingKindToWire,
  reasonFromWire,
  reasonToWire,
  RUN_MESSAGES as MESSAGES,
} from "../../shared/link-wire.js";
import type { Logger } from "../../shared/logger.js";
import { scopeFromLink } from "../../shared/scope.js";
import { storeCall } from "../state/store-failure.js";
import { isStoredMark, recordBytes, type RunStore, type StoredAnswer, type SuspendedRecord } from "./run-store.js";
import { suspendedBytesRefusal, suspendedRunsRefusal, type TenantStoreQuotas } from "../tenants/store-quotas.js";

/** Pending entries a stored run may list: the largest maxPendingToolCalls, plus armed timers (100) and a yield. */
const MAX_PENDING_ENTRIES = LIMITS.maxPendingToolCalls.max + 101;

/** Longest AwaitToolResults long-poll served. */
const MAX_AWAIT_MS = 60_000;
/** Longest claim lease granted. */
const MAX_LEASE_MS = 10 * 60_000;
/** Recheck interval while long-polling, in case a notification was missed. */
const RECHECK_MS = 1_000;

/** A claim's lease as asked for, within what is granted (the longest when none is asked). */
const leaseOf = (ms: number) => Math.min(MAX_LEASE_MS, Math.max(1_000, ms || MAX_LEASE_MS));

function storedAnswerFromWire(a: ToolAnswer | undefined): StoredAnswer {
  if (!a?.callId) throw new ServiceError("invalid_argument", "answer.call_id is required");
  const value = answerFromWire(a);
  if (!value) throw new ServiceError("invalid_argument", "answer must set result_json, error or approval_pending");
  return { callId: a.callId, ...value };
}

const storedAnswerToWire = (a: StoredAnswer) => answerToWire(a.callId, a, a);

/**
 * A run's config, parsed and clamped by the one config schema (an unreadable one counts
 * as the defaults). The orchestrator does not trust a sidecar's arithmetic for what it
 * enforces itself: snapshot size and expiry.
 */
function configOf(configJson: string): CodeModeConfig {
  try {
    return parseCodeModeConfig(JSON.parse(configJson) as Record<string, unknown>);
  } catch {
    return DEFAULT_CONFIG;
  }
}

function recordFromWire(run: SuspendedRun | undefined): { record: SuspendedRecord; config: CodeModeConfig } {
  if (!run?.codeModeRunId) throw new ServiceError("invalid_argument", "run.code_mode_run_id is required");
  const scope = scopeFromLink(run.scope);
  if (run.snapshot.byteLength === 0) throw new ServiceError("invalid_argument", "run.snapshot is empty");
  // A VM awaits at most maxPendingToolCalls host requests; answers only for those.
  if (run.pending.length > MAX_PENDING_ENTRIES) throw new ServiceError("invalid_argument", `run.pending lists more than ${MAX_PENDING_ENTRIES} entries`);
  const pendingIds = new Set(run.pending.map((p) => p.callId));
  if (pendingIds.size !== run.pending.length || pendingIds.has(""))
    throw new ServiceError("invalid_argument", "run.pending call ids must be unique and non-empty");
  const config = configOf(run.configJson);
  // A mark is kept with the run's own clamp, and the run at least that long (plus APPROVAL_KEEP_MS).
  const answers = run.answers
    .map(storedAnswerFromWire)
    .map((a) => (isStoredMark(a) ? { ...a, approval: clampApproval(a.approval, config.approvalTimeoutMs) } : a));
  let keepUntil = Date.now() + config.snapshotTtlSeconds * 1000;
  for (const a of answers) if (isStoredMark(a)) keepUntil = Math.max(keepUntil, a.approval.expiresAtMs + APPROVAL_KEEP_MS);
  if (answers.some((a) => !pendingIds.has(a.callId)) || new Set(answers.map((a) => a.callId)).size !== answers.length) {
    throw new ServiceError("invalid_argument", "run.answers must answer distinct pending calls");
  }
  // A snapshot is sealed for one generation, exactly one more than the store's; the store checks.
  if (run.generation < 1n || run.generation > BigInt(Number.MAX_SAFE_INTEGER))
    throw new ServiceError("invalid_argument", "run.generation must be from 1 to 2^53 - 1");
  const record: SuspendedRecord = {
    codeModeRunId: run.codeModeRunId,
    scope,
    snapshot: run.snapshot,
    pending: run.pending.map((p) => {
      const kind = pendingKindFromWire(p.kind);
      return kind === "timer"
        ? { callId: p.callId, kind, toolId: p.toolId, toolName: p.toolName, dueAtMs: Number(p.dueAtMs) }
        : { callId: p.callId, kind, toolId: p.toolId, toolName: p.toolName };
    }),
    answers,
    reason: reasonFromWire(run.reason),
    configJson: run.configJson,
    outputBytes: Number(run.outputBytes),
    // Expiry is the orchestrator's: its clock, the run's clamped TTL (longer while a person is asked).
    expiresAtMs: keepUntil,
    approvalTimeoutMs: config.approvalTimeoutMs,
    catalogVersion: run.catalogVersion,
    execCallId: run.execCallId,
    generation: Number(run.generation),
  };
  return { record, config };
}

function recordToWire(r: SuspendedRecord) {
  return {
    codeModeRunId: r.codeModeRunId,
    scope: r.scope,
    snapshot: r.snapshot,
    pending: r.pending.map((p) => ({
      callId: p.callId,
      toolId: p.toolId,
      toolName: p.toolName,
      kind: pendingKindToWire(p.kind),
      dueAtMs: BigInt(p.dueAtMs ?? 0),
    })),
    answers: r.answers.map(storedAnswerToWire),
    reason: reasonToWire(r.reason),
    configJson: r.configJson,
    outputBytes: BigInt(r.outputBytes),
    expiresAtMs: BigInt(r.expiresAtMs),
    catalogVersion: r.catalogVersion,
    execCallId: r.execCallId,
    generation: BigInt(r.generation),
  };
}

export type SuspendedRunDeps = {
  store: RunStore;
  /** The process's cap on suspended runs (a tenant's quota, when it has one, instead). */
  maxSuspendedRuns: number;
  log: Logger;
  /** Forwards answers no suspended run awaits to the sidecars' live VMs. */
  live: LiveForwarder;
  /** The store's tenant and its quotas (a tenants file: ../tenants/store-quotas.ts). */
  quota?: TenantStoreQuotas;
};

export function suspendedRunHandlers(deps: SuspendedRunDeps): Partial<ServiceHandlers<typeof SidecarLink.method>> {
  const { store, log } = deps;
  const quotas = deps.quota?.quotas ?? {};
  const limits = {
    maxSuspendedRuns: quotas.maxSuspendedRuns ?? deps.maxSuspendedRuns,
    ...(quotas.maxSuspendedBytes !== undefined ? { maxSuspendedBytes: quotas.maxSuspendedBytes } : {}),
  };
  /**
   * The refusal the model reads: the seed's message (`invalid_input`), or a tenant's quota by
   * its name and when to retry (`runtime_unavailable`: the program was fine, the store is full).
   */
  const refusal = async (why: "cap" | "bytes" | "claim_lost" | "stale", record: SuspendedRecord) => {
    const q = deps.quota;
    const quota = why === "bytes" ? "maxSuspendedBytes" : why === "cap" && quotas.maxSuspendedRuns !== undefined ? "maxSuspendedRuns" : undefined;
    if (!q || !quota) return { refused: why === "cap" ? MESSAGES.cap : MESSAGES.unavailable, refusedCode: ErrorCode.INVALID_INPUT };
    q.refused?.(quota);
    const next = await store.nextExpiry().catch(() => undefined);
    const refused = quota === "maxSuspendedRuns" ? suspendedRunsRefusal(q, next) : suspendedBytesRefusal(q, recordBytes(record), next);
    return { refused, refusedCode: ErrorCode.RUNTIME_UNAVAILABLE };
  };

  /** Resolves when an answer for `codeModeRunId` is stored, or after `ms`, or on abort. */
  const answerSignal = (codeModeRunId: string, ms: number, signal: AbortSignal) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        off();
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      const off = store.onAnswer((id) => {
        if (id === codeModeRunId) done();
      });
      signal.addEventListener("abort", done, { once: true });
    });

  return {
    async suspendRun(req) {
      const { record, config } = recordFromWire(req.run);
      const limit = config.maxSnapshotBytes;
      if (record.snapshot.byteLength > limit) {
        return {
          refused: `code mode snapshot is ${record.snapshot.byteLength} bytes, over maxSnapshotBytes (${limit} bytes).`,
          refusedCode: ErrorCode.SNAPSHOT_LIMIT_EXCEEDED,
        };
      }
      if ((req.reclaim || req.checkpoint) && !req.claimToken) throw new ServiceError("invalid_argument", "claim_token is required with reclaim or checkpoint");
      if (req.claimToken.length > 128) throw new ServiceError("invalid_argument", "claim_token is longer than 128 characters");
      // A checkpoint's VM lives on: the run stays claimed by it, as a wait's claim holds.
      const hold = req.checkpoint ? { token: req.claimToken, leaseMs: leaseOf(req.leaseMs), ...(req.sidecarId ? { holder: req.sidecarId } : {}) } : undefined;
      // Logged as the command goes to the store (for tests that stop the store in between).
      log.debug({ codeModeRunId: record.codeModeRunId, reclaim: req.reclaim, checkpoint: req.checkpoint }, "storing a suspended run");
      const res = await storeCall(log, req.checkpoint ? "store a checkpoint" : "store a suspended run", () =>
        store.suspend(record, { ...limits, ...(req.reclaim ? { claimToken: req.claimToken } : {}), ...(hold ? { hold } : {}) }),
      );
      if (!res.ok) {
        if (res.why === "stale") {
          // A sidecar always sends the next generation: anything else is an older snapshot sent again.
          log.warn(
            { codeModeRunId: record.codeModeRunId, generation: record.generation },
            "refused a suspended run whose generation is not the next one (a replayed or out-of-order snapshot)",
          );
        } else log.info({ codeModeRunId: record.codeModeRunId, why: res.why }, "refused to store a suspended run");
        return await refusal(res.why, record);
      }
      log.info(
        {
          codeModeRunId: record.codeModeRunId,
          snapshotBytes: record.snapshot.byteLength,
          pending: record.pending.length,
          answers: record.answers.length,
          reason: record.reason,
          reclaim: req.reclaim,
          generation: record.generation,
        },
        req.checkpoint ? "checkpoint stored" : "suspended run stored",
      );
      return { answeredCallIds: res.answeredCallIds };
    },

    async claimRun(req) {
      const scope = scopeFromLink(req.scope);
      if (!req.codeModeRunId) return { refused: MESSAGES.unavailable };
      const leaseMs = leaseOf(req.leaseMs);
      if (req.claimToken.length > 128) throw new ServiceError("invalid_argument", "claim_token is longer than 128 characters");
      const token = req.claimToken || undefined;
      const res = await storeCall(log, "claim a suspended run", () => store.claim(req.codeModeRunId, scope, leaseMs, token, req.sidecarId || undefined));
      if (!res.ok) {
        log.info({ codeModeRunId: req.codeModeRunId, why: res.why }, "refused a wait");
        return { refused: MESSAGES[res.why] };
      }
      // From here until its release, another wait for the run is refused as in flight.
      log.info({ codeModeRunId: req.codeModeRunId, leaseMs }, "suspended run claimed by a wait");
      return { run: recordToWire(res.run), claimToken: res.token };
    },

    async releaseRun(req) {
      if (!req.codeModeRunId || !req.claimToken) throw new ServiceError("invalid_argument", "code_mode_run_id and claim_token are required");
      const released = await storeCall(log, "release a suspended run", () => store.release(req.codeModeRunId, req.claimToken, req.keep));
      if (released && !req.keep) log.info({ codeModeRunId: req.codeModeRunId }, "suspended run settled; snapshot deleted");
      return { released };
    },

    async invalidateRun(req) {
      if (!req.codeModeRunId || !req.claimToken) throw new ServiceError("invalid_argument", "code_mode_run_id and claim_token are required");
      const generation = Number(req.generation);
      const invalidated = await storeCall(log, "invalidate a checkpoint", () => store.invalidate(req.codeModeRunId, req.claimToken, generation));
      if (invalidated) log.info({ codeModeRunId: req.codeModeRunId, generation }, "checkpoint invalidated: the run is lost if its VM dies");
      else log.warn({ codeModeRunId: req.codeModeRunId, generation }, "could not invalidate a checkpoint: its claim or generation is not current");
      return { invalidated };
    },

    async routeToolResult(req) {
      const scope = scopeFromLink(req.scope);
      const answer = storedAnswerFromWire(req.answer);
      const { result, codeModeRunId } = await storeCall(log, "keep a tool answer with its suspended run", () => store.addAnswer(scope, answer));
      switch (result) {
        case "stored":
          return { codeModeRunId: codeModeRunId ?? "" };
        case "asking":
          throw new ServiceError("already_exists", `tool call ${answer.callId} already awaits approval`);
        case "expired":
          throw new ServiceError(
            "failed_precondition",
            `the approval of tool call ${answer.callId} expired; the decision was dropped (the program is told ApprovalExpired)`,
          );
        case "unknown": {
          // Not a suspended run's: maybe a live VM on another sidecar awaits it.
          const a = answerFromWire(req.answer!);
          if (a && (await deps.live.forward(req.sidecarId, scope, answer.callId, a))) return { deliveredLive: true };
          throw new ServiceError("not_found", `no suspended code mode run or live VM awaits tool call ${answer.callId}`);
        }
        case "scope":
          throw new ServiceError("permission_denied", `tool call ${answer.callId} belongs to a different run scope`);
        case "duplicate":
          throw new ServiceError("already_exists", `tool call ${answer.callId} was already answered`);
        case "ended":
          throw new ServiceError("failed_precondition", `the code mode run that made tool call ${answer.callId} already ended; the answer was dropped`);
      }
    },

    async awaitToolResults(req, ctx) {
      if (!req.codeModeRunId || !req.claimToken) throw new ServiceError("invalid_argument", "code_mode_run_id and claim_token are required");
      const seen = new Set(req.seenCallIds);
      const until = Date.now() + Math.min(MAX_AWAIT_MS, req.timeoutMs);
      for (;;) {
        const answers = await storeCall(log, "read a suspended run's answers", () => store.answers(req.codeModeRunId, req.claimToken, seen));
        if (answers === undefined) return { claimCurrent: false };
        if (answers.length > 0) return { claimCurrent: true, answers: answers.map(storedAnswerToWire) };
        const left = until - Date.now();
        if (left <= 0 || ctx.signal.aborted) return { claimCurrent: true };
        await answerSignal(req.codeModeRunId, Math.min(left, RECHECK_MS), ctx.signal);
      }
    },
  };
}
