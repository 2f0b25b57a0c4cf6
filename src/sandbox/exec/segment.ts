/**
 * One segment of a code-mode run on this sidecar: the `exec` that starts it, or a
 * `wait` that resumes it. It submits the task to the pool and turns what the worker
 * reports into the gateway's stream (output, nested tool calls), answers catalog
 * requests itself, registers nested calls so BridgeCallback can reach the live VM, keeps
 * every answer it handed to the VM (a suspension stores the ones the VM had not yet
 * consumed), and ends with exactly one Result plus a trajectory record. A call the
 * gateway says awaits a person's approval (./approvals.ts) stays pending; the VM learns it,
 * so it can suspend with reason `approval` when nothing else is left to do.
 */
import { createHash } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ToolSource } from "../../gen/codemode/common/v1/common_pb.js";
import type { ExecEventSchema } from "../../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { CodeModeConfig } from "../../shared/config.js";
import type { AnswerValue } from "../../shared/link-wire.js";
import type { Scope } from "../../shared/scope.js";
import type { Logger } from "../../shared/logger.js";
import type { CallRegistry, LiveCall } from "./call-registry.js";
import { sourceBreakdown, type CatalogEntryData, type CatalogSurface } from "../catalog/run-catalog.js";
import type { SandboxPool } from "../pool/pool.js";
import type { ExecEvents, ExecHandle, Submission } from "../pool/pool-contract.js";
import { buildResult, type OutputItem, type ResultInput, type TelemetryInput } from "./result.js";
import { recordStart, segmentRecordJson } from "./replay-record.js";
import type { SnapshotSealer } from "../suspend/snapshot-seal.js";
import { BUILD } from "../../shared/build-info.js";
import { tenantOf } from "../pool/cpu-budget.js";
import type { ResolvedRun, RunResolver } from "../link/run-resolver.js";
import type { PendingKind, TaskOutcome } from "../pool/task-protocol.js";
import { isStoreUnavailable } from "../../shared/store-errors.js";
import { SegmentApprovals, type Approval } from "./approvals.js";
import { SessionCell } from "./session-cell.js";
import { answerCatalogRequest, requestPayload, resolveCall } from "./guest-requests.js";
import type { LinkRpc } from "../link/link-calls.js";
import type { CheckpointMessage } from "../pool/pool-contract.js";
import type { AnswerMeta, GatewayAnswer } from "../../shared/link-wire.js";
import { EventGate } from "./event-gate.js";

const MODEL_VISIBLE = ["exec", "wait"] as const;
const TOOL_SEARCH_VISIBLE = ["tool_search_code"] as const;
const MCP_RUN_VISIBLE = ["codemode.run"] as const;
/** The error of a segment that cannot reach the orchestrator (to resolve, claim or store its run). */
export const ORCHESTRATOR_UNREACHABLE = "code mode runtime is unavailable: the orchestrator cannot be reached.";
/** The same when the orchestrator answered that its store cannot be reached. */
export const STORE_UNREACHABLE = "code mode runtime is unavailable: the orchestrator's store cannot be reached; try again shortly.";

/** Why a segment was cancelled when the store refused to clear a nested call (an outage holds the call instead). */
const NOT_CLEARED =
  "a nested call could not be sent: the run's stored checkpoint could not be invalidated first (the run's claim was lost, or the orchestrator failed the call)";

/** Which of the two a failed link call means. */
export function unreachable(err: unknown): string {
  return isStoreUnavailable(err) ? STORE_UNREACHABLE : ORCHESTRATOR_UNREACHABLE;
}
const SOURCE_ENUM = { openclaw: ToolSource.OPENCLAW, mcp: ToolSource.MCP, client: ToolSource.CLIENT } as const;

export type { Scope };
export type Answer = AnswerValue;
/** A host request the VM made, as a suspended run lists it. */
export type PendingInfo = { callId: string; kind: PendingKind; toolId: string; toolName: string; dueAtMs?: number };
export type { Approval };
export type ExecEventInit = NonNullable<MessageInitShape<typeof ExecEventSchema>["event"]>;

