/**
 * The run registry: each open run's scope, catalog view, policy and config, its
 * cumulative search/describe/call counters, and its trajectory (model calls with the
 * nested calls made under them). Keyed by the full scope, so two runs never share a
 * view even when their run ids collide across agents or sessions. A run stays until
 * its gateway closes it (CloseRun); nothing expires it. Two registries: in memory (below,
 * the default) and Redis (./redis-runs.ts), shared by replicas.
 */
import type { CodeModeConfigInput, ToolSearchConfigInput } from "../../shared/config.js";
import type { McpRunLayer } from "../../shared/mcp-run/config.js";
import { scopeKeyOf, type Scope } from "../../shared/scope.js";
import type { ViewEntry, ViewServer } from "../catalog/catalog-view.js";
import type { PolicyRules } from "../catalog/policy.js";

export type { Scope };

export type TrajectoryNested = {
  callId: string;
  toolId: string;
  toolName: string;
  outcome: string;
  errorMessage: string;
  startedAtMs: number;
  durationMs: number;
  parentCallId: string;
  /** ToolSource of the called tool, and its owner (absent in steps recorded by older builds). */
  source?: number;
  sourceName?: string;
  /** Answered while the run was suspended; delivered by a later wait. */
  answeredWhileSuspended?: boolean;
  /** The call awaited a person's approval: its decision so far, reason, and when it was asked and decided (absent when it never did). */
  approval?: string;
  approvalReason?: string;
  approvalRequestedAtMs?: number;
  approvalDecidedAtMs?: number;
};

/** A text kept for replay: whole up to 64 KiB, else only its size and hash. */
export type ReplayText = { text: string; bytes: number; sha256: string };

/** How a later segment settles a call an earlier one made (answered while suspended). */
export type ResolvedCall = { callId: string; outcome: string; errorMessage: string; deliveredAtMs: number; approval?: string; approvalDecidedAtMs?: number };

/**
 * Applies resolved calls to the newest steps that still list them as pending: the
 * trajectory then shows the answer a suspended run received, not "pending" forever.
 */
export function applyResolved(steps: TrajectoryStepRecord[], resolved: readonly ResolvedCall[]): void {
  for (const r of resolved) {
    for (let i = steps.length - 1; i >= 0; i--) {
      const n = steps[i]!.nestedCalls.find((c) => c.callId === r.callId);
      if (!n) continue;
      if (n.outcome === "pending") {
        Object.assign(n, {
          outcome: r.outcome,
          errorMessage: r.errorMessage,
          durationMs: Math.max(0, r.deliveredAtMs - n.startedAtMs),
          answeredWhileSuspended: true,
          ...(r.approval ? { approval: r.approval, approvalDecidedAtMs: r.approvalDecidedAtMs ?? r.deliveredAtMs } : {}),
        });
      }
      break;
    }
  }
}

export type TrajectoryStepRecord = {
  kind: string;
  callId: string;
  codeModeRunId: string;
  status: string;
  errorCode: string;
  startedAtMs: number;
  durationMs: number;
  nestedCalls: TrajectoryNested[];
  /** The failure's message (absent in steps recorded by older builds). */
  errorMessage?: string;
  /** The model's input and the result it was given, for replay. */
  input?: ReplayText;
  result?: ReplayText;
  /** Session-store keys and bytes the segment committed (absent when none). */
  sessionKeysWritten?: number;
  sessionBytesWritten?: number;
};

export type Counters = { search: number; describe: number; call: number };

/** What OpenRun sets; a re-open replaces it and keeps the run's counters and trajectory. */
export type RunSpec = {
  scope: Scope;
  catalogId: string;
  rules: PolicyRules;
  config: CodeModeConfigInput;
  disableTools: boolean;
  view: ViewEntry[];
  /** MCP servers with something visible to the run (absent in runs stored by older builds). */
  mcpServers?: ViewServer[];
  /** Tools in the catalog before policy (absent in runs stored by older builds). */
  catalogToolCount?: number;
  viewVersion: string;
  openedAtMs: number;
  /** The Tool Search config layer from OpenRun (absent: Tool Search off). */
  toolSearch?: Partial<ToolSearchConfigInput>;
  /** The Code Mode for MCP config layer from OpenRun (absent: off). */
  mcpRun?: McpRunLayer;
  /**
   * Set when a tool_search_code program of this run could not start an isolated
   * runtime: the run's Tool Search mode code falls back to mode tools (the seed's rule).
   */
  fallbackReason?: string;
};

export type OpenRun = RunSpec & { counters: Counters };

