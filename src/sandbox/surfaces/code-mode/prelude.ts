/**
 * The guest prelude: JavaScript that runs inside each fresh VM before the model's
 * program and builds the seed's guest API (ALL_TOOLS, tools, text, json, yield_control,
 * MCP, namespaces, API, console) and the everyday web globals on top of two host
 * functions.
 *
 * Everything crosses as JSON text: the guest serializes with intrinsics captured here,
 * before any model code ran (../../guest/prelude-marshal.ts), and the host never walks a guest
 * object. Host calls are keyed by stable names so a restored snapshot can re-register
 * them. The prelude exposes no internal binding: it returns its delivery function and
 * its one-shot `run` to the host, which keeps the first as an exported handle (a token
 * that survives snapshots), so guest code can neither call nor replace them, and no stack
 * trace hook of the guest ever receives a prelude function or receiver
 * (../../guest/prelude-stack-guard.ts).
 */
import { CONSOLE_SOURCE } from "../../guest/prelude-console.js";
import { BRIDGE_SOURCE, RUN_SOURCE } from "../../guest/prelude-bridge.js";
import { RANDOM_SOURCE } from "../../guest/prelude-random.js";
import { STACK_GUARD_SOURCE } from "../../guest/prelude-stack-guard.js";
import { MARSHAL_SOURCE, MAX_VALUE_DEPTH } from "../../guest/prelude-marshal.js";
import { URL_SHIM_SOURCE, WEB_SOURCE } from "../../guest/prelude-web.js";

export const PRELUDE_FILENAME = "prelude.js";
export { MAX_VALUE_DEPTH };

