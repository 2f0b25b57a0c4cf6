/**
 * Stores a suspended segment with the orchestrator and says what the model gets back.
 *
 * The worker hands over an idle VM's snapshot and everything the VM still awaits. Here
 * the snapshot is sealed (AES-256-GCM, bound to the run, scope, metadata and the run's
 * next generation in the store), checked against `maxSnapshotBytes`, and sent with the
 * pending list and the answers the VM had not yet consumed (an answer can arrive after
 * the snapshot was taken). Answers that arrive while the store call is in flight are
 * routed to the orchestrator afterwards, so nothing a gateway sent is lost between "the
 * VM stopped" and "the run is stored". A checkpoint (./checkpoints.ts) is sealed and
 * stored the same way, for a VM that lives on.
 */
import type { CodeModeConfig } from "../../shared/config.js";
import { answerToWire, pendingKindToWire, reasonToWire, type GatewayAnswer, type SuspendReason } from "../../shared/link-wire.js";
import type { Logger } from "../../shared/logger.js";
import { withRetries } from "../link/retry.js";
import { isStoreUnavailable } from "../../shared/store-errors.js";
import { ServiceError } from "../../protocol/service-error.js";
import type { OrchestratorLink } from "../link/orchestrator-link.js";
import { errorCodeName, type PendingCall, type ResultInput } from "../exec/result.js";
import type { Answer, Approval, PendingInfo, Scope, Segment } from "../exec/segment.js";
import type { SnapshotSealer } from "./snapshot-seal.js";
import type { PendingRef, TaskLimits, TaskOutcome } from "../pool/task-protocol.js";

export type SuspendedOutcome = Extract<TaskOutcome, { status: "suspended" }>;

export type SuspendContext = {
  scope: Scope;
  scopeKey: string;
  codeModeRunId: string;
  execCallId: string;
  config: CodeModeConfig;
  catalogVersion: string;
  link: OrchestratorLink;
  sealer: SnapshotSealer;
  /** The gateway's call: a suspension it cancelled is dropped, not stored. */
  signal: AbortSignal;
  /**
   * For a resumed run: its claim (with the store's generation of the run), what the stored run
   * already knew, and `from`: its stored snapshot, unsealed (./checkpoints.ts stores it
   * again when a store outage held back the resumed VM's next call).
   */
  claim?: {
    token: string;
    generation: number;
    pending: Map<string, PendingInfo>;
    answers: Map<string, Answer>;
    from?: { envelope: Uint8Array; reason: SuspendReason; outputBytes: number };
  };
};

export type SuspendResult = { result: ResultInput; snapshotBytes?: number };

/** Tool calls still without an answer: what the model sees as pendingToolCalls (with their approvals, when a person is asked). */
export function unsettledCalls(
  pending: Iterable<PendingInfo>,
  answered: (callId: string) => boolean,
  approvals?: ReadonlyMap<string, Approval>,
): PendingCall[] {
  const out: PendingCall[] = [];
  for (const p of pending) {
    if (p.kind !== "call" || answered(p.callId)) continue;
    const a = approvals?.get(p.callId);
    out.push({ callId: p.callId, toolId: p.toolId, toolName: p.toolName, ...(a ? { approval: { reason: a.reason, expiresAtMs: a.expiresAtMs } } : {}) });
  }
  return out;
}

/**
 * The stored metadata a seal covers, canonically encoded: the sidecar that resumes the
 * run rebuilds it from the stored record, so an edited record fails the seal.
 */
export function sealMeta(m: { configJson: string; reason: SuspendReason; pending: Iterable<PendingInfo>; outputBytes: number }): string {
  return JSON.stringify([m.configJson, m.reason, [...m.pending].map((p) => [p.callId, p.kind, p.toolId, p.toolName, p.dueAtMs ?? 0]), m.outputBytes]);
}

/**
 * The largest sealed snapshot the link carries: gRPC messages between sidecar and
 * orchestrator are capped at 64 MiB, and a claimed run also carries its answers.
 */
export const MAX_STORED_SNAPSHOT_BYTES = 48 * 1024 * 1024;

/** Hands an answer that came in late to the stored run; a few tries, then it stays unsettled. */
async function routeLate(ctx: SuspendContext, callId: string, a: GatewayAnswer, seg: Segment): Promise<boolean> {
  try {
    await withRetries(
      () => ctx.link.rpc.routeToolResult({ scope: ctx.scope, answer: answerToWire(callId, a) }, { deadlineMs: 10_000 }),
      () => true,
    );
    return true;
  } catch (err) {
    seg.log.error({ err, callId }, "could not hand a late answer to the suspended run; the call is listed as unsettled");
    return false;
  }
}