/** Trajectory steps a run shows; older ones are dropped (the memory registry keeps up to STEPS_SLACK more, unseen). */
export const MAX_STEPS = 1000;
/**
 * The memory registry lets a run's steps grow this far past MAX_STEPS before it drops the
 * oldest, in one cut: a cut per step moved the whole kept array on every exec of a run past
 * MAX_STEPS. Readers see the last MAX_STEPS only.
 */
const STEPS_SLACK = 250;

export interface RunRegistry {
  /** Opens a run, or re-opens it with a new spec keeping its counters and trajectory. */
  open(spec: RunSpec): Promise<void>;
  /** The open run with its counters (not its trajectory). */
  get(scope: Scope): Promise<OpenRun | undefined>;
  /** The open run's trajectory, oldest step first; undefined when no run is open. */
  trajectory(scope: Scope): Promise<TrajectoryStepRecord[] | undefined>;
  /**
   * Adds a segment's step and counter deltas to the open run, and settles calls of earlier
   * steps the segment resolved; nothing when no run is open.
   */
  record(scope: Scope, step: TrajectoryStepRecord, deltas: Counters, resolved?: readonly ResolvedCall[]): Promise<void>;
  /**
   * Adds `step` to the open run's trajectory only when the run's `state` (absent reads as
   * "") changes to `value`, and sets it: a state the trajectory notes once per change (the
   * pool-health fallback). False when the state had that value or no run is open. Kept
   * with the trajectory, so a re-open does not reset it.
   */
  recordChange(scope: Scope, state: string, value: string, step: TrajectoryStepRecord): Promise<boolean>;
  /**
   * Sets the open run's spec to `next` only while it is still `current` (the spec `get`
   * returned, counters left out): a re-open or a close that came in between wins, and the
   * run is neither reverted to an older spec nor opened again. False when nothing changed.
   */
  replaceSpec(current: RunSpec, next: RunSpec): Promise<boolean>;
  /** Forgets the run; false when none was open. */
  close(scope: Scope): Promise<boolean>;
}

type MemoryRun = { spec: RunSpec; counters: Counters; trajectory: TrajectoryStepRecord[]; states: Map<string, string> };

export class MemoryRunRegistry implements RunRegistry {
  private readonly runs = new Map<string, MemoryRun>();

  async open(spec: RunSpec): Promise<void> {
    const key = scopeKeyOf(spec.scope);
    const previous = this.runs.get(key);
    this.runs.set(key, {
      spec,
      counters: previous?.counters ?? { search: 0, describe: 0, call: 0 },
      trajectory: previous?.trajectory ?? [],
      states: previous?.states ?? new Map(),
    });
  }

  async get(scope: Scope): Promise<OpenRun | undefined> {
    const run = this.runs.get(scopeKeyOf(scope));
    return run && { ...run.spec, counters: { ...run.counters } };
  }

  async replaceSpec(current: RunSpec, next: RunSpec): Promise<boolean> {
    const run = this.runs.get(scopeKeyOf(current.scope));
    if (!run || JSON.stringify(run.spec) !== JSON.stringify(current)) return false;
    run.spec = next;
    return true;
  }

  async trajectory(scope: Scope): Promise<TrajectoryStepRecord[] | undefined> {
    return this.runs.get(scopeKeyOf(scope))?.trajectory.slice(-MAX_STEPS);
  }

  async record(scope: Scope, step: TrajectoryStepRecord, deltas: Counters, resolved: readonly ResolvedCall[] = []): Promise<void> {
    const run = this.runs.get(scopeKeyOf(scope));
    if (!run) return;
    applyResolved(run.trajectory, resolved);
    run.counters.search += deltas.search;
    run.counters.describe += deltas.describe;
    run.counters.call += deltas.call;
    this.push(run, step);
  }

  async recordChange(scope: Scope, state: string, value: string, step: TrajectoryStepRecord): Promise<boolean> {
    const run = this.runs.get(scopeKeyOf(scope));
    if (!run || (run.states.get(state) ?? "") === value) return false;
    run.states.set(state, value);
    this.push(run, step);
    return true;
  }

  private push(run: MemoryRun, step: TrajectoryStepRecord): void {
    run.trajectory.push(step);
    if (run.trajectory.length > MAX_STEPS + STEPS_SLACK) run.trajectory.splice(0, run.trajectory.length - MAX_STEPS);
  }

  async close(scope: Scope): Promise<boolean> {
    return this.runs.delete(scopeKeyOf(scope));
  }
}
