/**
 * The model-visible surface of a run: with code mode active, exactly `exec` and
 * `wait`, with descriptions that teach the guest API and the run's limits; with Tool
 * Search, `tool_search_code` (mode code) or `tool_search`/`tool_describe`/`tool_call`
 * (mode tools, or mode code after a fallback); otherwise the run's tools as direct
 * definitions (or none for a run without tools). A tool's allowed callers decide which
 * side of that line it is on: a direct-only tool stays a direct definition beside a
 * program surface's tools, and a program-only one is never a direct definition. The
 * serialized bytes are reported so a gateway can compare prompt sizes.
 */
import { createHash } from "node:crypto";
import type { CodeModeConfig, ToolSearchConfig } from "../shared/config.js";
import { callableByModel, callableFromCode } from "../shared/tool-wire.js";
import type { ViewEntry, ViewServer } from "./catalog/catalog-view.js";
import type { McpRunConfig } from "../shared/mcp-run/config.js";
import { mcpRunModelTool } from "./mcp-run-surface.js";

/** What the `exec` description says about a visible internal namespace. */
export type SurfaceNamespace = { globalName: string; description: string; prompt: string };

export type ModelToolDef = { name: string; description: string; inputSchema: Record<string, unknown>; toolId?: string };

/** Which surface a run has (SurfaceKind on the wire). */
export type SurfaceKindName = "code_mode" | "tool_search_code" | "tool_search" | "direct" | "none" | "mcp_run";

export type Surface = {
  /** Code mode is active. */
  active: boolean;
  inactiveReason: string;
  kind: SurfaceKindName;
  /** Set when Tool Search mode code fell back to mode tools: why. */
  fallbackReason: string;
  tools: ModelToolDef[];
  toolsJson: string;
  serializedBytes: number;
};

function namespaceLines(namespaces: readonly SurfaceNamespace[]): string[] {
  if (namespaces.length === 0) return [];
  const lines = ["Internal namespaces (also under `namespaces.<name>`):"];
  for (const ns of namespaces) {
    const text = [ns.description, ns.prompt].filter((t) => t.length > 0).join(" ");
    lines.push(`- \`${ns.globalName}\`${text ? `: ${text}` : ""}`);
  }
  return lines;
}

function execDescription(config: CodeModeConfig, catalogSize: number, hasMcp: boolean, namespaces: readonly SurfaceNamespace[]): string {
  const langs = config.languages.join(" or ");
  return [
    `Run a short ${langs} program that orchestrates this run's hidden tool catalog (${catalogSize} tools).`,
    "The program is an async function body: use `await`, and `return` a JSON-compatible value.",
    "Inside the program:",
    "- `ALL_TOOLS`: compact entries {id, name, label?, description, source, sourceName?} (no schemas).",
    `- \`await tools.search(query, { limit })\`: ranked entries (default ${config.searchDefaultLimit}, at most ${config.maxSearchLimit}).`,
    "- `await tools.describe(id)`: the entry with its full JSON Schema `parameters`.",
    "- `await tools.call(id, input)`: runs the tool and returns its result; failures throw a catchable Error.",
    "- `tools.<name>(input)`: shortcut for tools whose name is unambiguous.",
    ...(hasMcp
      ? [
          '- MCP tools are not in ALL_TOOLS or tools.*: `await API.list("mcp")` lists declaration files, `await API.read("mcp/<server>.d.ts")` returns one,',
          "  then call `await MCP.<server>.<tool>({ ...input })` with one object argument (`await MCP.<server>.$api(tool)` gives one tool's declaration).",
        ]
      : []),
    ...namespaceLines(namespaces),
    "- `text(value)` and `json(value)` append output; `await yield_control(reason)` pauses and returns control.",
    ...(config.sessionStore
      ? [
          `- \`await store(key, value)\` / \`await load(key)\`: JSON values kept across this session's cells (\`load\` of a missing key is \`undefined\`; at most ${config.maxSessionKeys} keys, ${config.maxSessionValueBytes} bytes a value).`,
          "  A cell's own loads see its stores at once; other cells see them once it completes or returns `waiting`, and never if it fails.",
        ]
      : []),
    `Run independent calls in parallel with Promise.all (at most ${config.maxPendingToolCalls} pending at once).`,
    `Limits: ${config.timeoutMs} ms per exec, ${config.maxOutputBytes} bytes of output, ${config.memoryLimitBytes} bytes of memory.`,
    "No import/require, filesystem, network, environment or eval. Dates are UTC.",
    "If the result is `waiting`, call `wait` with its runId to continue.",
    ...(config.awaitResults
      ? [
          `With \`awaitResults: true\` (the default here), an exec whose program waits on tool calls stays open until they settle and the program ends (at most ${config.maxAwaitMs} ms; then it returns \`waiting\`), instead of returning \`waiting\` for you to poll with \`wait\`; \`yield_control\` does not end it either.`,
        ]
      : []),
  ].join("\n");
}