export const PRELUDE_SOURCE = String.raw`(function (hostSync, hostAsync) {
  "use strict";
  const G = globalThis;
  ${MARSHAL_SOURCE}
  ${STACK_GUARD_SOURCE}
  ${BRIDGE_SOURCE}

  // The run's context (namespaces' $context members), set by boot() below.
  let context;

  function textOf(value) { return typeof value === "string" ? value : value === undefined ? "undefined" : toJsonText(value); }
  function text(value) { hostSync("text", textOf(value)); }
  function json(value) { hostSync("json", toJsonText(value)); }
  function yield_control(reason) { return then(request("yield", { reason: reason === undefined ? "" : textOf(reason) }), () => undefined); }

  // The session store (beyond the seed; a run with sessionStore false has neither global).
  // A value must be JSON as it is (no conversion, unlike text()/json()): plain objects,
  // arrays, strings, finite numbers, booleans and null, no cycle, at most MAX_DEPTH deep.
  function jsonOnly(v, depth, seen, path) {
    if (v === null || typeof v === "string" || typeof v === "boolean") return;
    if (typeof v === "number") {
      if (!numIsFinite(v)) throw new TypeErrorCtor("store: " + path + " is " + StringCtor(v) + ", which JSON cannot hold.");
      return;
    }
    if (typeof v !== "object") throw new TypeErrorCtor("store: " + path + " is " + (v === undefined ? "undefined" : "a " + typeof v) + ", which JSON cannot hold.");
    if (depth >= MAX_DEPTH) throw new RangeErrorCtor("store: " + path + " nests deeper than " + MAX_DEPTH + " levels.");
    for (let i = 0; i < seen.length; i++) if (seen[i] === v) throw new TypeErrorCtor("store: " + path + " refers back to itself (a cycle), which JSON cannot hold.");
    seen[seen.length] = v;
    if (isArray(v)) {
      for (let i = 0; i < v.length; i++) jsonOnly(v[i], depth + 1, seen, path + "[" + i + "]");
    } else {
      const proto = getProto(v);
      if (proto !== ObjectProto && proto !== null) throw new TypeErrorCtor("store: " + path + " is not a plain object or array, which JSON cannot hold as it is.");
      const ks = keysOf(v);
      for (let i = 0; i < ks.length; i++) jsonOnly(v[ks[i]], depth + 1, seen, path + "." + ks[i]);
    }
    seen.length = seen.length - 1;
  }
  function storeKey(key) {
    if (typeof key !== "string") throw new TypeErrorCtor("store and load take a string key, got " + (key === null ? "null" : typeof key) + ".");
    return key;
  }
  function store(key, value) {
    try {
      storeKey(key);
      jsonOnly(value, 0, [], "the value");
    } catch (e) {
      return apply(promiseReject, PromiseCtor, [e]);
    }
    return then(request("store", { key, json: stringify(value) }), () => undefined);
  }
  function load(key) {
    try {
      storeKey(key);
    } catch (e) {
      return apply(promiseReject, PromiseCtor, [e]);
    }
    return request("load", { key });
  }

  // tools: search/describe/call, plus tools.<safeName>(input) for unambiguous names. The
  // name table is read from the host on first use and each function made when first
  // touched, so a catalog of thousands of tools costs nothing to a program that never
  // uses a shortcut. The object refuses every change (it is not frozen only because a
  // proxy over a frozen target could not list the names it makes on demand).
  const toolsTarget = create(null);
  method(toolsTarget, "search", function search(query, options) {
    const limit = typeof options === "object" ? optionOf(options, "limit") : undefined;
    return request("search", { query: textOf(query ?? ""), limit: typeof limit === "number" ? limit : null });
  });
  method(toolsTarget, "describe", function describe(id) {
    return request("describe", { id: textOf(id ?? "") });
  });
  method(toolsTarget, "call", function call(id, input) {
    return request("call", { id: textOf(id ?? ""), input: input === undefined ? {} : input });
  });
  let convIds, convNames;
  const convMade = create(null);
  function conv() {
    if (convIds === undefined) {
      const pairs = parse(hostSync("convenience", ""));
      convIds = create(null);
      convNames = [];
      for (let i = 0; i < pairs.length; i++) { convIds[pairs[i][0]] = pairs[i][1]; defineData(convNames, i, pairs[i][0]); }
    }
    return convIds;
  }
  function convFn(key) {
    if (typeof key !== "string" || hasOwn(toolsTarget, key)) return undefined;
    const id = conv()[key];
    if (id === undefined) return undefined;
    let fn = convMade[key];
    if (fn === undefined) {
      fn = function (input) { return request("call", { id, input: input === undefined ? {} : input }); };
      defineProperty(fn, "name", dataDesc(key, false, false, true));
      convMade[key] = fn;
    }
    return fn;
  }
  const reflectOwnKeys = Reflect.ownKeys, reflectGetOwnDesc = Reflect.getOwnPropertyDescriptor, ProxyCtor = Proxy;
  const refuse = () => false;
  const tools = new ProxyCtor(toolsTarget, {
    get(t, k) { return hasOwn(t, k) ? t[k] : convFn(k); },
    has(t, k) { return hasOwn(t, k) || convFn(k) !== undefined; },
    ownKeys(t) {
      const keys = reflectOwnKeys(t);
      conv();
      for (let i = 0; i < convNames.length; i++) if (!hasOwn(t, convNames[i])) defineData(keys, keys.length, convNames[i]);
      return keys;
    },
    // The engine reads the returned descriptor like a literal one: it must inherit nothing.
    getOwnPropertyDescriptor(t, k) {
      if (hasOwn(t, k)) { const d = reflectGetOwnDesc(t, k); return dataDesc(d.value, d.writable, d.enumerable, d.configurable); }
      const fn = convFn(k);
      return fn === undefined ? undefined : dataDesc(fn, false, true, true);
    },
    defineProperty: refuse, set: refuse, deleteProperty: refuse, setPrototypeOf: refuse, preventExtensions: refuse,
    getPrototypeOf() { return null; },
  });

  // ALL_TOOLS is read from the host the first time the program uses it (a large catalog
  // costs nothing to a program that never looks), then kept, frozen.
  let allTools;
  function allToolsGetter() {
    if (allTools === undefined) {
      const list = parse(hostSync("all_tools", ""));
      for (let i = 0; i < list.length; i++) freeze(list[i]);
      allTools = freeze(list);
    }
    return allTools;
  }

  // MCP.<server>.<function>(input): one object argument, dispatched by exact catalog id.
  function mcpCall(label, id) {
    return function (input) {
      if (input !== undefined && (input === null || typeof input !== "object" || isArray(input))) {
        return apply(promiseReject, PromiseCtor, [new TypeErrorCtor(label + " takes one object argument, e.g. " + label + "({ ... }).")]);
      }
      return request("mcp", { id, input: input === undefined ? {} : input });
    };
  }
  const MCP = create(null);

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
      return function () { return request("ns", { ns: nsId, path, args: restArgs(arguments, 0) }); };
    }
    if (hasOwn(value, "$context")) return context === null ? null : deepFreeze(parse(stringify(context[value.$context] ?? null)));
    const out = {};
    const ks = keysOf(value);
    for (let i = 0; i < ks.length; i++) {
      defineProperty(out, ks[i], dataDesc(nsMember(nsId, value[ks[i]], path === "" ? ks[i] : path + "." + ks[i]), false, true, false));
    }
    return freeze(out);
  }
  const namespaces = create(null);

  const API = freeze({
    list(prefix) { return request("api_list", { prefix: prefix === undefined ? "" : textOf(prefix) }); },
    read(path) { return request("api_read", { path: textOf(path ?? "") }); },
  });
  ${RANDOM_SOURCE}
  ${CONSOLE_SOURCE}
  ${WEB_SOURCE}
  ${URL_SHIM_SOURCE}

  // What depends on the run's catalog and context is built once, by boot(), which the host
  // calls after this function returned and before any program runs: a worker keeps one
  // image of the VM before boot and makes each catalog's image from it (../../worker/warm-vms.ts).
  let booted = false;
  function boot() {
    if (booted) return;
    booted = true;
    const answer = parse(hostSync("boot", ""));
    const catalog = answer.catalog;
    context = answer.context;
    const servers = catalog.mcp;
    for (let i = 0; i < servers.length; i++) {
      const key = servers[i][0], serverName = servers[i][1], fns = servers[i][2];
      const server = create(null);
      for (let j = 0; j < fns.length; j++) method(server, fns[j][0], mcpCall("MCP." + key + "." + fns[j][0], fns[j][1]));
      defineProperty(server, "$api", dataDesc(function $api(toolName, options) {
        const schema = typeof options === "object" && optionOf(options, "schema") === true;
        return request("mcp_api", { server: serverName, tool: toolName === undefined ? "" : textOf(toolName), schema });
      }, false, false, false));
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
    const nsTable = catalog.namespaces;
    for (let i = 0; i < nsTable.length; i++) {
      method(namespaces, nsTable[i][1], nsMember(nsTable[i][0], parse(nsTable[i][2]), ""));
    }
    freeze(namespaces);

    const allToolsDesc = create(null);
    allToolsDesc.get = allToolsGetter; allToolsDesc.enumerable = false; allToolsDesc.configurable = false;
    defineProperty(G, "ALL_TOOLS", allToolsDesc);
    const api = {
      tools, MCP, namespaces, API, text, json, yield_control, console,
      setTimeout, setInterval, clearTimeout, clearInterval, queueMicrotask, atob, btoa, TextEncoder, TextDecoder, structuredClone,
    };
    if (answer.store === true) {
      api.store = store;
      api.load = load;
    }
    const apiNames = keysOf(api);
    for (let i = 0; i < apiNames.length; i++) defineProperty(G, apiNames[i], dataDesc(api[apiNames[i]], false, false, false));
    const nsNames = keysOf(namespaces);
    for (let i = 0; i < nsNames.length; i++) defineProperty(G, nsNames[i], dataDesc(namespaces[nsNames[i]], false, false, false));
  }

  ${RUN_SOURCE}
})`;
