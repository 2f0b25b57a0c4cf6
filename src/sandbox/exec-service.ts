/**
 * The Sandbox service: Exec runs a cell on the pool and streams what happens (nested tool
 * calls, output, then exactly one Result); Wait continues a suspended run (see
 * ./suspend/resume.ts; or, for a run of another build, a sidecar of that build does:
 * ./suspend/wait-relay.ts); BridgeCallback takes a gateway's answer to a nested call
 * (./exec/bridge-callback.ts). Guest failures are
 * results; only contract violations (missing scope, oversize ids, a scope with no open run,
 * unknown call, malformed JSON) are gRPC errors.
 *
 * Drain: once the process is stopping, a new Exec is refused (UNAVAILABLE) while Wait and
 * BridgeCallback keep being served, so runs in flight can finish; when the drain budget
 * runs out, `cancelInFlight` ends what is still running. Every scope is the caller's
 * tenant's (its token's, ../shared/tenants.ts), whatever the request says (./link/tenant-link.ts).
 */
import type { Sandbox } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { DrainTracker } from "../protocol/drain.js";
import type { ServiceHandlers } from "../protocol/grpc-service.js";
import { ServiceError } from "../protocol/service-error.js";
import { ConfigError, parseCodeModeConfig, runConfig, type CodeModeConfig } from "../shared/config.js";
import { configLayerFromWire } from "../shared/config-wire.js";
import { newId } from "../shared/ids.js";
import { INACTIVE_PREFIX, RUN_MESSAGES } from "../shared/link-wire.js";
import type { Logger } from "../shared/logger.js";
import { checkIdLength } from "../shared/request-limits.js";
import { DEFAULT_TENANT, NO_OPEN_RUN, requireScope, scopeFromLink, scopeKeyOf, tenantOfScope, withTenant } from "../shared/scope.js";
import type { RunScope } from "../gen/codemode/common/v1/common_pb.js";
import type { CallContext } from "../protocol/grpc-service.js";
import { TenantLinks } from "./link/tenant-link.js";
import type { TenantQuotas } from "./exec/tenant-quotas.js";
import type { CallRegistry } from "./exec/call-registry.js";
import { checkExecInput } from "./program/exec-input.js";
import { EMPTY_GUEST_CATALOG } from "./pool/task-protocol.js";
import type { OrchestratorLink } from "./link/orchestrator-link.js";
import type { SandboxPool } from "./pool/pool.js";
import { serveWait } from "./suspend/resume.js";
import type { ResolvedRun, RunResolver } from "./link/run-resolver.js";
import { Segment, unreachable, type ExecEventInit, type Scope, type SegmentInit } from "./exec/segment.js";
import { AwaitResults } from "./exec/await-results.js";
import type { SnapshotSealer } from "./suspend/snapshot-seal.js";
import { endSegment, limitsOf, type SuspendContext } from "./suspend/suspension.js";
import { Checkpoints } from "./suspend/checkpoints.js";
import { tenantOf } from "./pool/cpu-budget.js";
import { execToolSearchCode, toolSearchHandlers } from "./tool-search-service.js";
import { withRetries } from "./link/retry.js";
import { DrainSignals } from "./exec/drain-signals.js";
import { WaitRelayHub } from "./suspend/wait-relay.js";
import { bridgeCallbackHandler } from "./exec/bridge-callback.js";
import { Metadata } from "@grpc/grpc-js";

const NOT_COUNTED = () => undefined;

/** A resumed VM's checkpoints: answers come through the wait's own poll. */
const checkpoints = (seg: Segment, ctx: SuspendContext) => new Checkpoints(seg, ctx, false);

/** What a new Exec on a draining sidecar is told (UNAVAILABLE: the gateway retries elsewhere). */
export const DRAINING = "this sidecar is draining (shutting down); send the exec to another sidecar";

export type ExecServiceDeps = {
  pool: SandboxPool;
  resolver: RunResolver;
  calls: CallRegistry;
  link: OrchestratorLink;
  sealer: SnapshotSealer;
  log: Logger;
  drain: DrainTracker;
  /** The tenants' quotas on this sidecar; none limited when absent. */
  quotas?: TenantQuotas;
};

export type SandboxService = {
  handlers: Partial<ServiceHandlers<typeof Sandbox.method>>;
  /** Ends every exec and wait still running here: the drain budget ran out. */
  cancelInFlight(reason: string): void;
  /** Asks every exec and wait in flight to suspend its VM into the store at its next idle moment. */
  suspendInFlight(): void;
};

/** The run context internal namespaces may reference (`{"$context": "runId"}` and so on). */
function runContextJson(scope: Scope, config: CodeModeConfig): string {
  return JSON.stringify({ agentId: scope.agentId, sessionId: scope.sessionId, sessionKey: scope.sessionKey, runId: scope.agentRunId, config });
}

