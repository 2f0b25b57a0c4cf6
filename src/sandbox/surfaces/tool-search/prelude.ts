/**
 * The reduced guest prelude of the Tool Search surface (`tool_search_code`, the seed's
 * openclaw-tool-search.md): a program sees only `openclaw.tools.search/describe/call`
 * and `console.log/warn/error`. No ALL_TOOLS, `tools`, MCP, namespaces, API, text/json,
 * yield_control or timers: the seed's runtime exposes nothing else, and a program on
 * this surface never suspends.
 *
 * It speaks the host protocol of ../code-mode/prelude.ts unchanged (same two host functions, same
 * op names "search", "describe", "call", the same boot call, and it returns the same
 * [deliver, run, boot] triple), so the worker's VM session runs either prelude. Value
 * conversion and console formatting are the hardened fragments code mode uses
 * (../../guest/prelude-marshal.ts, ../../guest/prelude-console.ts), spliced in as they are.
 */
import { CONSOLE_SOURCE } from "../../guest/prelude-console.js";
import { BRIDGE_SOURCE, RUN_SOURCE } from "../../guest/prelude-bridge.js";
import { RANDOM_SOURCE } from "../../guest/prelude-random.js";
import { STACK_GUARD_SOURCE } from "../../guest/prelude-stack-guard.js";
import { MARSHAL_SOURCE } from "../../guest/prelude-marshal.js";

export const TOOL_SEARCH_PRELUDE_FILENAME = "tool-search-prelude.js";

export const TOOL_SEARCH_PRELUDE_SOURCE = String.raw`(function (hostSync, hostAsync) {
  "use strict";
  const G = globalThis;
  ${MARSHAL_SOURCE}
  ${STACK_GUARD_SOURCE}
  ${BRIDGE_SOURCE}
  // The boot answer is read for protocol symmetry; this surface needs no catalog in the VM.
  function boot() { hostSync("boot", ""); }

  function idText(value) { return typeof value === "string" ? value : value === undefined || value === null ? "" : toJsonText(value); }
  const toolsApi = create(null);
  method(toolsApi, "search", function search(query, options) {
    const limit = typeof options === "object" ? optionOf(options, "limit") : undefined;
    return request("search", { query: typeof query === "string" ? query : idText(query), limit: typeof limit === "number" ? limit : null });
  });
  method(toolsApi, "describe", function describe(id) { return request("describe", { id: idText(id) }); });
  method(toolsApi, "call", function call(id, args) { return request("call", { id: idText(id), input: args === undefined ? {} : args }); });
  freeze(toolsApi);
  const openclaw = create(null);
  method(openclaw, "tools", toolsApi);
  freeze(openclaw);

  ${RANDOM_SOURCE}
  ${CONSOLE_SOURCE}
  const reducedConsole = create(null);
  method(reducedConsole, "log", console.log);
  method(reducedConsole, "warn", console.warn);
  method(reducedConsole, "error", console.error);
  freeze(reducedConsole);

  defineProperty(G, "openclaw", { value: openclaw, enumerable: false, writable: false, configurable: false });
  defineProperty(G, "console", { value: reducedConsole, enumerable: false, writable: false, configurable: false });

  ${RUN_SOURCE}
})`;
