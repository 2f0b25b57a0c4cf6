/**
 * The part of the guest prelude that turns guest values into text: JSON for the bridge
 * (tool inputs, json(), the result value) and display text for console/text().
 *
 * Guest code may have patched any built-in before it hands us a value, so this code must
 * run only on intrinsics captured when the prelude starts, before the model's program
 * exists: brand checks, never `instanceof`; own-descriptor reads (an own getter runs once,
 * as JSON.stringify would; no inherited index, accessor or `toJSON` of Object/Array.prototype
 * consulted); `Reflect.apply`, not `.call`. Work is bounded by the data: an array length
 * larger than the bridge could carry is refused at once. All the prelude does after the
 * model's code ran keeps these rules (docs/module-notes.md#srcsandboxguestprelude-marshalts).
 *
 * A source fragment spliced into the prelude's function body; it defines names the rest of
 * the prelude uses (`toJsonText`, `payloadText`, `displayText`, `errorJson`, the intrinsics).
 */
import { MAX_BRIDGE_BYTES } from "../worker/json-bridge.js";

/** Deepest value nesting converted for output, results and tool inputs. */
export const MAX_VALUE_DEPTH = 64;

export const MARSHAL_SOURCE = String.raw`
  const apply = Reflect.apply;
  const create = Object.create, defineProperty = Object.defineProperty, freeze = Object.freeze;
  const keysOf = Object.keys, getOwnDesc = Object.getOwnPropertyDescriptor, getProto = Object.getPrototypeOf;
  const setProto = Object.setPrototypeOf, hasOwn = Object.hasOwn, isArray = Array.isArray;
  const parse = JSON.parse, stringify = JSON.stringify;
  const ObjectProto = Object.prototype, ArrayProto = Array.prototype;
  const ErrorCtor = Error, TypeErrorCtor = TypeError, RangeErrorCtor = RangeError, PromiseCtor = Promise, StringCtor = String;
  const ErrorProto = Error.prototype, PromiseProto = Promise.prototype;
  const promiseThen = PromiseProto.then;
  const dateGetTime = Date.prototype.getTime, dateToISOString = Date.prototype.toISOString;
  const mapForEach = Map.prototype.forEach, setForEach = Set.prototype.forEach;
  const mapSize = getOwnDesc(Map.prototype, "size").get, setSize = getOwnDesc(Set.prototype, "size").get;
  const arrayBufferByteLength = getOwnDesc(ArrayBuffer.prototype, "byteLength").get;
  const regexpSource = getOwnDesc(RegExp.prototype, "source").get, regexpFlags = getOwnDesc(RegExp.prototype, "flags").get;
  const symbolDescription = getOwnDesc(Symbol.prototype, "description").get;
  const errorStackDesc = getOwnDesc(Error.prototype, "stack");
  const errorStack = errorStackDesc !== undefined ? errorStackDesc.get : undefined;
  const isView = ArrayBuffer.isView, numIsFinite = Number.isFinite, numIsNaN = Number.isNaN, isSafeInteger = Number.isSafeInteger;
  const objectIs = Object.is, MathMin = Math.min, MathMax = Math.max, MathFloor = Math.floor;
  const stringSlice = String.prototype.slice, stringRepeat = String.prototype.repeat, stringIndexOf = String.prototype.indexOf;
  const stringCharCodeAt = String.prototype.charCodeAt, stringFromCharCode = String.fromCharCode, stringCodePointAt = String.prototype.codePointAt;
  const MAX_DEPTH = ${MAX_VALUE_DEPTH};

  // Definitions and reads no prototype can change. A descriptor is a fresh null-prototype
  // object: a literal would inherit get/set/value/writable/enumerable/configurable from
  // Object.prototype, which guest code may have set (the definition would then throw, do
  // something else, or run a guest getter with the descriptor, and the value in it, as
  // its receiver).
  function dataDesc(value, writable, enumerable, configurable) {
    const d = create(null);
    d.value = value; d.writable = writable; d.enumerable = enumerable; d.configurable = configurable;
    return d;
  }
  /** Defines an ordinary element/property (as an assignment would), without running any setter. */
  function defineData(obj, key, value) { defineProperty(obj, key, dataDesc(value, true, true, true)); }
  /** An own data property of a value the prelude parsed, or undefined; nothing inherited is read. */
  function ownData(obj, key) {
    if (obj === null || typeof obj !== "object") return undefined;
    const d = getOwnDesc(obj, key);
    return d !== undefined && hasOwn(d, "value") ? d.value : undefined;
  }
  /** A member of a guest options bag, read as a web API would (getters too), except one inherited from Object.prototype. */
  function optionOf(obj, key) {
    if (obj === null || (typeof obj !== "object" && typeof obj !== "function")) return undefined;
    let o = obj;
    for (let i = 0; i < 256 && o !== null && o !== ObjectProto; i++) {
      const d = getOwnDesc(o, key);
      if (d !== undefined) return hasOwn(d, "value") ? d.value : typeof d.get === "function" ? apply(d.get, obj, []) : undefined;
      o = getProto(o);
    }
    return undefined;
  }
  // promise.then on a promise of the prelude's own without consulting the guest: the
  // derived promise's constructor comes from p.constructor[Symbol.species], which guest
  // code can redefine on Promise.prototype / Promise (a constructor that never calls its
  // executor makes then() throw). An own "constructor" with no species makes it %Promise%.
  const speciesShield = freeze(create(null));
  function thenOf(p, onOk, onErr) {
    if (!hasOwn(p, "constructor")) defineProperty(p, "constructor", dataDesc(speciesShield, false, false, false));
    return apply(promiseThen, p, onErr === undefined ? [onOk] : [onOk, onErr]);
  }
  const MAX_CHARS = ${MAX_BRIDGE_BYTES};

  // Engine errors made by a failed brand check are caught here; while one is made, a
  // stack hook of the guest is not called (prelude-stack-guard reads quietStacks), and
  // the engine's stack trace limit is 0: nobody sees the error, and capturing its stack
  // was most of the cost of marshaling a small object (a tool call's input: 80-110 us
  // with stacks, under 30 without). The limit is set through the engine's own accessor,
  // captured here (a guest that redefines Error.stackTraceLimit changes a property, not
  // the engine's limit), and no guest code runs before it is restored.
  let quietStacks = 0;
  const traceLimitDesc = getOwnDesc(ErrorCtor, "stackTraceLimit");
  const traceLimitGet = traceLimitDesc !== undefined && typeof traceLimitDesc.get === "function" ? traceLimitDesc.get : undefined;
  const traceLimitSet = traceLimitGet !== undefined && typeof traceLimitDesc.set === "function" ? traceLimitDesc.set : undefined;
  function quiet() {
    if (quietStacks++ > 0 || traceLimitSet === undefined) return undefined;
    const limit = apply(traceLimitGet, ErrorCtor, []);
    apply(traceLimitSet, ErrorCtor, [0]);
    return limit;
  }
  function loud(limit) {
    if (--quietStacks === 0 && limit !== undefined) apply(traceLimitSet, ErrorCtor, [limit]);
  }
  function passes(getter, v) {
    try { apply(getter, v, []); return true; } catch (_) { return false; }
  }
  function brand(getter, v) {
    const limit = quiet();
    try { return passes(getter, v); } finally { loud(limit); }
  }
  // Which engine type an object is, from its internal slots (never its prototype), for
  // enc: "date", "binary", "map", "set" or "". One quiet section for the four checks (no
  // guest code can run between them: a failed check on a proxy calls no trap).
  function builtinKind(v) {
    if (isView(v)) return "binary";
    const limit = quiet();
    try {
      if (passes(dateGetTime, v)) return "date";
      if (passes(arrayBufferByteLength, v)) return "binary";
      if (passes(mapSize, v)) return "map";
      return passes(setSize, v) ? "set" : "";
    } finally { loud(limit); }
  }
  function protoIs(v, proto) {
    let p = v;
    for (let i = 0; i < 256; i++) {
      p = getProto(p);
      if (p === null) return false;
      if (p === proto) return true;
    }
    return false;
  }
  /** A data property found on the object or its prototypes; accessors read as undefined. */
  function dataOf(obj, key) {
    let o = obj;
    for (let i = 0; i < 256 && o !== null; i++) {
      const d = getOwnDesc(o, key);
      if (d !== undefined) return hasOwn(d, "value") ? d.value : undefined;
      o = getProto(o);
    }
    return undefined;
  }
  /**
   * A toJSON method the value defines itself or has from its class (never one inherited from
   * Object/Array.prototype); an own getter for it runs once, as JSON.stringify's read would.
   */
  function ownToJSON(v) {
    let o = v;
    for (let i = 0; i < 256 && o !== null && o !== ObjectProto && o !== ArrayProto; i++) {
      const d = getOwnDesc(o, "toJSON");
      if (d !== undefined) {
        const f = hasOwn(d, "value") ? d.value : i === 0 && typeof d.get === "function" ? apply(d.get, v, []) : undefined;
        return typeof f === "function" ? f : undefined;
      }
      o = getProto(o);
    }
    return undefined;
  }
  /** An own property's value as JSON.stringify reads it (descriptor d): a getter runs once, on obj. */
  function ownValue(obj, d) {
    return hasOwn(d, "value") ? d.value : typeof d.get === "function" ? apply(d.get, obj, []) : undefined;
  }
  function functionName(f) {
    const n = dataOf(f, "name");
    return typeof n === "string" ? n : "";
  }
  function symbolText(s) {
    const d = apply(symbolDescription, s, []);
    return "Symbol(" + (d === undefined ? "" : d) + ")";
  }
  function errorParts(v) {
    const n = dataOf(v, "name"), m = dataOf(v, "message");
    return [typeof n === "string" ? n : "Error", typeof m === "string" ? m : ""];
  }
  function tooLarge() { return new RangeErrorCtor("value is larger than " + MAX_CHARS + " bytes and cannot cross the bridge"); }

  // JSON for the bridge: the seed's output adapter (non-JSON values become plain data).
  // key: the value's name in its holder, for toJSON (an index stays a number until needed).
  function enc(v, depth, stack, st, key) {
    switch (typeof v) {
      case "string": st.n += v.length; if (st.n > MAX_CHARS) throw tooLarge(); return stringify(v);
      case "number": st.n += 8; return numIsFinite(v) ? stringify(v) : stringify(StringCtor(v));
      case "boolean": st.n += 5; return v ? "true" : "false";
      case "bigint": st.n += 8; return stringify(StringCtor(v));
      case "undefined": return undefined;
      case "symbol": st.n += 8; return stringify(symbolText(v));
      case "function": { st.n += 12; const n = functionName(v); return stringify(n ? "[Function " + n + "]" : "[Function]"); }
    }
    if (v === null) { st.n += 4; return "null"; }
    if (depth >= MAX_DEPTH) return '"[MaxDepth]"';
    for (let s = stack; s !== null; s = s.up) if (s.v === v) return '"[Circular]"';
    const frame = { v, up: stack };
    // An array has none of these slots (nor has a proxy of one): its checks are skipped.
    const array = isArray(v);
    const kind = array ? "" : builtinKind(v);
    if (kind === "date") {
      const t = apply(dateGetTime, v, []);
      return numIsFinite(t) ? stringify(apply(dateToISOString, v, [])) : "null";
    }
    if (kind === "binary") return '"[Binary]"';
    if (kind === "map") {
      if (apply(mapSize, v, []) * 2 > MAX_CHARS) throw tooLarge();
      let out = "[", first = true;
      apply(mapForEach, v, [(val, mapKey) => {
        const k = enc(mapKey, depth + 2, frame, st, 0), x = enc(val, depth + 2, frame, st, 1);
        out += (first ? "[" : ",[") + (k === undefined ? "null" : k) + "," + (x === undefined ? "null" : x) + "]";
        first = false;
      }]);
      return out + "]";
    }
    if (kind === "set") {
      if (apply(setSize, v, []) * 2 > MAX_CHARS) throw tooLarge();
      let out = "[", n = 0;
      apply(setForEach, v, [(val) => {
        const x = enc(val, depth + 1, frame, st, n);
        out += (n === 0 ? "" : ",") + (x === undefined ? "null" : x);
        n++;
      }]);
      return out + "]";
    }
    if (protoIs(v, ErrorProto)) {
      const p = errorParts(v);
      st.n += p[0].length + p[1].length + 20;
      return '{"name":' + stringify(p[0]) + ',"message":' + stringify(p[1]) + "}";
    }
    if (protoIs(v, PromiseProto)) return '"[Promise]"';
    const toJSON = ownToJSON(v);
    if (toJSON !== undefined) return enc(apply(toJSON, v, [typeof key === "number" ? StringCtor(key) : key]), depth + 1, frame, st, key);
    if (array) {
      const ld = getOwnDesc(v, "length");
      const len = ld !== undefined && hasOwn(ld, "value") ? ld.value : 0;
      if (len * 2 > MAX_CHARS - st.n) throw tooLarge();
      let out = "[";
      for (let i = 0; i < len; i++) {
        const d = getOwnDesc(v, i);
        const x = d === undefined ? undefined : enc(ownValue(v, d), depth + 1, frame, st, i);
        st.n += 1;
        if (st.n > MAX_CHARS) throw tooLarge();
        out += (i === 0 ? "" : ",") + (x === undefined ? "null" : x);
      }
      return out + "]";
    }
    const ks = keysOf(v);
    let out = "{", first = true;
    for (let i = 0; i < ks.length; i++) {
      const k = ks[i];
      const d = getOwnDesc(v, k);
      if (d === undefined) continue;
      const x = enc(ownValue(v, d), depth + 1, frame, st, k);
      if (x === undefined) continue;
      st.n += k.length + 2;
      out += (first ? "" : ",") + stringify(k) + ":" + x;
      first = false;
    }
    return out + "}";
  }
  function toJsonText(value) {
    const text = enc(value, 0, null, { n: 0 }, "");
    return text === undefined ? "null" : text;
  }
  // A host request's payload: an object literal of the prelude's whose members are guest
  // values, each serialized as JSON.stringify serializes it alone (a toJSON gets the key "").
  function payloadText(payload) {
    const st = { n: 0 }, ks = keysOf(payload);
    let out = "{", first = true;
    for (let i = 0; i < ks.length; i++) {
      const x = enc(payload[ks[i]], 1, null, st, "");
      if (x === undefined) continue;
      out += (first ? "" : ",") + stringify(ks[i]) + ":" + x;
      first = false;
    }
    return out + "}";
  }

  // Display text for console and text(): like a browser console, and never throws.
  function quoteIf(s, nested) { return nested ? stringify(s) : s; }
  function show(v, depth, stack, nested) {
    switch (typeof v) {
      case "string": return quoteIf(v, nested);
      case "number": return objectIs(v, -0) ? "-0" : StringCtor(v);
      case "boolean": return v ? "true" : "false";
      case "bigint": return StringCtor(v) + "n";
      case "undefined": return "undefined";
      case "symbol": return symbolText(v);
      case "function": { const n = functionName(v); return n ? "[Function: " + n + "]" : "[Function (anonymous)]"; }
    }
    if (v === null) return "null";
    for (let s = stack; s !== null; s = s.up) if (s.v === v) return "[Circular]";
    if (depth >= 6) return isArray(v) ? "[Array]" : "[Object]";
    const frame = { v, up: stack };
    try {
      if (brand(dateGetTime, v)) return numIsFinite(apply(dateGetTime, v, [])) ? apply(dateToISOString, v, []) : "Invalid Date";
      if (brand(regexpSource, v)) return "/" + apply(regexpSource, v, []) + "/" + apply(regexpFlags, v, []);
      if (protoIs(v, ErrorProto)) { const p = errorParts(v); const t = p[1] ? p[0] + ": " + p[1] : p[0]; return nested ? "[" + t + "]" : t; }
      if (protoIs(v, PromiseProto)) return "Promise {}";
      if (isView(v)) return "[Binary]";
      if (brand(mapSize, v)) {
        const parts = [];
        setProto(parts, null);
        apply(mapForEach, v, [(val, key) => { if (parts.length < 100) parts[parts.length] = show(key, depth + 1, frame, true) + " => " + show(val, depth + 1, frame, true); }]);
        return "Map(" + apply(mapSize, v, []) + ") {" + (parts.length ? " " + joinParts(parts, ", ") + " " : "") + "}";
      }
      if (brand(setSize, v)) {
        const parts = [];
        setProto(parts, null);
        apply(setForEach, v, [(val) => { if (parts.length < 100) parts[parts.length] = show(val, depth + 1, frame, true); }]);
        return "Set(" + apply(setSize, v, []) + ") {" + (parts.length ? " " + joinParts(parts, ", ") + " " : "") + "}";
      }
      if (isArray(v)) {
        const ld = getOwnDesc(v, "length");
        const len = ld !== undefined && hasOwn(ld, "value") ? ld.value : 0;
        const parts = [];
        setProto(parts, null);
        const shown = MathMin(len, 100);
        for (let i = 0; i < shown; i++) {
          const d = getOwnDesc(v, i);
          parts[i] = d === undefined ? "<empty>" : hasOwn(d, "value") ? show(d.value, depth + 1, frame, true) : "[Getter]";
        }
        if (len > shown) parts[shown] = "... " + (len - shown) + " more items";
        return "[" + joinParts(parts, ", ") + "]";
      }
      const ks = keysOf(v);
      const parts = [];
      setProto(parts, null);
      for (let i = 0; i < ks.length && i < 100; i++) {
        const k = ks[i];
        let text;
        try {
          const d = getOwnDesc(v, k);
          text = d === undefined ? "undefined" : hasOwn(d, "value") ? show(d.value, depth + 1, frame, true) : "[Getter]";
        } catch (_) { text = "[Unreadable]"; }
        parts[parts.length] = stringify(k) + ": " + text;
      }
      if (ks.length > 100) parts[parts.length] = "... " + (ks.length - 100) + " more keys";
      return "{" + (parts.length ? " " + joinParts(parts, ", ") + " " : "") + "}";
    } catch (_) {
      return "[Unprintable]";
    }
  }
  function joinParts(parts, sep) {
    let out = "";
    for (let i = 0; i < parts.length; i++) out += (i === 0 ? "" : sep) + parts[i];
    return out;
  }
  function displayText(value) {
    try { return show(value, 0, null, false); } catch (_) { return "[Unprintable]"; }
  }
  function errorJson(e) {
    let name = "Error", message = "", stack = "";
    try {
      if (e !== null && (typeof e === "object" || typeof e === "function")) {
        const p = errorParts(e);
        name = p[0];
        message = p[1];
        const own = getOwnDesc(e, "stack");
        let s = own !== undefined && hasOwn(own, "value") ? own.value : undefined;
        if (s === undefined && errorStack !== undefined) { try { s = apply(errorStack, e, []); } catch (_) { s = undefined; } }
        stack = typeof s === "string" ? s : "";
        if (!protoIs(e, ErrorProto)) { name = "Error"; message = "uncaught " + displayText(e); }
      } else {
        message = "uncaught " + displayText(e);
      }
    } catch (_) { message = "uncaught exception"; }
    return '{"name":' + stringify(name) + ',"message":' + stringify(message) + ',"stack":' + stringify(stack) + "}";
  }
`;
