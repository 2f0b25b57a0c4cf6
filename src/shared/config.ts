/**
 * The code-mode config (the seed's `tools.codeMode`): one zod schema declares every
 * default and clamp, and `parseCodeModeConfig` is the only place config is parsed.
 * Numbers outside a range are clamped, as the seed specifies; values of the wrong type
 * are refused with an error that names the key and the bad value.
 */
import { z } from "zod";
import { LIMITS } from "./limits.js";

export const LANGUAGES = ["javascript", "typescript"] as const;
export type Language = (typeof LANGUAGES)[number];
export const APPROVAL_MODES = ["pause", "error"] as const;

export { LIMITS };

type Limit = { readonly default: number; readonly min: number; readonly max: number };

const clamped = <T extends Record<string, Limit>>(key: keyof T & string, table: T = LIMITS as unknown as T) => {
  const { default: dflt, min, max } = table[key]!;
  return z
    .number({ error: (issue) => `${key} must be a number, got ${describe(issue.input)}` })
    .finite({ error: `${key} must be finite` })
    .transform((n) => Math.min(max, Math.max(min, Math.trunc(n))))
    .default(dflt);
};

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (value === undefined) return "undefined";
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

const schema = z
  .object({
    enabled: z.boolean({ error: (i) => `enabled must be a boolean, got ${describe(i.input)}` }).default(true),
    runtime: z.literal("quickjs-wasi", { error: (i) => `runtime must be "quickjs-wasi", got ${describe(i.input)}` }).default("quickjs-wasi"),
    mode: z.literal("only", { error: (i) => `mode must be "only", got ${describe(i.input)}` }).default("only"),
    languages: z
      .array(z.enum(LANGUAGES, { error: (i) => `languages may contain only "javascript" and "typescript", got ${describe(i.input)}` }))
      .min(1, { error: "languages must name at least one language" })
      .transform((list) => LANGUAGES.filter((l) => list.includes(l)))
      .default([...LANGUAGES]),
    timeoutMs: clamped("timeoutMs"),
    memoryLimitBytes: clamped("memoryLimitBytes"),
    maxOutputBytes: clamped("maxOutputBytes"),
    maxSnapshotBytes: clamped("maxSnapshotBytes"),
    maxPendingToolCalls: clamped("maxPendingToolCalls"),
    snapshotTtlSeconds: clamped("snapshotTtlSeconds"),
    searchDefaultLimit: clamped("searchDefaultLimit"),
    maxSearchLimit: clamped("maxSearchLimit"),
    /** Beyond the seed: total nested calls, and searches plus describes, per agent run. */
    maxToolCallsPerRun: clamped("maxToolCallsPerRun"),
    maxSearchesPerRun: clamped("maxSearchesPerRun"),
    /** Beyond the seed: how long a call may wait for a person's approval, and what an approval-pending answer does. */
    approvalTimeoutMs: clamped("approvalTimeoutMs"),
    approvalMode: z.enum(APPROVAL_MODES, { error: (i) => `approvalMode must be "pause" or "error", got ${describe(i.input)}` }).default("pause"),
    /** Beyond the seed: code mode's session store (`store` / `load`), and its limits. */
    sessionStore: z.boolean({ error: (i) => `sessionStore must be a boolean, got ${describe(i.input)}` }).default(true),
    maxSessionValueBytes: clamped("maxSessionValueBytes"),
    maxSessionKeys: clamped("maxSessionKeys"),
    maxSessionBytes: clamped("maxSessionBytes"),
    sessionTtlSeconds: clamped("sessionTtlSeconds"),
    /** Beyond the seed: execs stay open while their program is parked (ExecRequest.await_results), up to maxAwaitMs. */
    awaitResults: z.boolean({ error: (i) => `awaitResults must be a boolean, got ${describe(i.input)}` }).default(false),
    maxAwaitMs: clamped("maxAwaitMs"),
    /** Beyond the seed: each exec and wait segment keeps what it consumed, for Control.ReplayRun (docs/replay.md). */
    recordForReplay: z.boolean({ error: (i) => `recordForReplay must be a boolean, got ${describe(i.input)}` }).default(true),
    /** Beyond the seed: a VM idle this long on tool answers is checkpointed to the store, so another sidecar can resume it if this one dies. */
    checkpointAfterMs: clamped("checkpointAfterMs"),
    /** First id segment of gateway-owned tools; the seed's literal by default. */
    coreSourceName: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+$/, { error: (i) => `coreSourceName must be a plain name, got ${describe(i.input)}` })
      .default("openclaw"),
    /** Beyond the seed: tools.search also returns MCP entries, each with its `MCP.<server>.<fn>` path (`call`). */
    searchIncludesMcp: z.boolean({ error: (i) => `searchIncludesMcp must be a boolean, got ${describe(i.input)}` }).default(false),
  })
  .strict()
  .transform((c) => ({ ...c, searchDefaultLimit: Math.min(c.searchDefaultLimit, c.maxSearchLimit) }));