export function createSandboxService(deps: ExecServiceDeps): SandboxService {
  const { pool, resolver, calls, link, sealer, log, drain } = deps;
  /** The link as each tenant's segments use it. */
  const links = new TenantLinks(link);
  /** The request's scope, as the caller's tenant's. */
  const scopeOf = (s: RunScope | undefined, ctx: CallContext | undefined) => withTenant(requireScope(s), ctx?.tenant ?? DEFAULT_TENANT);
  /**
   * Admits an exec (`starts`) or a wait under its tenant's quotas, or throws; the returned
   * release ends its count, at the latest when its gateway cancels it (it no longer waits).
   */
  const admit = (scope: Scope, starts: boolean, signal: AbortSignal): (() => void) => {
    const release = deps.quotas?.admit(tenantOfScope(scope), starts);
    if (!release) return NOT_COUNTED;
    signal.addEventListener("abort", release, { once: true });
    return () => {
      signal.removeEventListener("abort", release);
      release();
    };
  };
  /**
   * For the execs and waits in flight: `suspend` asks their VMs to suspend when idle (the
   * drain budget ran out: the runs go to the store as waiting), `cancel` ends them (what
   * did not suspend in time).
   */
  const inFlight = new DrainSignals();
  /**
   * Execs in flight per agent run (scope key). One run may hold at most half of the pool's
   * slots, so CPU-bound guests of one run cannot starve every other run of the sidecar.
   */
  const perRun = new Map<string, number>();
  const maxPerRun = Math.max(1, Math.floor(pool.slots / 2));
  const tracked = (body: (drainSignal: AbortSignal, suspendSignal: AbortSignal) => Promise<void>): Promise<void> => body(inFlight.cancel, inFlight.suspend);

  /** Resolves the run; `run` is undefined when the orchestrator (or its store) cannot be reached, and `unreachable` says which. */
  const resolve = async (scope: Scope, rlog: Logger): Promise<{ run: ResolvedRun | undefined; unreachable: string }> => {
    try {
      // A replica that just died: the retry reaches another one through the same address.
      const run = await withRetries(
        () => resolver.resolve(scope),
        (err) => err instanceof ServiceError && err.code === "unavailable",
      );
      return { run, unreachable: "" };
    } catch (err) {
      rlog.warn({ err }, "could not resolve run with the orchestrator");
      return { run: undefined, unreachable: unreachable(err) };
    }
  };

  /** What every segment served here shares; the caller adds the config. */
  const segmentInit = (
    kind: SegmentInit["kind"],
    scope: Scope,
    parentCallId: string,
    codeModeRunId: string,
    run: ResolvedRun | undefined,
    send: SegmentInit["send"],
    rlog: Logger,
  ): Omit<SegmentInit, "config"> => ({
    kind,
    scope,
    scopeKey: scopeKeyOf(scope),
    parentCallId,
    codeModeRunId,
    run,
    send,
    log: rlog,
    pool,
    calls,
    resolver,
    sealer,
    sessions: links.of(tenantOfScope(scope)).rpc,
  });

  /**
   * A gateway's Wait, or (`relayed`) one a sidecar of another build relayed here for this
   * build to restore (./suspend/wait-relay.ts): it claims with its origin's claim token and
   * relays no further.
   */
  const serveWaitCall = async (
    req: { scope?: RunScope | undefined; waitCallId: string; codeModeRunId: string },
    stream: { send(m: { event: ExecEventInit }): void; signal: AbortSignal },
    ctx: CallContext,
    relayed?: { claimToken: string; handBack: AbortSignal },
  ): Promise<void> => {
    const scope = scopeOf(req.scope, ctx);
    checkIdLength("wait_call_id", req.waitCallId);
    checkIdLength("code_mode_run_id", req.codeModeRunId);
    const waitCallId = req.waitCallId || newId("wait", 8);
    const codeModeRunId = req.codeModeRunId.trim();
    const rlog = log.child({ agentRunId: scope.agentRunId, codeModeRunId, waitCallId });
    const admitted = admit(scope, false, stream.signal);
    await tracked(async (drainSignal, suspendSignal) => {
      const { run, unreachable: why } = await resolve(scope, rlog);
      if (run && !run.found) throw new ServiceError("failed_precondition", NO_OPEN_RUN);
      const init = segmentInit("wait", scope, waitCallId, codeModeRunId, run, (event) => stream.send({ event }), rlog);
      const segment = (config: CodeModeConfig) => new Segment({ ...init, config });
      if (run === undefined) return segment(parseCodeModeConfig()).finish({ status: "failed", error: why, code: "runtime_unavailable" }, 0);
      if (!codeModeRunId) {
        return segment(runConfig(run.configLayer)).finish({ status: "failed", error: RUN_MESSAGES.missingRunId, code: "invalid_input" }, 0);
      }
      // A pool that cannot run code (./pool/unavailable-pool.ts) must not claim the run: it stays for a sidecar that can resume it.
      const health = link.poolHealth;
      if (!health.canRunCode) {
        return segment(runConfig(run.configLayer)).finish(
          {
            status: "failed",
            error: `this sidecar cannot resume code mode runs (${health.reason}); the run is kept for a sidecar that can.`,
            code: "runtime_unavailable",
          },
          0,
        );
      }
      await serveWait(
        codeModeRunId,
        {
          link: links.of(tenantOfScope(scope)),
          sealer,
          log: rlog,
          segment,
          init,
          run,
          drainSignal,
          suspendSignal,
          checkpoints,
          ...(relayed
            ? { claimToken: relayed.claimToken, handBack: relayed.handBack }
            : {
                relay: (build: Uint8Array, claimToken: string) =>
                  relays.relay(
                    { snapshotBuild: build, scope, waitCallId, codeModeRunId, claimToken },
                    (e) => stream.send(e as { event: ExecEventInit }),
                    stream.signal,
                  ),
              }),
        },
        stream.signal,
      );
    }).finally(admitted);
  };

  // Waits relayed here by a sidecar of another build: the scope's tenant came over the link.
  const relays = new WaitRelayHub(
    link,
    (open, send, { cancel, handBack }) =>
      serveWaitCall(
        open,
        { send: (m) => send(m.event), signal: cancel },
        { signal: cancel, peer: "relay", metadata: new Metadata(), tenant: tenantOfScope(scopeFromLink(open.scope)) },
        { claimToken: open.claimToken, handBack },
      ),
    log,
  );

  const handlers: SandboxService["handlers"] = {
    async exec(req, stream, ctx) {
      if (drain.draining) throw new ServiceError("unavailable", DRAINING);
      const scope = scopeOf(req.scope, ctx);
      const tlink = links.of(tenantOfScope(scope));
      checkIdLength("exec_call_id", req.execCallId);
      const scopeKey = scopeKeyOf(scope);
      const execCallId = req.execCallId || newId("exec", 8);
      const codeModeRunId = newId("cm");
      const rlog = log.child({ agentRunId: scope.agentRunId, codeModeRunId, execCallId });
      // The tenant's quotas on this sidecar: refused before anything runs (./exec/tenant-quotas.ts).
      const admitted = admit(scope, true, stream.signal);
      await tracked(async (drainSignal, suspendSignal) => {
        const { run, unreachable: why } = await resolve(scope, rlog);
        if (run && !run.found) throw new ServiceError("failed_precondition", NO_OPEN_RUN);
        let config: CodeModeConfig;
        try {
          config = runConfig(run?.configLayer, configLayerFromWire(req.config));
        } catch (err) {
          if (err instanceof ConfigError) throw new ServiceError("invalid_argument", `config: ${err.message}`);
          throw err;
        }
        // Tool Search, mode code: the program runs on the reduced `openclaw.tools` surface.
        if (run?.surface === "tool_search_code") {
          return execToolSearchCode(
            segmentInit("exec", scope, execCallId, codeModeRunId, run, (event) => stream.send({ event }), rlog),
            config,
            req,
            [stream.signal, drainSignal],
          );
        }
        // Code Mode for MCP: the program is a `codemode.run` script (ES module, @codemode/* imports).
        if (run?.surface === "mcp_run") {
          // Loaded on the first codemode.run exec (ajv, acorn: off the sidecar's start path).
          const { execMcpRun } = await import("./surfaces/mcp-run/run-service.js");
          return execMcpRun(
            segmentInit("exec", scope, execCallId, codeModeRunId, run, (event) => stream.send({ event }), rlog),
            config,
            req,
            [stream.signal, drainSignal],
          );
        }
        // awaitResults: a program parked on pending calls does not end the exec (./exec/await-results.ts).
        const awaiting =
          (req.awaitResults ?? config.awaitResults)
            ? new AwaitResults(config.maxAwaitMs, (event) => stream.send({ event }), [stream.signal, drainSignal])
            : undefined;
        const toGateway = awaiting ? awaiting.send : (event: ExecEventInit) => stream.send({ event });
        // The gateway learns the run's id with its first nested call: from then on the
        // orchestrator knows the run lives here, and a wait after this sidecar died says it was lost.
        let announced = false;
        const send = (event: ExecEventInit) => {
          if (!announced && event.case === "toolCall") {
            announced = true;
            tlink.announceRun(scope, codeModeRunId);
          }
          toGateway(event);
        };
        const seg = new Segment({ ...segmentInit("exec", scope, execCallId, codeModeRunId, run, send, rlog), config });
        seg.recordInput({
          ...(req.code !== undefined ? { code: req.code } : {}),
          ...(req.command !== undefined ? { command: req.command } : {}),
          ...(req.language !== undefined ? { language: req.language } : {}),
        });
        if (run === undefined) return seg.finish({ status: "failed", error: why, code: "runtime_unavailable" }, 0);
        if (!config.enabled) return seg.finish({ status: "failed", error: RUN_MESSAGES.disabled, code: "invalid_input" }, 0);
        if (!run.active) return seg.finish({ status: "failed", error: `${INACTIVE_PREFIX}${run.inactiveReason}.`, code: "invalid_input" }, 0);
        const input = checkExecInput({ code: req.code, command: req.command, language: req.language }, config.languages);
        if (!input.ok) return seg.finish({ status: "failed", error: input.error, code: "invalid_input" }, 0);
        if ((perRun.get(scopeKey) ?? 0) >= maxPerRun) {
          throw new ServiceError(
            "resource_exhausted",
            `this agent run already has ${maxPerRun} execs in flight on this sidecar, its fair share; wait for one to finish`,
          );
        }
        // A full queue, or a session over its share of the queue or of the CPU, is refused at once.
        const refused = pool.refusal(tenantOf(scope));
        if (refused) throw new ServiceError("resource_exhausted", refused);
        perRun.set(scopeKey, (perRun.get(scopeKey) ?? 0) + 1);
        // A cancelled exec stops counting at once: its gateway no longer waits for it.
        let counted = true;
        const release = () => {
          if (!counted) return;
          counted = false;
          const n = (perRun.get(scopeKey) ?? 1) - 1;
          if (n > 0) perRun.set(scopeKey, n);
          else perRun.delete(scopeKey);
        };
        stream.signal.addEventListener("abort", release, { once: true });
        const ctx: SuspendContext = {
          scope,
          scopeKey,
          codeModeRunId,
          execCallId,
          config,
          catalogVersion: run.catalog?.version ?? "",
          link: tlink,
          sealer,
          signal: stream.signal,
        };
        // A VM idle on tool answers is checkpointed, so another sidecar can resume it if this one dies.
        // An older orchestrator stores none (its welcome says so): the VM then waits on as before.
        const checkpointing = link.takesCheckpoints;
        if (checkpointing) seg.checkpoints = new Checkpoints(seg, ctx, true);
        let outcome;
        try {
          outcome = await seg.run(
            {
              kind: "exec",
              source: input.code,
              language: input.language,
              limits: limitsOf(config, checkpointing),
              catalog: run.catalog?.guest ?? EMPTY_GUEST_CATALOG,
              contextJson: run.catalog?.guest.needsContext ? runContextJson(scope, config) : "null",
              outputBytesUsed: 0,
              ...(config.sessionStore ? {} : { sessionStore: false as const }),
            },
            [stream.signal, drainSignal],
            suspendSignal,
          );
        } finally {
          stream.signal.removeEventListener("abort", release);
          release();
        }
        await endSegment(seg, outcome, ctx);
        if (!awaiting) return;
        awaiting.budget.usedMs += outcome.cpuMs ?? 0;
        awaiting.outputs = seg.outputs;
        // Each resume is a wait of this exec's own run, served here, under the exec's call id.
        const init = segmentInit("wait", scope, execCallId, codeModeRunId, run, send, rlog);
        await awaiting.drive(async (untilMs) => {
          let last: Segment | undefined;
          const segment = (c: CodeModeConfig) => (last = new Segment({ ...init, config: c, priorOutputs: awaiting.outputs }));
          await serveWait(
            codeModeRunId,
            { link: tlink, sealer, log: rlog, segment, init, run, drainSignal, suspendSignal, awaiting: { untilMs, budget: awaiting.budget }, checkpoints },
            stream.signal,
          );
          if (last) awaiting.outputs = last.outputs;
        });
      }).finally(admitted);
    },

    // Served while draining too: a model's wait continues a run that already exists.
    wait: (req, stream, ctx) => serveWaitCall(req, stream, ctx),

    // Tool Search, mode tools (tool_search, tool_describe, tool_call): no VM.
    ...toolSearchHandlers({ resolver, calls, log, tracked, scopeOf }),

    // Served while draining too: answers let the runs in flight finish.
    bridgeCallback: bridgeCallbackHandler({ calls, link, log, scopeOf }),
  };

  return {
    handlers,
    cancelInFlight(reason) {
      inFlight.cancelAll(reason);
    },
    suspendInFlight() {
      inFlight.suspendAll();
    },
  };
}
