/**
 * The guest prelude of the Code Mode for MCP surface (`codemode.run`): the spec's globals
 * (console with levels, timers without setInterval, TextEncoder/Decoder, URL,
 * `__codemode_result__`), the `@codemode/*` modules (./prelude-modules.ts), and the end of
 * a run: `result` is read from `globalThis.__codemode_result__` once the module body has
 * finished AND nothing it started is still pending, checked after every answer by a
 * zero-delay host timer that fires only once the microtasks are drained.
 *
 * The sidecar rewrites the script (./module-transform.ts) into an async function body whose
 * first line binds its imports through `link`, the body's only argument. It speaks the host
 * protocol of ../code-mode/prelude.ts (host functions, boot call, ops `mcp`, `describe`,
 * `search`, `timer`, the [deliver, run] pair, plus `memory_limit` from ./prelude-stack.ts),
 * so the worker's VM session runs it. It returns no `boot`: its VMs are always made fresh,
 * never from an image. `eval` is removed from the global object (the spec forbids it).
 */
import { MARSHAL_SOURCE } from "../../guest/prelude-marshal.js";
import { EARLY_SOURCE } from "../../guest/prelude-bridge.js";
import { URL_SHIM_SOURCE, WEB_SOURCE } from "../../guest/prelude-web.js";
import { ERRORS_SOURCE } from "./prelude-errors.js";
import { STACK_SOURCE } from "./prelude-stack.js";
import { LOGS_SOURCE } from "./prelude-logs.js";
import { MODULES_SOURCE } from "./prelude-modules.js";

export const MCP_RUN_PRELUDE_FILENAME = "mcp-run-prelude.js";

export const MCP_RUN_PRELUDE_SOURCE = String.raw`(function (hostSync, hostAsync) {
  "use strict";
  const G = globalThis;
  ${MARSHAL_SOURCE}
  ${STACK_SOURCE}
  const NumberCtor = Number;
  function method(obj, name, fn) { defineProperty(obj, name, dataDesc(fn, false, true, false)); }
  // Never consults a species constructor of the script (MARSHAL_SOURCE's thenOf).
  function then(p, onOk, onErr) { return thenOf(p, onOk, onErr); }
  // What the prelude's own promises settle with: a null-prototype box has no then, so a
  // value is resolved (and a then the script put on Object.prototype read) only once, by
  // the promise the script gets, as a native async function would.
  function box(v) { const b = create(null); b.v = v; return b; }
  /** A data property of a thrown value or its prototypes below Object.prototype (accessors read as undefined). */
  function fieldOf(obj, key) {
    let o = obj;
    for (let i = 0; i < 256 && o !== null && (typeof o === "object" || typeof o === "function") && o !== ObjectProto; i++) {
      const d = getOwnDesc(o, key);
      if (d !== undefined) return hasOwn(d, "value") ? d.value : undefined;
      o = getProto(o);
    }
    return undefined;
  }

  // Host requests: an answer fulfills with box(value); a failure rejects with the host's plain {name, message}, of which the callers make errors.
  const waiting = create(null);
  const promiseReject = Promise.reject;
  function requestText(op, text) {
    if (halted) return apply(promiseReject, PromiseCtor, [{ name: "SandboxLimitError", message: "the script exceeded maxMemoryBytes and is being stopped." }]);
    let id;
    try { id = hostAsync(op, text); } catch (e) { return apply(promiseReject, PromiseCtor, [{ name: dataOf(e, "name"), message: dataOf(e, "message") }]); }
    return new PromiseCtor((resolve, reject) => { waiting[id] = [(v) => resolve(box(v)), reject]; });
  }
  let settlement = "";
  let finishing = false, sentinelId = "";
  ${EARLY_SOURCE}
  function deliver(id, ok, json, mode) {
    if (id === "") return settlement;
    const entry = waiting[id];
    if (parsedAhead(id, json, mode, entry !== undefined)) return true;
    if (entry === undefined) return false;
    delete waiting[id];
    const wasSentinel = id === sentinelId;
    if (ok) entry[0](answerValue(id, json, mode));
    else entry[1](parse(json));
    if (finishing && !wasSentinel) armSentinel();
    return true;
  }

  const boot = parse(hostSync("boot", ""));
  const catalog = boot.catalog, context = boot.context;
  ${ERRORS_SOURCE}
  ${LOGS_SOURCE}
  ${WEB_SOURCE}
  ${URL_SHIM_SOURCE}
  ${MODULES_SOURCE}

  const api = { console: specConsole, setTimeout, clearTimeout, queueMicrotask, atob, btoa, TextEncoder, TextDecoder, structuredClone };
  const apiNames = keysOf(api);
  for (let i = 0; i < apiNames.length; i++) defineProperty(G, apiNames[i], dataDesc(api[apiNames[i]], false, false, false));
  defineProperty(G, "__codemode_result__", dataDesc(undefined, true, false, false));
  delete G.eval;

  function settle(ok, text) {
    if (settlement !== "") return;
    settlement = (ok ? "1" : "0") + text;
    hostSync(ok ? "result" : "error", text);
  }
  function fail(e) {
    const cls = codemodeClassOf(e);
    if (cls !== "") {
      let out = '{"k":"uncaught","errorClass":' + stringify(cls);
      const hint = fieldOf(e, "hint"), path = fieldOf(e, "path");
      if (typeof hint === "string") out += ',"hint":' + stringify(hint);
      if (typeof path === "string") out += ',"path":' + stringify(path);
      try { emitInternal(out + "}"); } catch (_) { /* over the output budget: the failure itself still settles */ }
    }
    settle(false, errorJson(e));
  }
  function finish() {
    if (settlement !== "") return;
    const d = getOwnDesc(G, "__codemode_result__");
    const v = d !== undefined && hasOwn(d, "value") ? d.value : undefined;
    let text;
    try { text = v === undefined ? "null" : toJsonText(v); } catch (e) {
      fail(new SandboxLimitError("__codemode_result__ cannot be returned: " + fieldOf(e, "message"), about(null, null, { limit: "result", hint: "Return a smaller summary in __codemode_result__." })));
      return;
    }
    settle(true, text);
  }
  // A 0 ms host timer: it fires after the microtasks of the answer that armed it, so the check sees what they started.
  function armSentinel() {
    if (sentinelId !== "" || settlement !== "" || halted) return;
    let id;
    try { id = hostAsync("timer", '{"ms":0}'); } catch (_) { return; }
    sentinelId = id;
    waiting[id] = [() => { sentinelId = ""; if (keysOf(waiting).length === 0) finish(); }, () => {}];
  }
  let started = false;
  function run(cell) {
    if (started) return;
    started = true;
    let p;
    try { p = apply(cell, undefined, [link]); } catch (e) { fail(e); return; }
    then(p, () => {
      finishing = true;
      if (keysOf(waiting).length === 0) finish();
      else armSentinel();
    }, fail);
  }
  return [deliver, run];
})`;
