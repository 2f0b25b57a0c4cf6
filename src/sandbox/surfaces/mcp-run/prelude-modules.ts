/**
 * The `@codemode/*` modules inside the sandbox (spec 4, 5, 10): `@codemode/discovery`,
 * `@codemode/errors`, and one `@codemode/servers/<id>` namespace per MCP server with an
 * async function per tool and `__meta__`, plus `link`, the one-shot function the rewritten
 * script's first line receives to bind its imports (and `import()` for later).
 *
 * A binding sends `{id, input}` as an `mcp` host call (the sidecar validates the input
 * before the gateway sees it) and unwraps the MCP result by the spec's rules; `isError`
 * throws ToolCallError, calls beyond `maxToolCalls` throw SandboxLimitError, calls beyond
 * the host's concurrency wait in a queue. Namespaces are frozen, null-prototype, with
 * sorted keys, built at boot before any script code runs; every value handed out is a fresh
 * copy. A rejected binding's error carries where the script called it (./prelude-stack.ts).
 * Spliced into the MCP-run prelude after the errors and logs fragments
 * (docs/module-notes.md#srcsandboxsurfacesmcp-runprelude-modulests).
 */
export const MODULES_SOURCE = String.raw`
  const SymbolToStringTag = Symbol.toStringTag;
  const DETAILS = { name: 0, description: 1, full: 2 };
  const maxToolCalls = context.maxToolCalls, maxConcurrent = context.maxConcurrent;
  let callsMade = 0, limitReported = false;

  // Host requests, at most maxConcurrent in flight; the rest wait in a FIFO (null-prototype, so no setter runs).
  const queue = create(null);
  let qHead = 0, qTail = 0, inFlight = 0;
  function limited(op, text) {
    return new PromiseCtor((resolve, reject) => { queue[qTail++] = [op, text, resolve, reject]; pump(); });
  }
  function pump() {
    while (inFlight < maxConcurrent && qHead < qTail) {
      const job = queue[qHead];
      delete queue[qHead];
      qHead++;
      inFlight++;
      then(requestText(job[0], job[1]), (v) => { inFlight--; job[2](v); pump(); }, (e) => { inFlight--; job[3](e); pump(); });
    }
  }
  function rejected(e) { return apply(promiseReject, PromiseCtor, [e]); }
  function resolved(v) { return apply(promiseResolve, PromiseCtor, [v]); }
  const own = ownData;
  // A fresh copy of boot data, from JSON text made at boot (JSON.stringify now would call a toJSON on Object.prototype).
  function copy(text) { return text === undefined ? undefined : parse(text); }

  // Spec 5.3.2, in order.
  function unwrap(r) {
    if (r === null || typeof r !== "object" || isArray(r)) return r;
    if (own(r, "structuredContent") !== undefined) return own(r, "structuredContent");
    const content = own(r, "content");
    if (!isArray(content)) return r;
    if (content.length === 1 && own(content[0], "type") === "text" && typeof own(content[0], "text") === "string") return own(content[0], "text");
    return r;
  }
  function isErrorText(r) {
    const content = own(r, "content");
    let text = "";
    if (isArray(content)) for (let i = 0; i < content.length && text.length < 1000; i++) if (own(content[i], "type") === "text" && typeof own(content[i], "text") === "string") text += (text ? " " : "") + own(content[i], "text");
    return text === "" ? "the tool reported an error (isError) without text" : apply(stringSlice, text, [0, 1000]);
  }

  function limitError() {
    const message = "maxToolCalls (" + maxToolCalls + ") reached: this run may make no more MCP tool calls.";
    const hint = "Make fewer calls per run (batch, filter, or stop early), or raise limits.maxToolCalls within the host's maximum.";
    if (!limitReported) { limitReported = true; emitDiagnostic("error", "SANDBOX_LIMIT", message, { hint, errorClass: "SandboxLimitError" }); }
    return new SandboxLimitError(message, about(null, null, { hint, limit: "maxToolCalls" }));
  }

  function callTool(server, tool, input, argc) {
    const site = callSite();
    if (callsMade >= maxToolCalls) return rejected(placed(limitError(), site));
    callsMade++;
    const value = tool.kind === "other" ? input : argc === 0 || input === undefined ? {} : input;
    let text;
    try { text = '{"id":' + stringify(tool.id) + ',"input":' + toJsonText(value) + "}"; } catch (e) { return rejected(placed(e, site)); }
    const t0 = DateNow();
    return new PromiseCtor((resolve, reject) => {
      then(limited("mcp", text), (answer) => {
        const r = answer.v;
        if (own(r, "isError") === true) {
          const message = server.serverId + "." + tool.exportName + " failed: " + isErrorText(r);
          emitTrace(server.serverId, tool.toolName, DateNow() - t0, false, message);
          reject(placed(new ToolCallError(message, about(server, tool, { result: r })), site));
          return;
        }
        emitTrace(server.serverId, tool.toolName, DateNow() - t0, true, "");
        resolve(unwrap(r));
      }, (data) => {
        const err = errorFromAnswer(data, server, tool);
        // Refused before it left the sandbox: no call was made, so none is traced or counted.
        if (codemodeClassOf(err) === "SchemaValidationError") callsMade--;
        else emitTrace(server.serverId, tool.toolName, DateNow() - t0, false, err.name + ": " + err.message);
        reject(placed(err, site));
      });
    });
  }
  function binding(server, tool) {
    const f = { [tool.exportName]: function (input) { return callTool(server, tool, input, arguments.length); } }[tool.exportName];
    return freeze(f);
  }
  function namespace(entries) {
    const ns = create(null);
    const names = keysOf(entries);
    apply(arraySort, names, []);
    for (let i = 0; i < names.length; i++) defineProperty(ns, names[i], dataDesc(entries[names[i]], false, true, false));
    defineProperty(ns, SymbolToStringTag, dataDesc("Module", false, false, false));
    return freeze(ns);
  }
  function deepFreeze(v) {
    if (v !== null && typeof v === "object") { const ks = keysOf(v); for (let i = 0; i < ks.length; i++) deepFreeze(v[ks[i]]); freeze(v); }
    return v;
  }

  // Boot table: servers [serverId, catalogName, serverName, version, description, capabilities, tools]; tools [toolName, exportName, id, description, annotations|null, kind].
  const servers = [], serverById = create(null), modules = create(null);
  setProto(servers, null);
  for (let i = 0; i < catalog.servers.length; i++) {
    const row = catalog.servers[i];
    const s = { serverId: row[0], catalogName: row[1], serverName: row[2], version: row[3], description: row[4], capabilities: stringify(row[5]), tools: [], byName: create(null) };
    setProto(s.tools, null);
    for (let j = 0; j < row[6].length; j++) {
      const t = row[6][j];
      const tool = { toolName: t[0], exportName: t[1], id: t[2], description: t[3], annotations: t[4] === null ? null : stringify(t[4]), kind: t[5] };
      s.tools[j] = tool;
      s.byName[t[0]] = tool;
    }
    servers[i] = s;
    serverById[s.serverId] = s;
    const exportsOf = create(null);
    const metaTools = [];
    for (let j = 0; j < s.tools.length; j++) {
      const t = s.tools[j];
      exportsOf[t.exportName] = binding(s, t);
      metaTools[j] = t.description ? { toolName: t.toolName, exportName: t.exportName, description: t.description } : { toolName: t.toolName, exportName: t.exportName };
    }
    const meta = { serverId: s.serverId, serverName: s.serverName };
    if (s.version) meta.serverVersion = s.version;
    meta.tools = metaTools;
    exportsOf.__meta__ = deepFreeze(meta);
    modules["@codemode/servers/" + s.serverId] = namespace(exportsOf);
  }
  function findServer(id) {
    const key = typeof id === "string" ? id : "";
    if (hasOwn(serverById, key)) return serverById[key];
    for (let i = 0; i < servers.length; i++) if (servers[i].catalogName === key) return servers[i];
    return undefined;
  }
  function serverIds() { let out = ""; for (let i = 0; i < servers.length && i < 30; i++) out += (i ? ", " : "") + servers[i].serverId; return out || "(none)"; }
  function serverNotFound(id) {
    const shown = typeof id === "string" ? stringify(apply(stringSlice, id, [0, 200])) : displayText(id);
    return new ServerNotFoundError("no connected MCP server has the id " + shown + ". Connected: " + serverIds() + ".", about(null, null, { hint: "Use one of: " + serverIds() + " (listServers() lists them)." }));
  }
  function detailOf(options) {
    const d = own(options, "detail");
    if (d === undefined) return 1;
    if (typeof d === "string" && hasOwn(DETAILS, d)) return DETAILS[d];
    throw new CodemodeError("detail must be \"name\", \"description\" or \"full\", got " + displayText(d) + ".", about(null, null, { hint: "Pass { detail: \"name\" | \"description\" | \"full\" }." }));
  }
  function summary(t, detail) {
    const out = { toolName: t.toolName, exportName: t.exportName };
    if (detail >= 1 && t.description) defineData(out, "description", t.description);
    if (detail >= 1 && t.annotations !== null) defineData(out, "annotations", copy(t.annotations));
    return out;
  }
  function serverInfo(s, describe) {
    const out = { serverId: s.serverId, serverName: s.serverName, capabilities: copy(s.capabilities) };
    if (describe && s.description) defineData(out, "description", s.description);
    if (describe && s.version) defineData(out, "version", s.version);
    return out;
  }
  function full(s, names) {
    return limited("describe", toJsonText({ serverId: s.serverId, tools: names }));
  }
  function wrapHostError(data) { return errorFromAnswer(data, null, null); }
  /**
   * A discovery function whose failures carry the script's call site. f settles with
   * box(value), so the promise the script gets is the only one resolved with the value.
   */
  function sited(name, f) {
    return {
      [name]: function (a, b) {
        const site = callSite();
        const p = apply(f, undefined, arguments);
        return new PromiseCtor((resolve, reject) => { then(p, (answer) => resolve(answer.v), (e) => reject(placed(e, site))); });
      },
    }[name];
  }

  const discovery = namespace({
    specVersion: context.specVersion,
    listServers: function listServers() { const out = []; for (let i = 0; i < servers.length; i++) defineData(out, i, serverInfo(servers[i], false)); return resolved(out); },
    describeServer: sited("describeServer", function (serverId) { const s = findServer(serverId); return s ? resolved(box(serverInfo(s, true))) : rejected(serverNotFound(serverId)); }),
    listTools: sited("listTools", function (serverId, options) {
      const s = findServer(serverId);
      if (!s) return rejected(serverNotFound(serverId));
      let detail;
      try { detail = detailOf(options); } catch (e) { return rejected(e); }
      if (detail === 2) return then(full(s, null), (answer) => answer, (d) => { throw wrapHostError(d); });
      const out = [];
      for (let i = 0; i < s.tools.length; i++) defineData(out, i, summary(s.tools[i], detail));
      return resolved(box(out));
    }),
    getTool: sited("getTool", function (serverId, toolName) {
      const s = findServer(serverId);
      if (!s) return rejected(serverNotFound(serverId));
      const name = typeof toolName === "string" ? toolName : "";
      let t = hasOwn(s.byName, name) ? s.byName[name] : undefined;
      for (let i = 0; t === undefined && i < s.tools.length; i++) if (s.tools[i].exportName === name) t = s.tools[i];
      if (t === undefined) {
        let names = "";
        for (let i = 0; i < s.tools.length && i < 40; i++) names += (i ? ", " : "") + s.tools[i].toolName;
        return rejected(new ToolNotFoundError(s.serverId + " has no tool " + stringify(apply(stringSlice, name, [0, 200])) + ". Tools: " + (names || "(none)") + ".", about(s, null, { toolName: name, hint: "Use an exact name from listTools(" + stringify(s.serverId) + ")." })));
      }
      return then(full(s, [t.toolName]), (answer) => box(own(answer.v, 0)), (d) => { throw wrapHostError(d); });
    }),
    searchTools: sited("searchTools", function (query, options) {
      let detail;
      try { detail = detailOf(options); } catch (e) { return rejected(e); }
      const sid = own(options, "serverId");
      let server = "";
      if (sid !== undefined) { const s = findServer(sid); if (!s) return rejected(serverNotFound(sid)); server = s.serverId; }
      const limit = own(options, "limit");
      const q = typeof query === "string" ? query : query === undefined || query === null ? "" : displayText(query);
      const payload = { query: q, serverId: server, detail: detail === 0 ? "name" : detail === 1 ? "description" : "full", limit: typeof limit === "number" ? limit : null };
      return then(limited("search", toJsonText(payload)), (answer) => box({ query: q, results: answer.v }), (d) => { throw wrapHostError(d); });
    }),
  });
  modules["@codemode/discovery"] = discovery;
  modules["@codemode/errors"] = namespace(ERROR_CLASSES);

  function moduleFor(specifier) {
    if (typeof specifier === "string" && hasOwn(modules, specifier)) return modules[specifier];
    const text = typeof specifier === "string" ? specifier : displayText(specifier);
    if (apply(stringIndexOf, text, ["@codemode/servers/"]) === 0) throw serverNotFound(apply(stringSlice, text, [18]));
    throw new CodemodeError("cannot import " + stringify(apply(stringSlice, text, [0, 200])) + ": only @codemode/discovery, @codemode/errors and @codemode/servers/<serverId> exist.", about(null, null, { hint: "Import one of the built-in modules; servers: " + serverIds() + "." }));
  }
  function dynamicImport(specifier) {
    const site = callSite();
    try { return resolved(moduleFor(specifier)); } catch (e) { return rejected(placed(e, site)); }
  }
  // The script's first line calls link(specifier) per import, then link(null); after that it does nothing.
  let linking = true;
  function link(specifier) {
    if (!linking) return undefined;
    if (specifier === null) { linking = false; return undefined; }
    if (specifier === "") return dynamicImport;
    return moduleFor(specifier);
  }
`;
