/**
 * The console of a `codemode.run` script (spec 3.3.1, 9) and the prelude's other reports to
 * the host, all as tagged JSON output items the sidecar turns into the response: `log`,
 * `trace` (a finished tool call, never its input or output), `diag`, `uncaught` and `trunc`
 * (logs were dropped).
 *
 * Serialization follows the spec (arguments joined with spaces, objects as JSON with sorted
 * keys, "[Unserializable Object]" when that fails); it reads own data properties only,
 * never an inherited toJSON, on intrinsics captured before the script exists. Log bytes are
 * counted here as the host charges them, so the sidecar's output budget always holds what
 * the guest lets through; past `maxLogBytes` entries are dropped and the host appends the
 * warning (docs/module-notes.md#srcsandboxsurfacesmcp-runprelude-logsts).
 *
 * A source fragment spliced in after prelude-marshal's; it uses `context` and `hostSync`.
 */
export const LOGS_SOURCE = String.raw`
  const arraySort = ArrayProto.sort, DateNow = Date.now, startMs = Date.now();
  const UNSERIALIZABLE = "[Unserializable Object]";
  function utf8Length(s) {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = apply(stringCharCodeAt, s, [i]);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) { n += 4; i++; }
      else n += 3;
    }
    return n;
  }
  function emitInternal(text) { if (!halted) hostSync("json", text); }
  function sortedKeys(v) {
    const ks = keysOf(v);
    apply(arraySort, ks, []);
    return ks;
  }
  // JSON with sorted keys; throws on a cycle or past 64 levels (the caller falls back).
  function stable(v, depth, stack, inArray) {
    switch (typeof v) {
      case "string": return stringify(v);
      case "number": return numIsFinite(v) ? stringify(v) : "null";
      case "boolean": return v ? "true" : "false";
      case "bigint": return stringify(StringCtor(v));
      case "undefined": case "symbol": return inArray ? "null" : undefined;
      case "function": { const n = functionName(v); return stringify(n ? "[Function " + n + "]" : "[Function]"); }
    }
    if (v === null) return "null";
    if (depth >= MAX_DEPTH) throw new RangeErrorCtor("too deep");
    for (let s = stack; s !== null; s = s.up) if (s.v === v) throw new TypeErrorCtor("cycle");
    const frame = { v, up: stack };
    if (brand(dateGetTime, v)) return numIsFinite(apply(dateGetTime, v, [])) ? stringify(apply(dateToISOString, v, [])) : "null";
    if (isView(v) || brand(arrayBufferByteLength, v)) return '"[Binary]"';
    if (brand(mapSize, v)) {
      let out = "[", first = true;
      apply(mapForEach, v, [(val, key) => { out += (first ? "[" : ",[") + stable(key, depth + 2, frame, true) + "," + stable(val, depth + 2, frame, true) + "]"; first = false; }]);
      return out + "]";
    }
    if (brand(setSize, v)) {
      let out = "[", first = true;
      apply(setForEach, v, [(val) => { out += (first ? "" : ",") + stable(val, depth + 1, frame, true); first = false; }]);
      return out + "]";
    }
    if (protoIs(v, ErrorProto)) {
      const p = errorParts(v);
      const ks = sortedKeys(v);
      let out = '{"message":' + stringify(p[1]) + ',"name":' + stringify(p[0]);
      for (let i = 0; i < ks.length; i++) {
        if (ks[i] === "name" || ks[i] === "message") continue;
        const d = getOwnDesc(v, ks[i]);
        const x = d === undefined ? undefined : stable(hasOwn(d, "value") ? d.value : "[Getter]", depth + 1, frame, false);
        if (x !== undefined) out += "," + stringify(ks[i]) + ":" + x;
      }
      return out + "}";
    }
    const toJSON = ownToJSON(v);
    if (toJSON !== undefined) return stable(apply(toJSON, v, [""]), depth + 1, frame, inArray);
    if (isArray(v)) {
      const ld = getOwnDesc(v, "length");
      const len = ld !== undefined && hasOwn(ld, "value") ? ld.value : 0;
      if (len > 100000) throw new RangeErrorCtor("too long");
      let out = "[";
      for (let i = 0; i < len; i++) {
        const d = getOwnDesc(v, i);
        out += (i === 0 ? "" : ",") + (d === undefined ? "null" : stable(hasOwn(d, "value") ? d.value : "[Getter]", depth + 1, frame, true));
      }
      return out + "]";
    }
    const ks = sortedKeys(v);
    let out = "{", first = true;
    for (let i = 0; i < ks.length; i++) {
      const d = getOwnDesc(v, ks[i]);
      if (d === undefined) continue;
      const x = stable(hasOwn(d, "value") ? d.value : "[Getter]", depth + 1, frame, false);
      if (x === undefined) continue;
      out += (first ? "" : ",") + stringify(ks[i]) + ":" + x;
      first = false;
    }
    return out + "}";
  }
  function argText(v) {
    if (v === null || (typeof v !== "object" && typeof v !== "function")) {
      try { return StringCtor(v); } catch (_) { return UNSERIALIZABLE; }
    }
    try {
      const s = stable(v, 0, null, false);
      return s === undefined ? UNSERIALIZABLE : s;
    } catch (_) { return UNSERIALIZABLE; }
  }
  const maxLogBytes = context.maxLogBytes;
  let logBytes = 0, logsTruncated = false;
  function log(level, args) {
    if (logsTruncated) return;
    let message = "";
    for (let i = 0; i < args.length; i++) message += (i === 0 ? "" : " ") + argText(args[i]);
    const entry = '{"k":"log","level":"' + level + '","message":' + stringify(message) + ',"timeMs":' + MathFloor(DateNow() - startMs) + "}";
    const cost = utf8Length(entry) + 32;
    if (logBytes + cost > maxLogBytes) {
      logsTruncated = true;
      emitInternal('{"k":"trunc"}');
      return;
    }
    logBytes += cost;
    emitInternal(entry);
  }
  function logAt(level) { return function () { log(level, arguments); }; }
  const specConsole = create(null);
  method(specConsole, "log", logAt("log"));
  method(specConsole, "info", logAt("log"));
  method(specConsole, "debug", logAt("debug"));
  method(specConsole, "warn", logAt("warn"));
  method(specConsole, "error", logAt("error"));
  freeze(specConsole);

  function emitDiagnostic(severity, code, message, extra) {
    let out = '{"k":"diag","severity":' + stringify(severity) + ',"code":' + stringify(code) + ',"message":' + stringify(message);
    if (extra) { const ks = keysOf(extra); for (let i = 0; i < ks.length; i++) if (typeof extra[ks[i]] === "string") out += "," + stringify(ks[i]) + ":" + stringify(extra[ks[i]]); }
    emitInternal(out + "}");
  }
  function emitTrace(serverId, toolName, ms, ok, error) {
    emitInternal('{"k":"trace","serverId":' + stringify(serverId) + ',"toolName":' + stringify(toolName) + ',"durationMs":' + MathMax(0, MathFloor(ms)) + ',"ok":' + (ok ? "true" : "false") + (ok ? "" : ',"error":' + stringify(apply(stringSlice, error, [0, 300]))) + "}");
  }
`;
