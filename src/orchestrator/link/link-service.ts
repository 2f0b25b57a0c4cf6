/**
 * The SidecarLink service: sidecars attach (a standing bidi stream carrying hello and
 * heartbeats, logged as they come and go, and each sidecar's pool health, which decides
 * whether Tool Search's mode code is offered: ./sidecar-pools.ts), resolve a run's config
 * and catalog view (entries are resent only when the view's version changed), and record
 * each exec/wait segment's trajectory and counters (a `record` message on the link, applied
 * in order, or a RecordSegment call when the sidecar's link is down or it needs the answer).
 * A run is read and recorded in the state of the tenant its scope names (../tenants/).
 */
import type { RecordSegmentRequest, SidecarLink } from "../../gen/codemode/orchestrator/v1/link_pb.js";
import type { ServiceHandlers } from "../../protocol/grpc-service.js";
import { parseCodeModeConfig } from "../../shared/config.js";
import { configLayerToWire } from "../../shared/config-wire.js";
import { parseToolSearchConfig } from "../../shared/config.js";
import { mcpRunToWire, parseMcpRunConfig } from "../../shared/mcp-run/config.js";
import type { Logger } from "../../shared/logger.js";
import { ToolSource } from "../../gen/codemode/common/v1/common_pb.js";
import { scopeFromLink, tenantOfScope, DEFAULT_TENANT, type Scope } from "../../shared/scope.js";
import { surfaceOf } from "../control-service.js";
import type { RunRegistry } from "../runs/runs.js";
import type { RunNamespaces } from "../namespaces/run-namespaces.js";
import type { LiveForwarder } from "./live-forward.js";
import { answerToWire } from "../../shared/link-wire.js";
import type { ReplayRecords } from "../replay/replay-records.js";
import type { ReplayCheck } from "../replay/replay-check.js";
import { ServiceError } from "../../protocol/service-error.js";
import type { RunCachePush } from "./run-cache-push.js";
import type { SidecarPools } from "./sidecar-pools.js";
import type { ClaimRelease } from "./claim-release.js";
import type { WaitRelays } from "./wait-relays.js";
import type { LiveRuns } from "./live-runs.js";
import { answerLinkCall, type LinkCallHandlers } from "./link-calls.js";
import type { DrainTracker } from "../../protocol/drain.js";
import { callerRuleToWire } from "../../shared/tool-wire.js";

const SOURCE_ENUM = { openclaw: ToolSource.OPENCLAW, mcp: ToolSource.MCP, client: ToolSource.CLIENT } as const;

export type AttachedSidecar = { sidecarId: string; address: string; peer: string; attachedAtMs: number; lastSeenMs: number };

/** Resolved-run derivations kept (by view version and spec). */
const MAX_DERIVED = 256;

function replayFromWire(r: { text: string; bytes: bigint; sha256: string }) {
  return { text: r.text, bytes: Number(r.bytes), sha256: r.sha256 };
}

