/**
 * The one table that names every surface's guest prelude: its source, the file name it is
 * compiled under and its compile flags. The worker compiles (or loads the build's bytecode
 * of) preludes by name from here, so it never imports a surface's prelude itself, and
 * adding a surface means adding a row.
 */
import { CompileFlags } from "quickjs-wasi";
import { PRELUDE_FILENAME, PRELUDE_SOURCE } from "./code-mode/prelude.js";
import { TOOL_SEARCH_PRELUDE_FILENAME, TOOL_SEARCH_PRELUDE_SOURCE } from "./tool-search/prelude.js";
import { MCP_RUN_PRELUDE_FILENAME, MCP_RUN_PRELUDE_SOURCE } from "./mcp-run/prelude.js";

export type PreludeName = "code" | "tool_search" | "mcp_run";

/**
 * Code mode's and codemode.run's preludes are stripped of source text and debug info: a
 * third of the size, about 0.2 ms less per VM to load, and the guest cannot read them
 * through Function.prototype.toString.
 */
const STRIPPED = CompileFlags.STRIP_SOURCE | CompileFlags.STRIP_DEBUG;
export const PRELUDES: Record<PreludeName, { source: string; filename: string; flags: number; what: string }> = {
  code: { source: PRELUDE_SOURCE, filename: PRELUDE_FILENAME, flags: STRIPPED, what: "the guest prelude" },
  tool_search: { source: TOOL_SEARCH_PRELUDE_SOURCE, filename: TOOL_SEARCH_PRELUDE_FILENAME, flags: 0, what: "the Tool Search prelude" },
  mcp_run: { source: MCP_RUN_PRELUDE_SOURCE, filename: MCP_RUN_PRELUDE_FILENAME, flags: STRIPPED, what: "the codemode.run prelude" },
};