/** What a code-mode segment asks of its run's checkpoints (../suspend/checkpoints.ts). */
export type SegmentCheckpoints = {
  /** The idle VM's snapshot: stored in the background. */
  take(checkpoint: CheckpointMessage): void;
  /** Before a nested call goes out: resolves true once no stored snapshot could repeat it (false: it must not go out); undefined when none could. */
  beforeCall(call: { callId: string; toolName: string }): Promise<boolean> | undefined;
  /** An answer the store kept for a call a checkpoint listed (a wait's own poll read it). */
  answerFromStore(callId: string, answer: GatewayAnswer, times: AnswerMeta): void;
  /** The VM ended: waits for what is in flight; the claim the run is held by in the store, if any. */
  end(): Promise<{ token: string; generation: number } | undefined>;
  /** The VM ended while a nested call was held for a store that could not be reached: that call was never sent. */
  readonly heldBack: boolean;
  /** After `heldBack`: `park` keeps the run at its stored snapshot if that is still valid (`kept`); `err`: why the call was held. */
  keepStored(park: boolean): { kept: boolean; err: unknown };
};

export type SegmentInit = {
  /**
   * `tool_search_code`: a Tool Search program (openclaw.tools over every entry, never suspends).
   * `codemode.run`: a Code Mode for MCP script (../surfaces/mcp-run/run-service.ts, never suspends).
   */
  kind: "exec" | "wait" | "tool_search_code" | "codemode.run";
  scope: Scope;
  scopeKey: string;
  /** The model's exec or wait tool call id: the parent of nested calls made now. */
  parentCallId: string;
  codeModeRunId: string;
  config: CodeModeConfig;
  run: ResolvedRun | undefined;
  send(event: ExecEventInit): void;
  log: Logger;
  pool: SandboxPool;
  calls: CallRegistry;
  resolver: RunResolver;
  /** Seals a code-mode segment's replay record (a rebuild by replay checks it: ../suspend/rebuild.ts); none: kept unsealed. */
  sealer?: SnapshotSealer;
  /** A surface's own check of a resolved nested call (`codemode.run`: input validation); a failure answers the guest instead. */
  checkCall?: (entry: CatalogEntryData, inputJson: string) => { name: string; message: string } | undefined;
  /** A surface's own answer to a guest catalog request (`codemode.run`: discovery); undefined leaves it to the default. */
  answerRequest?: (op: string, payloadJson: string) => Answer | undefined;
  /** The link's session-store calls: code mode's `store` / `load` (./session-cell.ts). */
  sessions?: Pick<LinkRpc, "loadSession" | "commitSession">;
  /** Output earlier segments of the same gateway call produced (an awaitResults exec's resumes): its Result lists it too. */
  priorOutputs?: readonly OutputItem[];
};

/** Largest input or result kept whole in the trajectory; larger ones keep size and hash. */
const MAX_REPLAY_BYTES = 64 * 1024;

function replayText(text: string): { text: string; bytes: bigint; sha256: string } {
  const bytes = Buffer.byteLength(text, "utf8");
  return { text: bytes <= MAX_REPLAY_BYTES ? text : "", bytes: BigInt(bytes), sha256: createHash("sha256").update(text).digest("hex") };
}

export class Segment {
  readonly outputs: OutputItem[] = [];
  /** Every answer handed to the VM in this segment, by call id. */
  readonly answers = new Map<string, Answer>();
  /** Host requests the VM made in this segment. */
  readonly made = new Map<string, PendingInfo>();
  private readonly myCalls = new Set<LiveCall>();
  /** Source and owner of each nested call's tool, for the trajectory. */
  private readonly callSources = new Map<string, { source: ToolSource; sourceName: string }>();
  private readonly counters = { search: 0, describe: 0, call: 0 };
  private readonly startedAt = Date.now();
  /** The model's input, for the trajectory's replay record. */
  private inputJson = "";
  /** Set when the gateway cancelled the call (or its deadline passed) while it ran. */
  private cancelledBy: string | undefined;
  /** Calls of earlier segments answered while the run was suspended, delivered here. */
  private readonly resolved: Array<{ callId: string; outcome: string; errorMessage: string; deliveredAtMs: bigint }> = [];
  private readonly t0 = performance.now();
  private handle: ExecHandle | undefined;
  /** Calls that await a person's approval, and what the segment saw of approvals (telemetry, trajectory). */
  readonly approvals: SegmentApprovals;
  /** The cell's session-store reads and writes, made at its first `store` or `load`. */
  private sessionCell: SessionCell | undefined;
  /** The run's checkpoints, for a code-mode exec or wait (set by its starter). */
  checkpoints: SegmentCheckpoints | undefined;
  /** What goes to the gateway, in order; a nested call may be held (./event-gate.ts). */
  private readonly gate: EventGate;