/** A VM's snapshot as the store keeps it: sealed, with what it awaits and the answers the segment knows for those calls. */
export type SealedRun = {
  run: NonNullable<SuspendRunRequest["run"]>;
  /** The sealed snapshot's size. */
  bytes: number;
  pending: PendingInfo[];
  /** Answers (and approval marks) sent with it, by call id. */
  included: Map<string, GatewayAnswer>;
  /** The approval marks the segment held when it was sealed. */
  marksSent: Map<string, Approval>;
};

type SuspendRunRequest = Parameters<OrchestratorLink["rpc"]["suspendRun"]>[0];

/**
 * Seals a snapshot for store generation `generation` and lists what goes with it; a string
 * says why it is too large to store. A suspension and a checkpoint (./checkpoints.ts) store the same.
 */
export function sealRun(
  seg: Segment,
  snap: { envelope: Uint8Array; pending: PendingRef[]; reason: SuspendReason; outputBytes: number },
  ctx: SuspendContext,
  generation: number,
): SealedRun | string {
  const pending: PendingInfo[] = snap.pending.map((ref) =>
    ref.kind === "timer"
      ? { callId: ref.callId, kind: ref.kind, toolId: "", toolName: "", dueAtMs: ref.dueAtMs ?? Date.now() }
      : (seg.made.get(ref.callId) ?? ctx.claim?.pending.get(ref.callId) ?? { callId: ref.callId, kind: ref.kind, toolId: "", toolName: "" }),
  );
  const configJson = JSON.stringify(ctx.config);
  const meta = sealMeta({ configJson, reason: snap.reason, pending, outputBytes: snap.outputBytes });
  const notAfterMs = Date.now() + ctx.config.snapshotTtlSeconds * 1000;
  const sealed = ctx.sealer.seal(snap.envelope, { codeModeRunId: ctx.codeModeRunId, scopeKey: ctx.scopeKey, meta, generation }, notAfterMs);
  const limit = Math.min(ctx.config.maxSnapshotBytes, MAX_STORED_SNAPSHOT_BYTES);
  if (sealed.byteLength > limit) {
    const which = limit === ctx.config.maxSnapshotBytes ? "maxSnapshotBytes" : "the largest snapshot the store link carries";
    return `code mode snapshot is ${sealed.byteLength} bytes, over ${which} (${limit} bytes)`;
  }
  const known = (id: string): GatewayAnswer | undefined => {
    const a = seg.answers.get(id) ?? ctx.claim?.answers.get(id);
    if (a) return a;
    const m = seg.awaitingApproval.get(id);
    return m ? { approval: m } : undefined;
  };
  const included = new Map<string, GatewayAnswer>();
  for (const p of pending) {
    const a = known(p.callId);
    if (a) included.set(p.callId, a);
  }
  // What the stored run says of each call a person is being asked about.
  const marksSent = new Map(seg.awaitingApproval);
  const run = {
    codeModeRunId: ctx.codeModeRunId,
    scope: ctx.scope,
    snapshot: sealed,
    pending: pending.map((p) => ({
      callId: p.callId,
      toolId: p.toolId,
      toolName: p.toolName,
      kind: pendingKindToWire(p.kind),
      dueAtMs: BigInt(p.dueAtMs ?? 0),
    })),
    answers: [...included].map(([id, a]) => answerToWire(id, a)),
    reason: reasonToWire(snap.reason),
    configJson,
    outputBytes: BigInt(snap.outputBytes),
    catalogVersion: ctx.catalogVersion,
    execCallId: ctx.execCallId,
    generation: BigInt(generation),
  };
  return { run, bytes: sealed.byteLength, pending, included, marksSent };
}

/**
 * Answers that reached the segment for `sealed`'s calls after it was sealed are handed to
 * the stored run, so it keeps them too (the VM may have taken them already).
 */
export async function handOverLate(seg: Segment, ctx: SuspendContext, sealed: SealedRun): Promise<void> {
  const { pending, included, marksSent } = sealed;
  for (const p of pending) {
    const a: GatewayAnswer | undefined =
      seg.answers.get(p.callId) ?? (marksSent.has(p.callId) ? undefined : (ctx.claim?.answers.get(p.callId) ?? markOf(seg, p.callId)));
    const sent = included.get(p.callId);
    if (!a || (sent && !("approval" in sent)) || sent === a) continue;
    if (await routeLate(ctx, p.callId, a, seg)) included.set(p.callId, a);
  }
}