export function codeModeTools(config: CodeModeConfig, catalogSize: number, hasMcp: boolean, namespaces: readonly SurfaceNamespace[] = []): ModelToolDef[] {
  return [
    {
      name: "exec",
      description: execDescription(config, catalogSize, hasMcp, namespaces),
      inputSchema: {
        type: "object",
        properties: {
          code: { type: "string", description: "The program: an async function body." },
          language: { type: "string", enum: [...config.languages], description: `Defaults to "javascript".` },
          ...(config.awaitResults
            ? {
                awaitResults: {
                  type: "boolean",
                  description: "Keep the exec open until pending tool calls settle (default true); false returns `waiting` at the deadline.",
                },
              }
            : {}),
        },
        required: ["code"],
        additionalProperties: false,
      },
    },
    {
      name: "wait",
      description: "Continue a code-mode program whose exec or wait result was `waiting`. Returns the same result shape as exec.",
      inputSchema: {
        type: "object",
        properties: { runId: { type: "string", description: "The runId of the waiting result." } },
        required: ["runId"],
        additionalProperties: false,
      },
    },
  ];
}

/** A model-visible name from a catalog id: provider-safe characters, at most 64 of them. */
function nameFromId(id: string): string {
  const safe = id.replace(/:/g, "__").replace(/[^A-Za-z0-9_-]/g, "_");
  if (safe.length <= 64) return safe;
  return `${safe.slice(0, 55)}_${createHash("sha256").update(id).digest("hex").slice(0, 8)}`;
}

/**
 * The run's tools as direct definitions. Model providers refuse two tools with one name,
 * so when visible tools share a name (two owners each have `search`), every one of them
 * is named after its catalog id instead; the gateway maps names back by `toolId`. So is
 * a tool named like one of `taken`, the program tools it is listed beside (`exec`).
 */
function directTools(view: readonly ViewEntry[], taken: ReadonlySet<string> = new Set()): ModelToolDef[] {
  const counts = new Map<string, number>();
  for (const e of view) counts.set(e.name, (counts.get(e.name) ?? 0) + (taken.has(e.name) ? 2 : 1));
  const used = new Set([...taken, ...view.filter((e) => counts.get(e.name) === 1).map((e) => e.name)]);
  return view.map((e) => {
    let name = e.name;
    if (counts.get(e.name)! > 1) {
      name = nameFromId(e.id);
      for (let n = 2; used.has(name); n++) name = `${nameFromId(e.id).slice(0, 60)}_${n}`;
      used.add(name);
    }
    return { name, description: e.description, inputSchema: JSON.parse(e.parametersJson) as Record<string, unknown>, toolId: e.id };
  });
}

/** What else a code-mode surface teaches besides the catalog: namespaces, MCP servers. */
export type SurfaceExtras = {
  namespaces?: readonly SurfaceNamespace[];
  mcpServerCount?: number;
  /**
   * The gateway registered no tools at all (not: policy hid them). Code mode stays active
   * with an empty catalog, so programs can still compute; an allow list that hides every
   * tool, or disable_tools, is what the seed means by a run without tools.
   */
  emptyCatalog?: boolean;
  /** The run's Tool Search config: enabled, it is the surface unless code mode was enabled explicitly. */
  toolSearch?: ToolSearchConfig;
  /** The run's config layer set code mode's `enabled: true` itself (code mode then supersedes Tool Search, as the seed says). */
  codeModeExplicit?: boolean;
  /** Mode code falls back to tools: a tool_search_code program of this run could not start a runtime, or no attached sidecar can run code. */
  fallbackReason?: string;
  /** The run's Code Mode for MCP config: enabled, `codemode.run` is the surface (over code mode and Tool Search). */
  mcpRun?: McpRunConfig;
  /** The MCP servers of the run's view, and the view's version (the `codemode.run` description is kept per version). */
  mcpServers?: readonly ViewServer[];
  viewVersion?: string;
};

