/**
 * What the pool's surface probe (`warmOtherSurfaces` in ../../pool/pool-start.ts) runs on
 * the `codemode.run` surface instead of code mode's PROBE_SOURCE: the MCP-run prelude reads
 * the script's result from `__codemode_result__` (spec 3.2.2), not a return value, and
 * needs a server table and per-run context at boot. Spread over the probe's exec task, so
 * the probe proves the prelude compiles, boots and settles a result, like the other
 * surfaces'. The pool must never import it: the server (../../server.ts) passes it in.
 */
import { SPEC_VERSION } from "../../../shared/mcp-run/naming.js";
import { EMPTY_GUEST_CATALOG, type ExecTask, type GuestCatalog } from "../../pool/task-protocol.js";

export const MCP_RUN_PROBE: Pick<ExecTask, "source" | "contextJson"> & { catalog: GuestCatalog } = {
  source: "globalThis.__codemode_result__ = 1;",
  catalog: { ...EMPTY_GUEST_CATALOG, staticJson: '{"servers":[]}' },
  contextJson: JSON.stringify({ specVersion: SPEC_VERSION, maxLogBytes: 1_024, maxToolCalls: 1, maxConcurrent: 1 }),
};