  constructor(private readonly init: SegmentInit) {
    this.gate = new EventGate(init.send);
    if (init.priorOutputs) this.outputs.push(...init.priorOutputs);
    this.approvals = new SegmentApprovals({
      config: init.config,
      pauses: init.kind === "exec" || init.kind === "wait",
      log: init.log,
      answerLive: (callId, a) => init.calls.answerLive(callId, init.scopeKey, a),
      expireLive: (callId) => init.calls.expire(callId),
      answer: (callId, a) => this.answer(callId, a),
      tell: (callId) => this.handle?.approval(callId),
    });
  }

  /** Calls that await a person's approval now (a suspension stores their marks). */
  get awaitingApproval(): ReadonlyMap<string, Approval> {
    return this.approvals.awaiting;
  }

  get log(): Logger {
    return this.init.log;
  }

  /** Hands an answer to the VM (if it still runs) and remembers it. */
  answer(callId: string, answer: Answer): void {
    this.answers.set(callId, answer);
    this.approvals.answered(callId, answer);
    this.handle?.answer(callId, answer);
  }

  /** The checkpoint's calls take their answers through the store from now on (../suspend/checkpoints.ts). */
  handOver(callIds: ReadonlySet<string>): void {
    this.init.calls.endAll([...this.myCalls].filter((c) => callIds.has(c.callId)));
  }

  /** An answer the store kept for one of this segment's handed-over calls: settles it here too. */
  answerFromStore(callId: string, answer: Answer): void {
    for (const c of this.myCalls) {
      if (c.callId === callId && !c.outcome)
        c.outcome = { ok: answer.ok, errorMessage: answer.ok ? "" : answer.error.message, durationMs: Date.now() - c.startedAtMs };
    }
    this.answer(callId, answer);
  }

  /** Cancels the segment's VM (its run's claim is gone, or a call could not be cleared). */
  cancel(reason: string): void {
    if (this.cancelledBy !== undefined) return;
    this.cancelledBy = reason;
    this.handle?.cancel(reason);
  }

  /** A call awaits a person's approval (./approvals.ts `SegmentApprovals.await`). */
  awaitApproval(callId: string, toolId: string, toolName: string, mark: Approval, fromGateway: boolean): Approval | undefined {
    return this.approvals.await(callId, toolId, toolName, mark, fromGateway);
  }

  /** Keeps the model's input (exec: code/command/language; wait: runId) for replay. */
  recordInput(input: Record<string, unknown>): void {
    this.inputJson = JSON.stringify(input);
  }

  /** An earlier segment's call whose answer (stored while suspended) this segment delivers. */
  recordResolved(callId: string, answer: Answer): void {
    this.resolved.push({
      callId,
      outcome: answer.ok ? "ok" : "error",
      errorMessage: answer.ok ? "" : answer.error.message.slice(0, 2_000),
      deliveredAtMs: BigInt(Date.now()),
    });
  }