export function describeSurface(config: CodeModeConfig, view: readonly ViewEntry[], disableTools: boolean, extras: SurfaceExtras = {}): Surface {
  let tools: ModelToolDef[];
  let inactiveReason = "";
  let kind: SurfaceKindName = "code_mode";
  let fallbackReason = "";
  const ts = extras.toolSearch;
  // Allowed callers: programs read `program`, the model's direct definitions `direct`, and
  // a program surface lists `modelOnly` beside its own tools. Without a rule all are the view.
  const ruled = view.some((e) => e.allowedCallers !== undefined);
  const program = ruled ? view.filter(callableFromCode) : view;
  const direct = ruled ? view.filter(callableByModel) : view;
  const modelOnly = ruled ? view.filter((e) => !callableFromCode(e)) : [];
  if (disableTools) {
    tools = [];
    kind = "none";
    inactiveReason = "the run disables tools, so code mode does not activate";
  } else if (view.length === 0 && !extras.emptyCatalog) {
    tools = [];
    kind = "none";
    inactiveReason = "no tools are visible to the run after policy, so code mode does not activate";
  } else if (extras.mcpRun?.enabled) {
    kind = "mcp_run";
    tools = [mcpRunModelTool(program, extras.mcpServers ?? [], config, extras.mcpRun, extras.viewVersion ?? "")];
    inactiveReason = "Code Mode for MCP is the run's surface (codemode.run)";
  } else if (ts?.enabled && !extras.codeModeExplicit) {
    fallbackReason = ts.mode === "code" ? (extras.fallbackReason ?? "") : "";
    const code = ts.mode === "code" && !fallbackReason;
    kind = code ? "tool_search_code" : "tool_search";
    tools = code ? [...toolSearchCodeTools(ts, program.length), ...directTools(modelOnly, TOOL_SEARCH_CODE_NAMES)] : toolSearchTools(ts, direct.length);
    inactiveReason = code ? "Tool Search is the run's surface (tool_search_code)" : "Tool Search is the run's surface (tool_search, tool_describe, tool_call)";
  } else if (!config.enabled) {
    tools = directTools(direct);
    kind = "direct";
    inactiveReason = "code mode is disabled in the run's config; the run's tools are exposed directly";
  } else {
    const hasMcp = ruled
      ? program.some((e) => e.source === "mcp") || (extras.mcpServers ?? []).some((s) => s.resources || s.prompts)
      : (extras.mcpServerCount ?? 0) > 0 || view.some((e) => e.source === "mcp");
    tools = [
      ...codeModeTools(config, program.filter((e) => e.source !== "mcp").length, hasMcp, extras.namespaces ?? []),
      ...directTools(modelOnly, CODE_MODE_NAMES),
    ];
  }
  const toolsJson = JSON.stringify(tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema })));
  return { active: inactiveReason === "", inactiveReason, kind, fallbackReason, tools, toolsJson, serializedBytes: Buffer.byteLength(toolsJson, "utf8") };
}

/** The program tools a direct-only tool is listed beside; one of these names is not reused. */
const CODE_MODE_NAMES: ReadonlySet<string> = new Set(["exec", "wait"]);
const TOOL_SEARCH_CODE_NAMES: ReadonlySet<string> = new Set(["tool_search_code"]);

const ENTRY_SHAPE = "{id, name, label?, description, source, sourceName?}";

/** Tool Search, mode code: one compact program tool over `openclaw.tools` (the seed's bridge). */
export function toolSearchCodeTools(ts: ToolSearchConfig, catalogSize: number): ModelToolDef[] {
  return [
    {
      name: "tool_search_code",
      description: [
        `Search, describe and call this run's hidden tools (${catalogSize} tools) from a short JavaScript program: an async function body (use \`await\`, \`return\` a JSON-compatible value).`,
        `- \`await openclaw.tools.search(query, { limit })\`: ranked entries ${ENTRY_SHAPE} (default ${ts.searchDefaultLimit}, at most ${ts.maxSearchLimit}).`,
        "- `await openclaw.tools.describe(id)`: the entry with its exact JSON Schema `parameters`.",
        "- `await openclaw.tools.call(id, args)`: runs the tool and returns its result; a failure throws a catchable Error.",
        `Only console.log/warn/error besides: no imports, filesystem, network or timers. Limit: ${ts.codeTimeoutMs} ms per program.`,
      ].join("\n"),
      inputSchema: {
        type: "object",
        properties: { code: { type: "string", description: "The program: an async function body." } },
        required: ["code"],
        additionalProperties: false,
      },
    },
  ];
}

/** Tool Search, mode tools: the seed's three structured tools. */
export function toolSearchTools(ts: ToolSearchConfig, catalogSize: number): ModelToolDef[] {
  return [
    {
      name: "tool_search",
      description: `Search this run's hidden tool catalog (${catalogSize} tools) by what you want to do. Returns entries ${ENTRY_SHAPE}, best first (default ${ts.searchDefaultLimit}, at most ${ts.maxSearchLimit}). Then tool_describe one id for its input schema and tool_call it.`,
      inputSchema: {
        type: "object",
        properties: {
          query: { type: "string", description: 'The task, e.g. "create a GitHub issue".' },
          limit: { type: "integer", minimum: 1, maximum: ts.maxSearchLimit },
        },
        required: ["query"],
        additionalProperties: false,
      },
    },
    {
      name: "tool_describe",
      description: "Full description and exact JSON Schema input of one tool, by an id from tool_search.",
      inputSchema: { type: "object", properties: { id: { type: "string" } }, required: ["id"], additionalProperties: false },
    },
    {
      name: "tool_call",
      description: "Call one tool by its id from tool_search with `args` matching its input schema. Returns the tool's result.",
      inputSchema: {
        type: "object",
        properties: { id: { type: "string" }, args: { type: "object", description: "The tool's input." } },
        required: ["id"],
        additionalProperties: false,
      },
    },
  ];
}
