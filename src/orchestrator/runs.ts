/**
 * The run registry: each open run's scope, catalog view, policy and config, its
 * cumulative search/describe/call counters, and its trajectory (model calls with the
 * nested calls made under them). Keyed by the full scope, so two runs never share a
 * view even when their run ids collide across agents or sessions.
 */
import type { CodeModeConfigInput } from "../shared/config.js";
import type { ViewEntry } from "./catalog/catalog-view.js";
import type { PolicyRules } from "./catalog/policy.js";

export type ScopeKey = string;
export type Scope = { agentId: string; sessionId: string; sessionKey: string; runId: string };

export function scopeKey(s: Scope): ScopeKey {
  return JSON.stringify([s.agentId, s.sessionId, s.sessionKey, s.runId]);
}

export type TrajectoryNested = {
  callId: string;
  toolId: string;
  toolName: string;
  outcome: string;
  errorMessage: string;
  startedAtMs: number;
  durationMs: number;
  parentCallId: string;
};

export type TrajectoryStepRecord = {
  kind: string;
  callId: string;
  codeModeRunId: string;
  status: string;
  errorCode: string;
  startedAtMs: number;
  durationMs: number;
  nestedCalls: TrajectoryNested[];
};

export type OpenRun = {
  scope: Scope;
  catalogId: string;
  rules: PolicyRules;
  config: CodeModeConfigInput;
  disableTools: boolean;
  view: ViewEntry[];
  viewVersion: string;
  counters: { search: number; describe: number; call: number };
  trajectory: TrajectoryStepRecord[];
  openedAtMs: number;
};

/** Trajectory steps kept per run; the oldest are dropped past this. */
const MAX_STEPS = 1000;

export class RunRegistry {
  private readonly runs = new Map<ScopeKey, OpenRun>();

  open(run: OpenRun): void {
    this.runs.set(scopeKey(run.scope), run);
  }

  get(scope: Scope): OpenRun | undefined {
    return this.runs.get(scopeKey(scope));
  }

  close(scope: Scope): boolean {
    return this.runs.delete(scopeKey(scope));
  }

  record(scope: Scope, step: TrajectoryStepRecord, deltas: { search: number; describe: number; call: number }): void {
    const run = this.get(scope);
    if (!run) return;
    run.counters.search += deltas.search;
    run.counters.describe += deltas.describe;
    run.counters.call += deltas.call;
    run.trajectory.push(step);
    if (run.trajectory.length > MAX_STEPS) run.trajectory.splice(0, run.trajectory.length - MAX_STEPS);
  }

  get size(): number {
    return this.runs.size;
  }
}
