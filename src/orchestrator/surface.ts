/**
 * The model-visible surface of a run: with code mode active, exactly `exec` and
 * `wait`, with descriptions that teach the guest API and the run's limits; otherwise
 * the run's tools as direct definitions (or none for a run without tools). The
 * serialized bytes are reported so a gateway can compare prompt sizes.
 */
import type { CodeModeConfig } from "../shared/config.js";
import type { ViewEntry } from "./catalog/catalog-view.js";

/** What the `exec` description says about a visible internal namespace. */
export type SurfaceNamespace = { globalName: string; description: string; prompt: string };

export type ModelToolDef = { name: string; description: string; inputSchema: Record<string, unknown> };

export type Surface = {
  active: boolean;
  inactiveReason: string;
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
          "- MCP tools are not in ALL_TOOLS or tools.*: `await API.list(\"mcp\")` lists declaration files, `await API.read(\"mcp/<server>.d.ts\")` returns one,",
          "  then call `await MCP.<server>.<tool>({ ...input })` with one object argument (`await MCP.<server>.$api(tool)` gives one tool's declaration).",
        ]
      : []),
    ...namespaceLines(namespaces),
    "- `text(value)` and `json(value)` append output; `await yield_control(reason)` pauses and returns control.",
    `Run independent calls in parallel with Promise.all (at most ${config.maxPendingToolCalls} pending at once).`,
    `Limits: ${config.timeoutMs} ms per exec, ${config.maxOutputBytes} bytes of output, ${config.memoryLimitBytes} bytes of memory.`,
    "No import/require, filesystem, network, environment or eval. Dates are UTC.",
    "If the result is `waiting`, call `wait` with its runId to continue.",
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

function directTools(view: readonly ViewEntry[]): ModelToolDef[] {
  return view.map((e) => ({ name: e.name, description: e.description, inputSchema: JSON.parse(e.parametersJson) as Record<string, unknown> }));
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
};

export function describeSurface(config: CodeModeConfig, view: readonly ViewEntry[], disableTools: boolean, extras: SurfaceExtras = {}): Surface {
  let tools: ModelToolDef[];
  let inactiveReason = "";
  if (disableTools) {
    tools = [];
    inactiveReason = "the run disables tools, so code mode does not activate";
  } else if (view.length === 0 && !extras.emptyCatalog) {
    tools = [];
    inactiveReason = "no tools are visible to the run after policy, so code mode does not activate";
  } else if (!config.enabled) {
    tools = directTools(view);
    inactiveReason = "code mode is disabled in the run's config; the run's tools are exposed directly";
  } else {
    const hasMcp = (extras.mcpServerCount ?? 0) > 0 || view.some((e) => e.source === "mcp");
    tools = codeModeTools(config, view.filter((e) => e.source !== "mcp").length, hasMcp, extras.namespaces ?? []);
  }
  const toolsJson = JSON.stringify(tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema })));
  return { active: inactiveReason === "", inactiveReason, tools, toolsJson, serializedBytes: Buffer.byteLength(toolsJson, "utf8") };
}
