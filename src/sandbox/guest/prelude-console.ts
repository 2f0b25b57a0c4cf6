/**
 * The guest's `console`, as a browser console behaves for code a model writes: every
 * level (log, info, debug, warn, error, plus dir, table, assert, count, time, group),
 * printf-style `%s %d %i %f %o %O %j %c %%` substitutions, and values shown as display
 * text (`undefined` stays `undefined`, objects as JSON-like text). Formatting never
 * throws, whatever the guest passes (throwing getters, proxies, cycles). Lines go into
 * the result's output in call order; warn, error and debug lines keep their level as a
 * `[warn] `, `[error] `, `[debug] ` prefix.
 *
 * A source fragment spliced into the prelude after prelude-marshal's (it uses
 * `displayText`, `show` and the captured intrinsics).
 */
export const CONSOLE_SOURCE = String.raw`
  const NumberCtor = Number, DateNow = Date.now, MathRound = Math.round;
  let groupIndent = "";
  function formatArgs(args) {
    let out = "", start = 0;
    const first = args[0];
    if (typeof first === "string" && apply(stringIndexOf, first, ["%"]) !== -1 && args.length > 1) {
      let next = 1, i = 0;
      start = 1;
      while (i < first.length) {
        const c = first[i];
        if (c !== "%" || i + 1 >= first.length) { out += c; i++; continue; }
        const spec = first[i + 1];
        i += 2;
        if (spec === "%") { out += "%"; continue; }
        if (next >= args.length || !(spec === "s" || spec === "d" || spec === "i" || spec === "f" || spec === "o" || spec === "O" || spec === "j" || spec === "c")) {
          out += "%" + spec;
          continue;
        }
        const a = args[next++];
        try {
          if (spec === "s") out += typeof a === "string" ? a : show(a, 1, null, false);
          else if (spec === "d" || spec === "i") out += typeof a === "bigint" ? StringCtor(a) + "n" : StringCtor(spec === "i" ? MathFloor(NumberCtor(a)) : NumberCtor(a));
          else if (spec === "f") out += StringCtor(NumberCtor(a));
          else if (spec !== "c") out += show(a, 0, null, true);
        } catch (_) { out += "[Unprintable]"; }
      }
      start = next;
    }
    for (let i = start; i < args.length; i++) out += (out === "" && i === start ? "" : " ") + displayText(args[i]);
    return out;
  }
  function argsOf(list) {
    const out = [];
    setProto(out, null);
    for (let i = 0; i < list.length; i++) out[i] = list[i];
    return out;
  }
  function emit(level, line) {
    const text = groupIndent === "" ? line : groupIndent + indentLines(line, "\n" + groupIndent);
    hostSync("text", (level ? "[" + level + "] " : "") + text);
  }
  function indentLines(line, sep) {
    let out = "";
    for (let i = 0; i < line.length; i++) out += line[i] === "\n" ? sep : line[i];
    return out;
  }
  function logAt(level) { return function () { emit(level, formatArgs(argsOf(arguments))); }; }

  function tableText(data, columns) {
    const rowKeys = isArray(data) ? null : keysOf(data);
    const count = rowKeys === null ? MathMin(dataOf(data, "length") || 0, 1000) : MathMin(rowKeys.length, 1000);
    const cols = [];
    setProto(cols, null);
    const seen = create(null);
    let hasValues = false;
    const rows = [];
    setProto(rows, null);
    for (let r = 0; r < count; r++) {
      const key = rowKeys === null ? r : rowKeys[r];
      const d = getOwnDesc(data, key);
      const value = d !== undefined && hasOwn(d, "value") ? d.value : undefined;
      rows[r] = [StringCtor(key), value];
      if (value !== null && typeof value === "object") {
        const ks = keysOf(value);
        for (let i = 0; i < ks.length; i++) if (!seen[ks[i]]) { seen[ks[i]] = true; cols[cols.length] = ks[i]; }
      } else hasValues = true;
    }
    let shownCols = cols;
    if (isArray(columns)) { shownCols = []; setProto(shownCols, null); for (let i = 0; i < columns.length; i++) shownCols[i] = StringCtor(columns[i]); }
    const header = ["(index)"];
    setProto(header, null);
    for (let i = 0; i < shownCols.length; i++) header[header.length] = shownCols[i];
    if (hasValues) header[header.length] = "Values";
    const matrix = [header];
    setProto(matrix, null);
    for (let r = 0; r < rows.length; r++) {
      const value = rows[r][1];
      const line = [rows[r][0]];
      setProto(line, null);
      const isObj = value !== null && typeof value === "object";
      for (let c = 0; c < shownCols.length; c++) {
        let cell = "";
        if (isObj) { const d = getOwnDesc(value, shownCols[c]); if (d !== undefined) cell = hasOwn(d, "value") ? show(d.value, 1, null, true) : "[Getter]"; }
        line[line.length] = cell;
      }
      if (hasValues) line[line.length] = isObj ? "" : show(value, 1, null, true);
      matrix[matrix.length] = line;
    }
    const widths = [];
    setProto(widths, null);
    for (let c = 0; c < header.length; c++) {
      let w = 0;
      for (let r = 0; r < matrix.length; r++) w = MathMax(w, MathMin(matrix[r][c].length, 60));
      widths[c] = w;
    }
    const pad = (s, w) => { const t = s.length > 60 ? apply(stringSlice, s, [0, 59]) + "…" : s; return t + apply(stringRepeat, " ", [MathMax(0, w - t.length)]); };
    const rule = (l, m, r) => { let s = l; for (let c = 0; c < widths.length; c++) s += apply(stringRepeat, "─", [widths[c] + 2]) + (c === widths.length - 1 ? r : m); return s; };
    const row = (cells) => { let s = "│"; for (let c = 0; c < widths.length; c++) s += " " + pad(cells[c], widths[c]) + " │"; return s; };
    let out = rule("┌", "┬", "┐") + "\n" + row(matrix[0]) + "\n" + rule("├", "┼", "┤");
    for (let r = 1; r < matrix.length; r++) out += "\n" + row(matrix[r]);
    return out + "\n" + rule("└", "┴", "┘");
  }

  const counts = create(null), timers = create(null);
  const console = create(null);
  method(console, "log", logAt(""));
  method(console, "info", logAt(""));
  method(console, "debug", logAt("debug"));
  method(console, "warn", logAt("warn"));
  method(console, "error", logAt("error"));
  method(console, "trace", function () { emit("", "Trace: " + formatArgs(argsOf(arguments))); });
  method(console, "dir", function (value) { emit("", displayText(value)); });
  method(console, "table", function (data, columns) {
    let text;
    try { text = data !== null && typeof data === "object" ? tableText(data, columns) : displayText(data); } catch (_) { text = displayText(data); }
    emit("", text);
  });
  method(console, "assert", function (condition) {
    if (condition) return;
    const rest = argsOf(arguments);
    let msg = "";
    for (let i = 1; i < rest.length; i++) msg += (i === 1 ? "" : " ") + displayText(rest[i]);
    emit("error", "Assertion failed" + (msg ? ": " + msg : ""));
  });
  method(console, "count", function (label) {
    const k = label === undefined ? "default" : displayText(label);
    counts[k] = (counts[k] || 0) + 1;
    emit("", k + ": " + counts[k]);
  });
  method(console, "countReset", function (label) { counts[label === undefined ? "default" : displayText(label)] = 0; });
  method(console, "time", function (label) { timers[label === undefined ? "default" : displayText(label)] = DateNow(); });
  function elapsed(label, end) {
    const k = label === undefined ? "default" : displayText(label);
    const t0 = timers[k];
    if (t0 === undefined) { emit("warn", "Timer '" + k + "' does not exist"); return; }
    if (end) delete timers[k];
    emit("", k + ": " + MathRound(DateNow() - t0) + " ms");
  }
  method(console, "timeEnd", function (label) { elapsed(label, true); });
  method(console, "timeLog", function (label) { elapsed(label, false); });
  method(console, "group", function () { const a = argsOf(arguments); if (a.length > 0) emit("", formatArgs(a)); groupIndent += "  "; });
  method(console, "groupCollapsed", function () { const a = argsOf(arguments); if (a.length > 0) emit("", formatArgs(a)); groupIndent += "  "; });
  method(console, "groupEnd", function () { groupIndent = apply(stringSlice, groupIndent, [0, MathMax(0, groupIndent.length - 2)]); });
  freeze(console);
`;