function markOf(seg: Segment, callId: string): GatewayAnswer | undefined {
  const m = seg.awaitingApproval.get(callId);
  return m ? { approval: m } : undefined;
}

export async function storeSuspension(seg: Segment, outcome: SuspendedOutcome, ctx: SuspendContext): Promise<SuspendResult> {
  // The store takes exactly its generation plus one: 1 for a first suspension.
  const generation = (ctx.claim?.generation ?? 0) + 1;
  const sealed = sealRun(seg, outcome, ctx, generation);
  if (typeof sealed === "string") return { result: { status: "failed", error: `${sealed}; the run cannot be suspended.`, code: "snapshot_limit_exceeded" } };
  const { pending, included } = sealed;
  const request = { run: sealed.run, reclaim: ctx.claim !== undefined, claimToken: ctx.claim?.token ?? "" };
  // Retried while the orchestrator cannot be reached (the link's address may lead to another
  // one): the store takes this same request again as already stored, so a reply lost with a
  // dying orchestrator does not leave the run stored while the model is told it failed.
  const res = await withRetries(
    () => ctx.link.rpc.suspendRun(request, { deadlineMs: 10_000 }),
    (err) => err instanceof ServiceError && err.code === "unavailable" && !ctx.signal.aborted,
  );
  if (res.refused) {
    return { result: { status: "failed", error: res.refused, code: errorCodeName(res.refusedCode) ?? "invalid_input" } };
  }
  seg.suspendedAs = generation;
  // From here on, answers for these calls are routed to the stored run. Those that
  // reached this sidecar after the snapshot and after the request above was built are
  // handed over now, so the stored run keeps them too.
  seg.endCalls();
  await handOverLate(seg, ctx, sealed);
  const marks = new Map<string, Approval>();
  for (const [id, a] of included) if ("approval" in a) marks.set(id, a.approval);
  const answered = new Set([...[...included].filter(([, a]) => !("approval" in a)).map(([id]) => id), ...res.answeredCallIds]);
  for (const id of answered) marks.delete(id);
  const unsettled = unsettledCalls(pending, (id) => answered.has(id), marks);
  // A run that suspended for approvals but got every decision meanwhile is waiting on answers only.
  const reason = outcome.reason === "approval" && !unsettled.some((p) => p.approval) ? "pending_tools" : outcome.reason;
  return {
    result: { status: "waiting", codeModeRunId: ctx.codeModeRunId, reason, pending: unsettled },
    snapshotBytes: sealed.bytes,
  };
}

/** Ends a wait's claim: keep=false deletes the run (it settled), keep=true leaves it as it was. */
export async function releaseClaim(link: OrchestratorLink, codeModeRunId: string, token: string, keep: boolean, log: Logger): Promise<void> {
  try {
    // Safe to repeat: a release that already happened is "no longer current". Without it a
    // settled run would stay claimed, then be resumable again once the lease passed.
    const r = await withRetries(
      () => link.rpc.releaseRun({ codeModeRunId, claimToken: token, keep }, { deadlineMs: 10_000 }),
      (err) => err instanceof ServiceError && err.code === "unavailable",
    );
    // A settled run is deleted after its result went out: the gateway may have closed the
    // run meanwhile, which is no surprise; a kept run whose claim lapsed is.
    if (!r.released && keep) log.warn({ codeModeRunId, keep }, "the claim on the suspended run was no longer current at release");
    else if (!r.released) log.info({ codeModeRunId, keep }, "the settled run was already gone at release (closed by its gateway, or its claim lapsed)");
  } catch (err) {
    log.warn({ err, codeModeRunId, keep }, "could not release the suspended run");
  }
}

/** The limits a pool task runs under; `checkpoints`: its idle VM is checkpointed (the orchestrator takes them). */
export function limitsOf(config: CodeModeConfig, checkpoints = false): TaskLimits {
  return {
    timeoutMs: config.timeoutMs,
    memoryLimitBytes: config.memoryLimitBytes,
    maxOutputBytes: config.maxOutputBytes,
    maxPendingToolCalls: config.maxPendingToolCalls,
    maxSnapshotBytes: config.maxSnapshotBytes,
    ...(checkpoints ? { checkpointAfterMs: config.checkpointAfterMs } : {}),
  };
}