  /** Runs the task to its outcome; the first of `cancelSignals` to abort (the stream's, the drain's) cancels the VM. */
  async run(submission: Submission, cancelSignals: readonly AbortSignal[], suspendSignal?: AbortSignal): Promise<TaskOutcome> {
    const { config, run, calls, scopeKey, parentCallId, codeModeRunId } = this.init;
    // A code-mode segment keeps what its VM consumes, for replay (./replay-record.ts).
    if (config.recordForReplay && (this.init.kind === "exec" || this.init.kind === "wait")) {
      submission = { ...submission, record: true };
      this.replay = { start: recordStart(submission, BUILD, this.startedAt) };
    }
    const catalog = run?.catalog;
    const send = this.gate.send;
    const surface: CatalogSurface = this.init.kind === "tool_search_code" ? "tool_search" : config.searchIncludesMcp ? "code+mcp" : "code";
    let events!: ExecEvents;
    const handle = this.init.pool.exec(
      submission,
      (events = {
        onOutput: (kind, data) => {
          this.outputs.push({ kind, data });
          send({ case: "output", value: { kind: { case: kind, value: data } } });
        },
        onToolCall: (m) => {
          const { callId } = m;
          // An unknown id's "did you mean" reads the index, being built off the main thread (../catalog/index-builder.ts).
          const ready = m.via === "tools" ? catalog?.indexReadyFor(m.target) : undefined;
          if (ready) {
            this.made.set(callId, { callId, kind: "call", toolId: m.target.slice(0, 256), toolName: "" });
            return void ready.then(() => events.onToolCall(m));
          }
          this.counters.call++;
          const callsSoFar = (run?.counters.call ?? 0) + this.counters.call;
          const resolved =
            callsSoFar > config.maxToolCallsPerRun
              ? { ok: false as const, name: "RangeError", message: `this run made ${config.maxToolCallsPerRun} tool calls, its limit (maxToolCallsPerRun).` }
              : resolveCall(catalog, m, surface);
          if (!resolved.ok) {
            this.made.set(callId, { callId, kind: "call", toolId: m.via === "ns" ? "" : m.target.slice(0, 256), toolName: "" });
            this.answer(callId, { ok: false, error: { name: resolved.name, message: resolved.message } });
            return;
          }
          const { entry: e, inputJson } = resolved;
          const refused = this.init.checkCall?.(e, inputJson);
          if (refused) {
            this.made.set(callId, { callId, kind: "call", toolId: e.id, toolName: e.name });
            this.answer(callId, { ok: false, error: refused });
            return;
          }
          this.made.set(callId, { callId, kind: "call", toolId: e.id, toolName: e.name });
          const call: LiveCall = {
            callId,
            scopeKey,
            toolId: e.id,
            toolName: e.name,
            parentCallId,
            startedAtMs: Date.now(),
            deliver: (answer) => this.answer(callId, answer),
            onApproval: (mark) => this.awaitApproval(callId, e.id, e.name, mark, true),
            stage: (text) => this.handle?.stage(callId, text),
            unstage: () => this.handle?.unstage(callId),
          };
          this.myCalls.add(call);
          this.callSources.set(callId, { source: SOURCE_ENUM[e.source], sourceName: e.sourceName });
          calls.add(call);
          // A stored snapshot of the run that this call would make stale is invalidated first.
          const cleared = this.checkpoints?.beforeCall({ callId, toolName: e.name });
          if (cleared)
            this.gate.hold(
              callId,
              cleared.then((ok) => {
                // A call held back until the VM ended (a store outage) cancels nothing: the VM is over.
                if (!ok && !this.checkpoints?.heldBack) this.cancel(NOT_CLEARED);
                return ok;
              }),
            );
          send({
            case: "toolCall",
            value: { callId, toolId: e.id, toolName: e.name, source: SOURCE_ENUM[e.source], sourceName: e.sourceName, inputJson, parentCallId, codeModeRunId },
          });
        },
        onRequest: (reqId, op, payloadJson) => {
          this.made.set(reqId, { callId: reqId, kind: "request", toolId: "", toolName: op });
          if (op === "store" || op === "load") {
            const { sessions } = this.init;
            if (!sessions || !config.sessionStore || (this.init.kind !== "exec" && this.init.kind !== "wait")) {
              return this.answer(reqId, { ok: false, error: { name: "TypeError", message: "this run has no session store." } });
            }
            this.sessionCell ??= new SessionCell(sessions, this.init.scope, config);
            return void this.sessionCell.handle(op, payloadJson).then((a) => this.answer(reqId, a));
          }
          const payload = requestPayload(payloadJson);
          // A search, or describing an unknown id ("did you mean"), waits for its version's index, being built off the main thread (../catalog/index-builder.ts).
          const ready = op === "search" ? catalog?.indexReady() : op === "describe" ? catalog?.indexReadyFor(payload.id) : undefined;
          if (ready) return void ready.then(() => events.onRequest(reqId, op, payloadJson));
          const base = run?.counters ?? { search: 0, describe: 0 };
          if (
            (op === "search" || op === "describe") &&
            base.search + base.describe + this.counters.search + this.counters.describe >= config.maxSearchesPerRun
          ) {
            this.answer(reqId, {
              ok: false,
              error: { name: "RangeError", message: `this run made ${config.maxSearchesPerRun} searches and describes, its limit (maxSearchesPerRun).` },
            });
            return;
          }
          const own = this.init.answerRequest?.(op, payloadJson);
          if (own) {
            if (op === "search") this.counters.search++;
            else if (op === "describe") this.counters.describe++;
            this.answer(reqId, own);
            return;
          }
          if (op === "search") this.counters.search++;
          else if (op === "describe") this.counters.describe++;
          this.answer(reqId, answerCatalogRequest(catalog, op, payload, config, surface));
        },
        onYield: (callId) => {
          // The worker suspends the run once the VM is idle; `wait` resolves the yield.
          this.made.set(callId, { callId, kind: "yield", toolId: "", toolName: "" });
        },
        onCheckpoint: (m) => this.checkpoints?.take(m),
      }),
      tenantOf(this.init.scope),
    );
    this.handle = handle;
    for (const callId of this.approvals.awaiting.keys()) handle.approval(callId);
    const onAbort = () => {
      // The first signal to abort says why; a later one (the drain's after the stream's) changes nothing.
      if (this.cancelledBy !== undefined) return;
      const reason: unknown = cancelSignals.find((s) => s.aborted)?.reason;
      this.cancelledBy = typeof reason === "string" ? reason : `the gateway cancelled the ${this.init.kind}`;
      handle.cancel(this.cancelledBy);
    };
    const onSuspend = () => handle.suspend();
    suspendSignal?.addEventListener("abort", onSuspend, { once: true });
    if (suspendSignal?.aborted) onSuspend();
    for (const s of cancelSignals) s.addEventListener("abort", onAbort, { once: true });
    if (cancelSignals.some((s) => s.aborted)) onAbort();
    try {
      const outcome = await handle.outcome;
      this.placement = { queuedMs: outcome.queuedMs, moves: outcome.moves };
      if (this.replay && outcome.tape) this.replay.ended = outcome;
      return outcome;
    } finally {
      suspendSignal?.removeEventListener("abort", onSuspend);
      for (const s of cancelSignals) s.removeEventListener("abort", onAbort);
    }
  }