export function linkHandlers(deps: {
  /** A tenant's open runs and namespaces (refusing a tenant this orchestrator does not serve). */
  stateOf: (tenant: string) => { runs: RunRegistry; namespaces: RunNamespaces };
  live: LiveForwarder;
  orchestratorId: string;
  log: Logger;
  sidecars: Map<string, AttachedSidecar>;
  cache: RunCachePush;
  pools: SidecarPools;
  /** The service's unary handlers as served (metrics included), for calls sent on a sidecar's Attach stream. */
  calls: () => LinkCallHandlers;
  /** The orchestrator's drain: a call on a stream counts as in flight, as a unary one does. */
  drain?: DrainTracker;
  /**
   * Filled with each attached sidecar's record queue, for a sidecar in this process that
   * hands its records over directly (../../shared/colocated.ts).
   */
  localRecords?: Map<string, (req: RecordSegmentRequest) => void>;
  /** Where code-mode segments' replay records are kept (RecordSegmentRequest.replay_json). */
  replays?: ReplayRecords;
  /** Replays each code-mode run that finishes (`--replay-check`). */
  replayCheck?: ReplayCheck;
  /** Ends the claims of a sidecar whose link ended and that does not come back (./claim-release.ts). */
  claims?: ClaimRelease;
  /** Waits relayed to a sidecar of the run's build (./wait-relays.ts). */
  relays?: WaitRelays;
  /** Code-mode runs each sidecar runs whose gateway knows their id (./live-runs.ts). */
  liveRuns?: LiveRuns;
}): Partial<ServiceHandlers<typeof SidecarLink.method>> {
  const derivedCache = new Map<
    string,
    {
      surface: ReturnType<typeof surfaceOf>;
      config: ReturnType<typeof configLayerToWire>;
      toolSearch: ReturnType<typeof parseToolSearchConfig>;
      mcpRun: ReturnType<typeof mcpRunToWire>;
    }
  >();
  const { log, sidecars, cache } = deps;
  const runsOf = (scope: Scope) => deps.stateOf(tenantOfScope(scope)).runs;
  /** Each attached sidecar's current link (its Attach stream's registration). */
  const links = new Map<string, object>();
  /**
   * A tool_search_code program of the run could not start an isolated runtime: from now
   * on the run's Tool Search surface is mode tools (the seed's fallback), until the
   * gateway opens the run again.
   */
  const fallBackToTools = async (scope: Scope, reason: string) => {
    const runs = runsOf(scope);
    const run = await runs.get(scope);
    if (!run || run.fallbackReason || run.toolSearch?.enabled !== true) return;
    const { counters: _c, ...spec } = run;
    // Only over the spec just read: a gateway's OpenRun or CloseRun meanwhile wins.
    if (!(await runs.replaceSpec(spec, { ...spec, fallbackReason: reason.slice(0, 500) }).catch(cache.failedWrite(scope)))) return;
    await cache.invalidate(scope);
    log.warn({ agentRunId: scope.agentRunId, reason }, "Tool Search falls back from mode code to mode tools for the run");
  };
  /** A finished segment's record (RecordSegment, or a `record` message on a sidecar's link). */
  const applyRecord = async (req: RecordSegmentRequest): Promise<void> => {
    const scope = scopeFromLink(req.scope);
    const s = req.step;
    if (!s) return;
    if (req.sidecarId && s.codeModeRunId) deps.liveRuns?.ended(req.sidecarId, s.codeModeRunId);
    const recorded = runsOf(scope).record(
      scope,
      {
        kind: s.kind,
        callId: s.callId,
        codeModeRunId: s.codeModeRunId,
        status: s.status,
        errorCode: s.errorCode,
        errorMessage: s.errorMessage,
        startedAtMs: Number(s.startedAtMs),
        durationMs: s.durationMs,
        nestedCalls: s.nestedCalls.map(({ approval, approvalReason, approvalRequestedAtMs, approvalDecidedAtMs, ...n }) => ({
          ...n,
          startedAtMs: Number(n.startedAtMs),
          ...(approval
            ? { approval, approvalReason, approvalRequestedAtMs: Number(approvalRequestedAtMs), approvalDecidedAtMs: Number(approvalDecidedAtMs) }
            : {}),
        })),
        ...(s.input ? { input: replayFromWire(s.input) } : {}),
        ...(s.result ? { result: replayFromWire(s.result) } : {}),
        ...(s.sessionKeysWritten > 0 ? { sessionKeysWritten: s.sessionKeysWritten, sessionBytesWritten: Number(s.sessionBytesWritten) } : {}),
      },
      { search: req.searchDelta, describe: req.describeDelta, call: req.callDelta },
      req.resolved.map((n) => ({
        callId: n.callId,
        outcome: n.outcome,
        errorMessage: n.errorMessage,
        deliveredAtMs: Number(n.deliveredAtMs),
        ...(n.approval ? { approval: n.approval, approvalDecidedAtMs: Number(n.approvalDecidedAtMs) } : {}),
      })),
    );
    // A counter write that failed may still land (a store that timed out runs it later): announced all the same.
    const counters = { keepForOutage: true, ...(req.sidecarId ? { exceptSidecar: req.sidecarId } : {}) };
    await recorded.catch(cache.failedWrite(scope, counters));
    if (req.replayJson && s.codeModeRunId) {
      await deps.replays
        ?.append(scope, s.codeModeRunId, req.replayJson)
        .catch((err: unknown) => log.warn({ err, codeModeRunId: s.codeModeRunId }, "could not keep a segment's replay record"));
      if (s.status === "completed" || s.status === "failed") deps.replayCheck?.finished(scope, s.codeModeRunId);
    }
    // Other sidecars' cached counters of the run are now behind: they re-resolve it.
    void cache.invalidate(scope, { ...counters, awaitAcks: false });
    if (s.kind === "tool_search_code" && s.errorCode === "runtime_unavailable")
      await fallBackToTools(scope, s.errorMessage || "the isolated runtime could not start");
  };
  return {
    async attach(stream) {
      /** This link's records, applied one after another in the order they came. */
      let records: Promise<void> = Promise.resolve();
      let id: string | undefined;
      // Set when this sidecar must be disconnected (it did not ack a cache invalidation).
      let kick: (err: Error) => void = () => undefined;
      const kicked = new Promise<never>((_, reject) => (kick = reject));
      kicked.catch(() => undefined);
      // This stream's registration: a sidecar that attached again (its old link not yet seen
      // to close here) is detached only by the link that is current.
      const registration = {};
      /** False once this handler ended (its stream ends with it). */
      let open = true;
      /** Queues a record of this link's sidecar, whether it came on the stream or was handed over in-process. */
      const enqueueRecord = (req: RecordSegmentRequest) => {
        // The link's own identity, whatever the message says.
        if (id) req.sidecarId = id;
        records = records
          .then(() => applyRecord(req))
          .catch((err: unknown) => log.warn({ err, sidecarId: id }, "could not record a segment sent on a sidecar's link"));
      };
      const messages = stream.messages[Symbol.asyncIterator]();
      try {
        for (;;) {
          const next = await Promise.race([messages.next(), kicked]);
          if (next.done) break;
          const msg = next.value;
          if (msg.message.case === "hello") {
            id = msg.message.value.sidecarId;
            const replaced = links.has(id);
            links.set(id, registration);
            deps.localRecords?.set(id, enqueueRecord);
            sidecars.set(id, { sidecarId: id, address: msg.message.value.address, peer: stream.peer, attachedAtMs: Date.now(), lastSeenMs: Date.now() });
            log.info({ sidecarId: id, address: msg.message.value.address, peer: stream.peer, ...(replaced ? { replacedLink: true } : {}) }, "sidecar attached");
            deps.pools.report(id, stream, msg.message.value.pool);
            deps.claims?.attached(id);
            if (msg.message.value.servesRelays)
              deps.relays?.attach(
                id,
                (relay) => stream.send({ message: { case: "relay", value: relay } }),
                (requestId) => stream.send({ message: { case: "buildQuery", value: { requestId } } }),
              );
            stream.send({
              message: {
                case: "welcome",
                value: { orchestratorId: deps.orchestratorId, takesCalls: true, takesCheckpoints: true, takesRelays: deps.relays !== undefined },
              },
            });
            deps.live.attach(id, (requestId, scope, callId, answer) =>
              stream.send({ message: { case: "deliver", value: { requestId, scope, answer: answerToWire(callId, answer) } } }),
            );
            const sidecarId = id;
            cache.attach(sidecarId, {
              send: (m) => stream.send({ message: { case: "invalidate", value: m } }),
              disconnect: (reason) => {
                log.warn({ sidecarId, reason }, "disconnecting a sidecar: its cached runs cannot be trusted");
                kick(new ServiceError("unavailable", `disconnected by the orchestrator: ${reason}`));
              },
            });
          } else if (msg.message.case === "invalidated") {
            if (id) cache.ack(msg.message.value.requestId, id);
          } else if (msg.message.case === "ack") {
            deps.live.ack(msg.message.value.requestId, msg.message.value.delivered);
          } else if (msg.message.case === "record") {
            enqueueRecord(msg.message.value);
          } else if (msg.message.case === "call") {
            // Answered as they complete, not in order: each is a unary call of its own.
            const leave = deps.drain?.enter();
            const ctx = { signal: stream.signal, peer: stream.peer, metadata: stream.metadata };
            void answerLinkCall(msg.message.value, deps.calls(), ctx, log)
              .then((reply) => {
                // A reply after this stream's handler ended has no stream to go on: the sidecar's call failed as unavailable already.
                if (open) stream.send({ message: { case: "reply", value: reply } });
              })
              .catch((err: unknown) => log.warn({ err, sidecarId: id }, "could not send a link call's reply"))
              .finally(leave);
          } else if (msg.message.case === "runLive") {
            const r = msg.message.value;
            if (id && r.codeModeRunId) deps.liveRuns?.started(id, r.codeModeRunId, scopeFromLink(r.scope));
          } else if (msg.message.case === "relay") {
            if (id) deps.relays?.onMessage(id, msg.message.value);
          } else if (msg.message.case === "build") {
            deps.relays?.buildReply(msg.message.value.requestId, msg.message.value.snapshotBuild);
          } else if (msg.message.case === "poolHealth") {
            if (id) deps.pools.report(id, stream, msg.message.value);
          } else if (msg.message.case === "heartbeat") {
            const s = id ? sidecars.get(id) : undefined;
            if (s) s.lastSeenMs = Date.now();
            stream.send({ message: { case: "heartbeat", value: { sentAtMs: BigInt(Date.now()) } } });
          }
        }
      } catch (err) {
        if (err instanceof ServiceError) throw err;
        if (!stream.signal.aborted) log.warn({ err, sidecarId: id }, "sidecar link failed");
      } finally {
        open = false;
        if (id && deps.localRecords?.get(id) === enqueueRecord) deps.localRecords.delete(id);
        if (id && links.get(id) !== registration) {
          deps.pools.detach(id, stream);
          log.info({ sidecarId: id, peer: stream.peer }, "an earlier link of a sidecar ended; its newer link stays attached");
        } else if (id) {
          links.delete(id);
          cache.detach(id);
          sidecars.delete(id);
          deps.pools.detach(id, stream);
          deps.live.detach(id);
          deps.claims?.detached(id);
          deps.relays?.detach(id);
          log.info({ sidecarId: id }, "sidecar detached");
        }
      }
    },
    async resolveRun(req) {
      const scope = scopeFromLink(req.scope);
      const tenant = tenantOfScope(scope);
      const { runs, namespaces } = deps.stateOf(tenant);
      // Noted before the run is read: a change from now on is pushed to this sidecar, which
      // discards this answer if the push overtakes it.
      const cacheable = cache.cacheable && cache.isAttached(req.sidecarId);
      if (cacheable) cache.resolved(req.sidecarId, scope);
      const run = await runs.get(scope);
      if (!run) return { found: false };
      const ns = await namespaces.forRun(run);
      // Every exec resolves its run: what follows from the run's spec alone is computed once.
      const key = JSON.stringify([
        ns.version,
        run.config,
        run.disableTools,
        run.toolSearch ?? null,
        run.fallbackReason ?? "",
        run.catalogToolCount ?? -1,
        run.mcpRun ?? null,
      ]);
      let derived = derivedCache.get(key);
      if (!derived) {
        derived = {
          surface: surfaceOf(run, ns),
          config: configLayerToWire(parseCodeModeConfig(run.config)),
          toolSearch: parseToolSearchConfig(run.toolSearch),
          mcpRun: mcpRunToWire(parseMcpRunConfig(run.mcpRun)),
        };
        derivedCache.set(key, derived);
        if (derivedCache.size > MAX_DERIVED) derivedCache.delete(derivedCache.keys().next().value!);
      }
      const { surface } = derived;
      const include = req.knownCatalogVersion !== ns.version;
      return {
        found: true,
        cacheable,
        config: derived.config,
        catalogVersion: ns.version,
        entriesIncluded: include,
        entries: include ? run.view.map((e) => ({ ...e, source: SOURCE_ENUM[e.source], allowedCallers: callerRuleToWire(e.allowedCallers) })) : [],
        mcpServers: include ? (run.mcpServers ?? []) : [],
        namespaces: include ? ns.visible.map((n) => ({ id: n.id, pluginId: n.pluginId, globalName: n.globalName, scopeJson: n.scopeJson })) : [],
        searchCount: run.counters.search,
        describeCount: run.counters.describe,
        callCount: run.counters.call,
        codeModeActive: surface.codeModeActive,
        inactiveReason: surface.inactiveReason,
        surface: surface.kind,
        toolSearch: derived.toolSearch,
        mcpRun: derived.mcpRun,
        tenant: tenant === DEFAULT_TENANT ? "" : tenant,
      };
    },
    async recordSegment(req) {
      await applyRecord(req);
      return {};
    },
    // A run suspended by another build, rebuilt by a sidecar of this one (docs/replay.md#upgrades).
    async replayRecord(req) {
      const scope = scopeFromLink(req.scope);
      return { segments: deps.replays ? await deps.replays.segments(scope, req.codeModeRunId) : [] };
    },
  };
}
