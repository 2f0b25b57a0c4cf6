/**
 * The `codemode.run` prelude's hook into how QuickJS builds stack traces
 * (`Error.prepareStackTrace`), for two things the engine does not do itself:
 * - Spec 7.4, the memory limit: the hook sees QuickJS's catchable `InternalError: out of
 *   memory` before any `catch` does and tells the host (`memory_limit`), which ends the run
 *   whatever the script catches; from then on the prelude makes no host request and records
 *   no log (`halted`). The response reports SANDBOX_LIMIT (./response.ts).
 * - Script positions for the bindings' errors (tool calls, discovery, `import()`):
 *   `callSite()` records where the script called in, `placed()` gives the error that place.
 * Other stacks are formatted exactly as QuickJS's own. The hook is installed through the
 * engine's setter, then the property is replaced by one that reads undefined and refuses
 * to be set: the script can neither replace nor call the hook. Spliced in right after
 * prelude-marshal's; it uses `hostSync` (docs/module-notes.md#srcsandboxsurfacesmcp-runprelude-stackts).
 */
import { CELL_FILENAME } from "../../guest/bridge-names.js";

export const STACK_SOURCE = String.raw`
  const CELL_FILE = ${JSON.stringify(CELL_FILENAME)};
  const InternalErrorProto = typeof InternalError === "function" ? InternalError.prototype : null;
  // Error.stackTraceLimit's accessors, taken now: a descriptor read later could inherit get/set from Object.prototype.
  const stackLimitDesc = getOwnDesc(ErrorCtor, "stackTraceLimit");
  const getLimit = stackLimitDesc !== undefined && hasOwn(stackLimitDesc, "get") ? stackLimitDesc.get : undefined;
  const setLimit = stackLimitDesc !== undefined && hasOwn(stackLimitDesc, "set") ? stackLimitDesc.set : undefined;
  // Set once the memory limit was hit: the run is ending, nothing more leaves the sandbox.
  let halted = false;
  let probing = false, probed = "";

  function frameText(c) {
    const n = c.getFunctionName();
    let s = "    at " + (n ? n : "<anonymous>");
    if (c.isNative()) return s + " (native)\n";
    const f = c.getFileName(), l = c.getLineNumber();
    return s + " (" + (f ? f : "<null>") + (typeof l === "number" && l !== -1 ? ":" + l + ":" + c.getColumnNumber() : "") + ")\n";
  }
  /** The innermost frame of the script itself, or null. */
  function scriptFrame(cs) {
    for (let i = 0; i < cs.length; i++) if (!cs[i].isNative() && cs[i].getFileName() === CELL_FILE) return cs[i];
    return null;
  }
  function memoryLimitHit(cs) {
    if (halted) return;
    halted = true;
    const c = scriptFrame(cs);
    const l = c === null ? -1 : c.getLineNumber();
    // A host without the operation leaves the error as QuickJS made it (catchable).
    try { hostSync("memory_limit", typeof l === "number" && l > 0 ? "(line " + l + ", column " + c.getColumnNumber() + ")" : ""); } catch (_) { halted = false; }
  }
  function prepareStackTrace(err, cs) {
    // First, so that running out of memory while probing a call site is not missed.
    if (InternalErrorProto !== null && err !== null && typeof err === "object" && getProto(err) === InternalErrorProto) {
      const d = getOwnDesc(err, "message");
      if (d !== undefined && hasOwn(d, "value") && d.value === "out of memory") memoryLimitHit(cs);
    }
    if (probing) {
      const c = scriptFrame(cs);
      probed = c === null ? "" : frameText(c);
      return "";
    }
    let s = "";
    for (let i = 0; i < cs.length; i++) s += frameText(cs[i]);
    return s;
  }
  ErrorCtor.prepareStackTrace = prepareStackTrace;
  const hookDesc = create(null);
  hookDesc.get = function () { return undefined; };
  hookDesc.set = function () { throw new TypeErrorCtor("Error.prepareStackTrace cannot be set in codemode.run: the host formats stack traces."); };
  hookDesc.enumerable = false;
  hookDesc.configurable = false;
  defineProperty(ErrorCtor, "prepareStackTrace", hookDesc);

  /** Where the script called into the prelude (a stack line of the script's innermost frame), or "". */
  function callSite() {
    let limit;
    probing = true;
    probed = "";
    try {
      // Deep enough to reach the script through the prelude's frames, whatever the script set.
      if (getLimit !== undefined && setLimit !== undefined) { limit = apply(getLimit, ErrorCtor, []); apply(setLimit, ErrorCtor, [16]); }
      new ErrorCtor();
    } catch (_) {
      probed = "";
    } finally {
      probing = false;
      if (limit !== undefined) try { apply(setLimit, ErrorCtor, [limit]); } catch (_) { /* keep going */ }
    }
    return probed;
  }
  /** The error, with the script's call site as its stack when one was found. */
  function placed(err, site) {
    if (site !== "" && err !== null && typeof err === "object") {
      try { defineProperty(err, "stack", dataDesc(site, true, false, true)); } catch (_) { /* a frozen error keeps its stack */ }
    }
    return err;
  }
`;