  /** A wait: the store's generation of the snapshot it resumes (the replay record chains segments by it). */
  resumesGeneration = 0;
  /** The store's generation of the suspension the segment ended in, when it is not the next one (checkpoints took some). */
  suspendedAs = 0;

  /** The segment's replay record in the making: its start, and the VM's outcome with its tape. */
  private replay: { start: ReturnType<typeof recordStart>; ended?: TaskOutcome } | undefined;

  /** The segment's replay record as JSON, once its Result is built; "" when it has none (no VM ran, or not recorded). */
  private replayJson(r: ResultInput, telemetry: TelemetryInput, modelJson: string): string {
    const ended = this.replay?.ended;
    if (!this.replay || !ended?.tape) return "";
    return segmentRecordJson(
      this.replay.start,
      ended,
      ended.tape,
      {
        from: this.resumesGeneration,
        ...(this.suspendedAs > this.resumesGeneration + 1 ? { to: this.suspendedAs } : {}),
        config: this.init.config,
        result: { input: r, telemetry, priorOutputs: [...(this.init.priorOutputs ?? [])], modelJson },
      },
      // Sealed under the keys this sidecar seals snapshots with (a rebuild by replay checks it).
      this.init.sealer ? { sealer: this.init.sealer, codeModeRunId: this.init.codeModeRunId, scopeKey: this.init.scopeKey } : undefined,
    );
  }

  /** How the pool placed the segment's VM (for the log): time waiting for a thread, moves between threads. */
  private placement: { queuedMs: number | undefined; moves: number | undefined } = { queuedMs: undefined, moves: undefined };

  /**
   * Commits the cell's session-store writes (it completed or parks): undefined when kept
   * (or none), else why not. A segment that fails calls `discardSession` instead.
   */
  async commitSession(): Promise<{ message: string; unreachable: boolean } | undefined> {
    if (!this.sessionCell?.dirty) return undefined;
    try {
      const refused = await this.sessionCell.commit();
      if (refused) this.log.warn({ refused }, "the session store refused the cell's writes");
      return refused ? { message: refused, unreachable: false } : undefined;
    } catch (err) {
      this.log.warn({ err }, "could not commit the cell's session-store writes");
      return { message: `the session store cannot be reached (${(err as Error).message})`, unreachable: true };
    }
  }

  discardSession(): void {
    this.sessionCell?.discard();
  }

  /** Nested calls made here can no longer reach a VM on this sidecar. */
  endCalls(): void {
    this.init.calls.endAll(this.myCalls);
    this.approvals.stop();
  }

  /** Sends the segment's Result, logs it, and records its trajectory step. */
  finish(r: ResultInput, outputBytes: number, snapshotBytes?: number): void {
    void this.settle(r, outputBytes, snapshotBytes, false);
  }

  /**
   * Like finish, but the trajectory is recorded before the result is sent, so what the
   * orchestrator derives from the step (a Tool Search fallback) is in place when the
   * gateway reads the result.
   */
  finishRecorded(r: ResultInput, outputBytes: number): Promise<void> {
    return this.settle(r, outputBytes, undefined, true);
  }

