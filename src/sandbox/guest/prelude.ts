/**
 * The guest prelude: JavaScript that runs inside each fresh VM before the model's
 * program and builds the seed's guest API (ALL_TOOLS, tools, text, json,
 * yield_control, MCP, namespaces, API, console) on top of two host functions.
 *
 * Everything crosses as JSON text: the guest serializes with intrinsics captured here,
 * before any model code ran, and the host never walks a guest object. Host calls are
 * keyed by stable names so a restored snapshot can re-register them. Results come back
 * through `__cm_deliver`, a non-writable global the host calls by call id.
 */

/** Names the host registers; part of the snapshot format, never rename. */
export const HOST_SYNC = "__cm_host_sync";
export const HOST_ASYNC = "__cm_host_async";
export const DELIVER_GLOBAL = "__cm_deliver";
export const RUN_GLOBAL = "__cm_run";
export const PRELUDE_FILENAME = "prelude.js";
export const CELL_FILENAME = "cell.js";

/** Deepest value nesting converted for output, results and tool inputs. */
export const MAX_VALUE_DEPTH = 64;

export const PRELUDE_SOURCE = String.raw`(function (hostSync, hostAsync) {
  "use strict";
  const G = globalThis;
  const parse = JSON.parse, stringify = JSON.stringify;
  const defineProperty = Object.defineProperty, freeze = Object.freeze, create = Object.create;
  const keysOf = Object.keys, isArray = Array.isArray, getProto = Object.getPrototypeOf;
  const ErrorCtor = Error, TypeErrorCtor = TypeError, PromiseCtor = Promise, StringCtor = String;
  const objectToString = Object.prototype.toString;
  const MAX_DEPTH = ${MAX_VALUE_DEPTH};

  function describeFunction(f) {
    let n = "";
    try { n = typeof f.name === "string" ? f.name : ""; } catch (_) {}
    return n ? "[Function " + n + "]" : "[Function]";
  }

  // The seed's output adapter: JSON-compatible values pass; others become plain data.
  function toPlain(value, depth, seen) {
    switch (typeof value) {
      case "string": case "boolean": return value;
      case "number": return Number.isFinite(value) ? value : StringCtor(value);
      case "bigint": return StringCtor(value);
      case "undefined": return null;
      case "symbol": return StringCtor(value);
      case "function": return describeFunction(value);
    }
    if (value === null) return null;
    if (depth >= MAX_DEPTH) return "[MaxDepth]";
    if (seen.indexOf(value) !== -1) return "[Circular]";
    seen.push(value);
    try {
      const tag = objectToString.call(value);
      if (tag === "[object Error]" || value instanceof ErrorCtor) {
        return { name: StringCtor(value.name), message: StringCtor(value.message) };
      }
      if (tag === "[object Date]") {
        const t = value.getTime();
        return Number.isFinite(t) ? value.toISOString() : null;
      }
      if (tag === "[object Map]") {
        const out = [];
        value.forEach((v, k) => { out.push([toPlain(k, depth + 1, seen), toPlain(v, depth + 1, seen)]); });
        return out;
      }
      if (tag === "[object Set]") {
        const out = [];
        value.forEach((v) => { out.push(toPlain(v, depth + 1, seen)); });
        return out;
      }
      if (typeof value.toJSON === "function" && !isArray(value)) {
        return toPlain(value.toJSON(), depth + 1, seen);
      }
      if (ArrayBuffer.isView(value) || tag === "[object ArrayBuffer]") return "[Binary]";
      if (tag === "[object Promise]") return "[Promise]";
      if (isArray(value)) {
        const out = [];
        for (let i = 0; i < value.length; i++) out.push(toPlain(value[i], depth + 1, seen));
        return out;
      }
      const out = {};
      const ks = keysOf(value);
      for (let i = 0; i < ks.length; i++) {
        const k = ks[i];
        const v = value[k];
        if (typeof v === "undefined") continue;
        defineProperty(out, k, { value: toPlain(v, depth + 1, seen), enumerable: true, writable: true, configurable: true });
      }
      return out;
    } finally {
      seen.pop();
    }
  }
  function toJsonText(value) { return stringify(toPlain(value, 0, [])); }
  function errorJson(e) {
    let name = "Error", message = "", stack = "";
    try {
      if (e !== null && (typeof e === "object" || typeof e === "function")) {
        name = StringCtor(e.name ?? "Error");
        message = StringCtor(e.message ?? "");
        stack = typeof e.stack === "string" ? e.stack : "";
      } else {
        name = "Error";
        message = "uncaught " + toJsonText(e);
      }
    } catch (_) { message = "uncaught exception"; }
    return stringify({ name, message, stack });
  }
  function textOf(value) {
    if (typeof value === "string") return value;
    const plain = toPlain(value, 0, []);
    return typeof plain === "string" ? plain : stringify(plain);
  }

  const waiting = create(null);
  function request(op, payload) {
    let id;
    try { id = hostAsync(op, toJsonText(payload)); } catch (e) { return PromiseCtor.reject(e); }
    return new PromiseCtor((resolve, reject) => { waiting[id] = [resolve, reject]; });
  }
  function deliver(id, ok, json) {
    const entry = waiting[id];
    if (!entry) return false;
    delete waiting[id];
    if (ok) { entry[0](json === "" ? undefined : parse(json)); return true; }
    const data = parse(json);
    const err = new ErrorCtor(StringCtor(data.message));
    if (data.name) defineProperty(err, "name", { value: StringCtor(data.name), writable: true, configurable: true });
    entry[1](err);
    return true;
  }
  defineProperty(G, "${DELIVER_GLOBAL}", { value: deliver });

  const boot = parse(hostSync("boot", ""));
  const catalog = boot.catalog, context = boot.context;
  const hasOwn = Object.hasOwn;

  function text(value) { hostSync("text", textOf(value)); }
  function json(value) { hostSync("json", toJsonText(value)); }
  function yield_control(reason) { return request("yield", { reason: reason === undefined ? "" : textOf(reason) }).then(() => undefined); }

  const tools = create(null);
  defineProperty(tools, "search", { enumerable: true, value: function search(query, options) {
    const limit = options && typeof options === "object" ? options.limit : undefined;
    return request("search", { query: textOf(query ?? ""), limit: typeof limit === "number" ? limit : null });
  } });
  defineProperty(tools, "describe", { enumerable: true, value: function describe(id) {
    return request("describe", { id: textOf(id ?? "") });
  } });
  defineProperty(tools, "call", { enumerable: true, value: function call(id, input) {
    return request("call", { id: textOf(id ?? ""), input: input === undefined ? {} : input });
  } });
  const conv = catalog.convenience;
  for (let i = 0; i < conv.length; i++) {
    const name = conv[i][0], id = conv[i][1];
    defineProperty(tools, name, { enumerable: true, value: function (input) {
      return request("call", { id, input: input === undefined ? {} : input });
    } });
  }
  freeze(tools);

  const ALL_TOOLS = freeze(catalog.allTools.map((t) => freeze(t)));

  // MCP.<server>.<function>(input): one object argument, dispatched by exact catalog id.
  function mcpCall(label, id) {
    return function (input) {
      if (input !== undefined && (input === null || typeof input !== "object" || isArray(input))) {
        return PromiseCtor.reject(new TypeErrorCtor(label + " takes one object argument, e.g. " + label + "({ ... })."));
      }
      return request("mcp", { id, input: input === undefined ? {} : input });
    };
  }
  function method(obj, name, fn) { defineProperty(obj, name, { enumerable: true, value: fn }); }
  const MCP = create(null);
  const servers = catalog.mcp;
  for (let i = 0; i < servers.length; i++) {
    const key = servers[i][0], serverName = servers[i][1], fns = servers[i][2];
    const server = create(null);
    for (let j = 0; j < fns.length; j++) method(server, fns[j][0], mcpCall("MCP." + key + "." + fns[j][0], fns[j][1]));
    defineProperty(server, "$api", { value: function $api(toolName, options) {
      const schema = options !== null && typeof options === "object" && options.schema === true;
      return request("mcp_api", { server: serverName, tool: toolName === undefined ? "" : textOf(toolName), schema });
    } });
    const base = "mcp:" + serverName + ":";
    if (servers[i][3]) {
      const resources = create(null);
      method(resources, "list", mcpCall("MCP." + key + ".resources.list", base + "resources/list"));
      method(resources, "read", mcpCall("MCP." + key + ".resources.read", base + "resources/read"));
      method(server, "resources", freeze(resources));
    }
    if (servers[i][4]) {
      const prompts = create(null);
      method(prompts, "list", mcpCall("MCP." + key + ".prompts.list", base + "prompts/list"));
      method(prompts, "get", mcpCall("MCP." + key + ".prompts.get", base + "prompts/get"));
      method(server, "prompts", freeze(prompts));
    }
    method(MCP, key, freeze(server));
  }
  freeze(MCP);

  // Internal namespaces: plain data, run context, and callable members that the host
  // maps (by namespace id and path, in its own copy of the scope) to catalog tools.
  function deepFreeze(value) {
    if (value !== null && typeof value === "object") {
      const ks = keysOf(value);
      for (let i = 0; i < ks.length; i++) deepFreeze(value[ks[i]]);
      freeze(value);
    }
    return value;
  }
  function nsMember(nsId, value, path) {
    if (value === null || typeof value !== "object") return value;
    if (isArray(value)) {
      const out = [];
      for (let i = 0; i < value.length; i++) out.push(nsMember(nsId, value[i], path === "" ? StringCtor(i) : path + "." + i));
      return freeze(out);
    }
    if (hasOwn(value, "$tool")) {
      return function () {
        const args = [];
        for (let i = 0; i < arguments.length; i++) args.push(arguments[i]);
        return request("ns", { ns: nsId, path, args });
      };
    }
    if (hasOwn(value, "$context")) return context === null ? null : deepFreeze(parse(stringify(context[value.$context] ?? null)));
    const out = {};
    const ks = keysOf(value);
    for (let i = 0; i < ks.length; i++) {
      defineProperty(out, ks[i], { enumerable: true, value: nsMember(nsId, value[ks[i]], path === "" ? ks[i] : path + "." + ks[i]) });
    }
    return freeze(out);
  }
  const namespaces = create(null);
  const nsTable = catalog.namespaces;
  for (let i = 0; i < nsTable.length; i++) {
    method(namespaces, nsTable[i][1], nsMember(nsTable[i][0], parse(nsTable[i][2]), ""));
  }
  freeze(namespaces);

  const API = freeze({
    list(prefix) { return request("api_list", { prefix: prefix === undefined ? "" : textOf(prefix) }); },
    read(path) { return request("api_read", { path: textOf(path ?? "") }); },
  });
  function logWith(level) {
    return function () {
      const parts = [];
      for (let i = 0; i < arguments.length; i++) parts.push(textOf(arguments[i]));
      hostSync("text", (level ? "[" + level + "] " : "") + parts.join(" "));
    };
  }
  const console = freeze({ log: logWith(""), info: logWith(""), debug: logWith(""), warn: logWith("warn"), error: logWith("error") });

  const api = { ALL_TOOLS, tools, MCP, namespaces, API, text, json, yield_control, console };
  for (const k of keysOf(api)) defineProperty(G, k, { value: api[k], enumerable: false, writable: false, configurable: false });
  const nsNames = keysOf(namespaces);
  for (let i = 0; i < nsNames.length; i++) defineProperty(G, nsNames[i], { value: namespaces[nsNames[i]], enumerable: false, writable: false, configurable: false });

  function run(cell) {
    let p;
    try { p = cell(); } catch (e) { hostSync("error", errorJson(e)); return; }
    PromiseCtor.resolve(p).then(
      (v) => {
        let text;
        try { text = toJsonText(v); } catch (e) { hostSync("error", errorJson(e)); return; }
        hostSync("result", text);
      },
      (e) => { hostSync("error", errorJson(e)); },
    );
  }
  defineProperty(G, "${RUN_GLOBAL}", { value: run });
})`;

/**
 * Wraps the model's program as an async function body so top-level `return` and
 * `await` work. The wrapper sits on line 1 before the code, so only line-1 columns
 * shift (by CELL_PREFIX.length), which error locations correct for.
 */
export const CELL_PREFIX = "(async function () {";
export const CELL_SUFFIX = "\n})";

export function wrapCell(source: string): string {
  return CELL_PREFIX + source + CELL_SUFFIX;
}