/**
 * Ends a segment from its worker outcome: a suspension is stored (and the model gets
 * `waiting`); anything else is the final result, and a resumed run's claim is released
 * with the run deleted. A VM that parked while a store outage held its next call back ends
 * `failed` (`runtime_unavailable`), its run kept at its stored snapshot.
 */
export async function endSegment(seg: Segment, outcome: TaskOutcome, ctx: SuspendContext): Promise<void> {
  // A run its checkpoints put in the store is held by their claim, at the store's generation.
  const held = await seg.checkpoints?.end();
  if (held) ctx = { ...ctx, claim: { pending: new Map(), answers: new Map(), ...ctx.claim, ...held } };
  if (outcome.status === "suspended" && ctx.signal.aborted) {
    outcome = { status: "failed", error: "code mode run was cancelled by the gateway.", code: "internal_error", outputBytes: outcome.outputBytes };
  }
  // The VM ended while its next call was held for a store that could not be reached: that call
  // was never sent, so the VM's state (which awaits it) is not stored. A VM that parked leaves the
  // run at its stored snapshot, still a correct resume point (./checkpoints.ts `keepStored`).
  if (seg.checkpoints?.heldBack) {
    const { kept, err } = seg.checkpoints.keepStored(outcome.status === "suspended");
    const which = isStoreUnavailable(err) ? "the orchestrator's store" : "the orchestrator";
    const error = `code mode could not send this run's next tool call: ${which} cannot be reached, and the run's stored checkpoint must be invalidated before a call goes out.`;
    if (kept) {
      // Its session-store writes since that snapshot are dropped: a resume makes them again.
      seg.discardSession();
      const keptError = `${error} The run is kept at that checkpoint: wait with runId "${ctx.codeModeRunId}" to resume it from there once ${which} is back.`;
      seg.finish({ status: "failed", error: keptError, code: "runtime_unavailable" }, outcome.outputBytes);
      return;
    }
    if (outcome.status === "suspended") outcome = { status: "failed", error, code: "runtime_unavailable", outputBytes: outcome.outputBytes };
  }
  // The session store: a cell that completes or parks (a checkpoint) commits its writes
  // before anything of its end is stored or sent; one that fails drops them.
  if (outcome.status === "failed") seg.discardSession();
  else {
    const refused = await seg.commitSession();
    if (refused) {
      // A resumed run whose writes could not reach the store keeps its last checkpoint, as for a snapshot that could not be stored.
      if (ctx.claim) await releaseClaim(ctx.link, ctx.codeModeRunId, ctx.claim.token, refused.unreachable, seg.log);
      seg.finish(
        {
          status: "failed",
          error: `code mode could not keep this cell's session-store writes: ${refused.message}.`,
          ...(refused.unreachable ? { code: "runtime_unavailable" as const } : {}),
        },
        outcome.outputBytes,
      );
      return;
    }
  }
  if (outcome.status === "suspended") {
    seg.log.debug(
      { reason: outcome.reason, pending: outcome.pending.length, ...outcome.snapshot, envelopeBytes: outcome.envelope.byteLength },
      "VM snapshotted",
    );
    let r: SuspendResult;
    let unreachable = false;
    try {
      r = await storeSuspension(seg, outcome, ctx);
    } catch (err) {
      seg.log.warn({ err }, "could not store the suspended run");
      unreachable = true;
      r = {
        result: {
          status: "failed",
          error: `code mode could not store the suspended run: ${isStoreUnavailable(err) ? "the orchestrator's store" : "the orchestrator"} cannot be reached.`,
          code: "runtime_unavailable",
        },
      };
    }
    // A resumed run whose new snapshot could not be stored keeps its previous one (a later
    // wait resumes from there; calls made in this segment are asked again): not lost.
    if (r.result.status === "failed" && ctx.claim) await releaseClaim(ctx.link, ctx.codeModeRunId, ctx.claim.token, unreachable, seg.log);
    seg.finish(r.result, outcome.outputBytes, r.snapshotBytes);
    return;
  }
  if (outcome.status === "completed") seg.finish({ status: "completed", valueJson: outcome.valueJson }, outcome.outputBytes);
  else seg.finish({ status: "failed", error: outcome.error, code: outcome.code }, outcome.outputBytes);
  // A resumed run that settled is deleted after its result went out (one link round trip
  // off the result's path), and before its stream ends: a stream that ends OK means the
  // store no longer has the run; a sidecar that dies in between fails the stream after the
  // result, and the run stays claimed until its lease passes, as for any wait it was serving.
  if (ctx.claim) await releaseClaim(ctx.link, ctx.codeModeRunId, ctx.claim.token, false, seg.log);
}