export type CodeModeConfig = Readonly<z.output<typeof schema>>;
export type CodeModeConfigInput = z.input<typeof schema>;

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Parses layered partial configs (later layers win) into one frozen, clamped config. */
export function parseCodeModeConfig(...layers: Array<Partial<Record<string, unknown>> | undefined>): CodeModeConfig {
  const merged: Record<string, unknown> = {};
  for (const layer of layers) {
    if (!layer) continue;
    for (const [k, v] of Object.entries(layer)) if (v !== undefined) merged[k] = v;
  }
  const parsed = schema.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? issue.path.join(".") : "config";
    const msg = issue?.message ?? "invalid config";
    throw new ConfigError(msg.startsWith(String(issue?.path[0] ?? "\0")) ? msg : `${where}: ${msg}`);
  }
  return Object.freeze({ ...parsed.data, languages: Object.freeze([...parsed.data.languages]) }) as CodeModeConfig;
}

export const DEFAULT_CONFIG: CodeModeConfig = parseCodeModeConfig();

/** Parsed run layers, by the layer object a resolved run holds (it never changes). */
const runConfigs = new WeakMap<object, CodeModeConfig>();

/**
 * `parseCodeModeConfig(runLayer, requestLayer)`, remembered per run layer when the
 * request adds nothing: a resolved run is cached on the sidecar, and re-validating its
 * config on every exec cost about 0.15 ms of the main thread.
 */
export function runConfig(runLayer: Partial<Record<string, unknown>> | undefined, requestLayer?: Partial<Record<string, unknown>>): CodeModeConfig {
  if (!runLayer || (requestLayer && Object.keys(requestLayer).length > 0)) return parseCodeModeConfig(runLayer, requestLayer);
  let c = runConfigs.get(runLayer);
  if (!c) runConfigs.set(runLayer, (c = parseCodeModeConfig(runLayer)));
  return c;
}

/** Configs parsed from their JSON text, most recently used last. */
const jsonConfigs = new Map<string, CodeModeConfig>();
const MAX_JSON_CONFIGS = 256;

/**
 * A suspended run's stored config (the JSON of a parsed config), parsed again when a wait
 * resumes it. Runs of one agent share their config, so the text repeats: a known text is
 * not re-validated (about 0.2 ms of the main thread per wait). Throws as JSON.parse or
 * parseCodeModeConfig do.
 */
export function configFromJson(json: string): CodeModeConfig {
  let c = jsonConfigs.get(json);
  if (c) {
    jsonConfigs.delete(json);
  } else {
    c = parseCodeModeConfig(JSON.parse(json) as Record<string, unknown>);
    if (jsonConfigs.size >= MAX_JSON_CONFIGS) jsonConfigs.delete(jsonConfigs.keys().next().value!);
  }
  jsonConfigs.set(json, c);
  return c;
}

/**
 * Tool Search (the seed's `tools.toolSearch`), selected per run at OpenRun. Its own
 * defaults and clamps, in the style of LIMITS: the seed gives none, so codeTimeoutMs
 * follows code mode's timeoutMs, and a search returns at most 20 entries by default
 * (the results go straight into the model's context) and never more than 50.
 */
export const TOOL_SEARCH_MODES = ["code", "tools"] as const;
export type ToolSearchMode = (typeof TOOL_SEARCH_MODES)[number];

export const TOOL_SEARCH_LIMITS = {
  codeTimeoutMs: { default: 10_000, min: 100, max: 60_000 },
  maxSearchLimit: { default: 20, min: 1, max: 50 },
  searchDefaultLimit: { default: 8, min: 1, max: 50 },
} as const;

const toolSearchSchema = z
  .object({
    enabled: z.boolean({ error: (i) => `enabled must be a boolean, got ${describe(i.input)}` }).default(false),
    mode: z.enum(TOOL_SEARCH_MODES, { error: (i) => `mode must be "code" or "tools", got ${describe(i.input)}` }).default("code"),
    codeTimeoutMs: clamped("codeTimeoutMs", TOOL_SEARCH_LIMITS),
    searchDefaultLimit: clamped("searchDefaultLimit", TOOL_SEARCH_LIMITS),
    maxSearchLimit: clamped("maxSearchLimit", TOOL_SEARCH_LIMITS),
  })
  .strict()
  .transform((c) => ({ ...c, searchDefaultLimit: Math.min(c.searchDefaultLimit, c.maxSearchLimit) }));

export type ToolSearchConfig = Readonly<z.output<typeof toolSearchSchema>>;
export type ToolSearchConfigInput = z.input<typeof toolSearchSchema>;

/** Parses layered partial Tool Search configs (later layers win), clamped; errors name the key as `toolSearch.<key>`. */
export function parseToolSearchConfig(...layers: Array<Partial<Record<string, unknown>> | undefined>): ToolSearchConfig {
  const merged: Record<string, unknown> = {};
  for (const layer of layers) {
    if (!layer) continue;
    for (const [k, v] of Object.entries(layer)) if (v !== undefined) merged[k] = v;
  }
  const parsed = toolSearchSchema.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? issue.path.join(".") : "";
    const msg = issue?.message ?? "invalid config";
    throw new ConfigError(`toolSearch.${msg.startsWith(String(issue?.path[0] ?? "\0")) ? msg : `${where}${where ? ": " : ""}${msg}`}`);
  }
  return Object.freeze(parsed.data);
}