  private async settle(r: ResultInput, outputBytes: number, snapshotBytes: number | undefined, recordFirst: boolean): Promise<void> {
    const { run, config, scope, parentCallId, codeModeRunId, kind } = this.init;
    this.endCalls();
    const entries = run?.catalog?.entries ?? [];
    const base = run?.counters ?? { search: 0, describe: 0, call: 0 };
    const durationMs = performance.now() - this.t0;
    const telemetry: TelemetryInput = {
      catalogSize: entries.length,
      sources: run?.catalog?.sources ?? sourceBreakdown(entries),
      coreSourceName: config.coreSourceName,
      searchCount: base.search + this.counters.search,
      describeCount: base.describe + this.counters.describe,
      callCount: base.call + this.counters.call,
      modelVisibleTools: kind === "tool_search_code" ? TOOL_SEARCH_VISIBLE : kind === "codemode.run" ? MCP_RUN_VISIBLE : MODEL_VISIBLE,
      durationMs,
      outputBytes,
      ...(snapshotBytes !== undefined ? { snapshotBytes } : {}),
      approvals: this.approvals.log.list(),
      ...(this.sessionCell ? { sessionStore: this.sessionCell.use } : {}),
    };
    const result = buildResult(r, this.outputs, telemetry);
    // Every result names its code-mode run on the wire; the model sees it only when waiting.
    result.codeModeRunId = codeModeRunId;
    if (!recordFirst) this.gate.send({ case: "result", value: result });
    const nested = [...this.myCalls].map((c) => ({
      ...this.approvals.nestedFields(c.callId),
      callId: c.callId,
      toolId: c.toolId,
      toolName: c.toolName,
      outcome: c.outcome ? (c.outcome.ok ? "ok" : "error") : r.status === "waiting" ? "pending" : this.cancelledBy !== undefined ? "cancelled" : "abandoned",
      errorMessage: c.outcome?.errorMessage ?? "",
      startedAtMs: BigInt(c.startedAtMs),
      durationMs: c.outcome?.durationMs ?? 0,
      parentCallId: c.parentCallId,
      ...this.callSources.get(c.callId),
    }));
    this.log.info(
      {
        status: r.status,
        code: r.status === "failed" ? r.code : undefined,
        reason: r.status === "waiting" ? r.reason : undefined,
        // Set when the gateway (or a drain) cancelled the segment: why it ended, whatever its status says.
        cancelledBy: this.cancelledBy,
        snapshotBytes,
        ms: Math.round(durationMs),
        calls: nested.length,
        ...this.placement,
      },
      `${kind} finished`,
    );
    const step = {
      kind,
      callId: parentCallId,
      codeModeRunId,
      // What the gateway saw: a cancelled call got no result, whatever the VM ended with.
      status: this.cancelledBy !== undefined ? "cancelled" : r.status,
      input: replayText(this.inputJson),
      result: replayText(result.modelJson ?? ""),
      errorCode: r.status === "failed" ? (r.code ?? "") : "",
      errorMessage: r.status === "failed" ? r.error.slice(0, 2_000) : "",
      startedAtMs: BigInt(this.startedAt),
      durationMs,
      nestedCalls: nested,
      sessionKeysWritten: this.sessionCell?.use.keysWritten ?? 0,
      sessionBytesWritten: BigInt(this.sessionCell?.use.bytesWritten ?? 0),
    };
    // An earlier call settled here after a person decided: the trajectory says how.
    const resolved = this.resolved.map((r) => ({ ...r, ...this.approvals.resolvedFields(r.callId) }));
    const record = () =>
      this.init.resolver
        .record(
          scope,
          {
            step,
            searchDelta: this.counters.search,
            describeDelta: this.counters.describe,
            callDelta: this.counters.call,
            resolved,
            replayJson: this.replayJson(r, telemetry, result.modelJson ?? ""),
          },
          recordFirst,
        )
        .catch((err: unknown) => this.log.warn({ err }, `could not record the ${kind}'s trajectory`));
    if (recordFirst) {
      if (run?.found) await record();
      this.gate.send({ case: "result", value: result });
    } else if (run?.found) {
      // After the result's bytes left: the socket write is a native immediate, which runs
      // before this one in the same check phase, so encoding and writing the record no
      // longer delays the result. Nothing the gateway sends next is read before it runs.
      setImmediate(record);
    }
  }
}
