/**
 * Everyday web-platform globals model code expects, with their web semantics:
 * `setTimeout`/`setInterval`/`clearTimeout`/`clearInterval`/`queueMicrotask`,
 * `atob`/`btoa`, `TextEncoder`/`TextDecoder` (UTF-8) and `structuredClone`. (`URL` and
 * `URLSearchParams` come from quickjs-wasi's URL extension, loaded by the worker.)
 *
 * Timers are host timers: each armed timer is pending host work like a tool call (a run
 * does not complete while one is armed; past `timeoutMs` the run suspends and `wait` fires
 * it when due), bounded in number by the host, gone with the VM, and snapshot-safe because
 * the guest keeps its callbacks in its own table keyed by the host's call id. An exception
 * thrown by a timer callback or a microtask fails the run, as it would end a Node process.
 *
 * A source fragment spliced in after ./prelude-marshal.ts; it uses `waiting` and the host
 * functions.
 */
export const WEB_SOURCE = String.raw`
  const Uint8ArrayCtor = Uint8Array, DateCtor = Date, RegExpCtor = RegExp, MapCtor = Map, SetCtor = Set;
  const promiseResolve = Promise.resolve;
  const mapGet = Map.prototype.get, mapSet = Map.prototype.set, mapHas = Map.prototype.has, setAdd = Set.prototype.add;
  const arrayBufferSlice = ArrayBuffer.prototype.slice;
  const TypedArrayProto = getProto(Uint8Array.prototype);
  const typedArraySlice = TypedArrayProto.slice;
  const typedArrayBuffer = getOwnDesc(TypedArrayProto, "buffer").get, typedArrayOffset = getOwnDesc(TypedArrayProto, "byteOffset").get;
  const typedArrayBytes = getOwnDesc(TypedArrayProto, "byteLength").get;
  const dataViewBuffer = getOwnDesc(DataView.prototype, "buffer").get, dataViewOffset = getOwnDesc(DataView.prototype, "byteOffset").get;
  const dataViewBytes = getOwnDesc(DataView.prototype, "byteLength").get;

  function domError(name, message) {
    const e = new ErrorCtor(message);
    defineProperty(e, "name", dataDesc(name, true, false, true));
    return e;
  }
  function reportUncaught(e) { hostSync("uncaught", errorJson(e)); }

  // ---- timers ----
  let nextTimerId = 1;
  const timerTable = create(null);
  function armTimer(id, ms) {
    const entry = timerTable[id];
    const callId = hostAsync("timer", '{"ms":' + ms + "}");
    entry[0] = callId;
    waiting[callId] = [() => fireTimer(id, callId), () => {}];
  }
  function fireTimer(id, callId) {
    const entry = timerTable[id];
    if (entry === undefined || entry[0] !== callId) return;
    if (entry[3] >= 0) armTimer(id, entry[3]);
    else delete timerTable[id];
    try { apply(entry[1], undefined, entry[2]); } catch (e) { reportUncaught(e); }
  }
  function delayOf(ms) {
    let n;
    try { n = NumberCtor(ms); } catch (_) { n = 0; }
    return numIsFinite(n) && n > 0 ? MathMin(MathFloor(n), 2147483647) : 0;
  }
  function schedule(kind, fn, ms, rest, repeat) {
    if (typeof fn !== "function") throw new TypeErrorCtor(kind + " needs a function (strings are not evaluated in code mode)");
    const id = nextTimerId++;
    const delay = delayOf(ms);
    timerTable[id] = [null, fn, rest, repeat ? MathMax(delay, 1) : -1];
    try { armTimer(id, delay); } catch (e) { delete timerTable[id]; throw e; }
    return id;
  }
  function restArgs(list, from) {
    const out = [];
    for (let i = from; i < list.length; i++) defineData(out, i - from, list[i]);
    return out;
  }
  function clearTimer(id) {
    const key = typeof id === "number" ? id : NumberCtor(id);
    const entry = timerTable[key];
    if (entry === undefined) return;
    delete timerTable[key];
    if (entry[0] !== null) { delete waiting[entry[0]]; hostSync("timer_clear", entry[0]); }
  }
  function setTimeout(fn, ms) { return schedule("setTimeout", fn, ms, restArgs(arguments, 2), false); }
  function setInterval(fn, ms) { return schedule("setInterval", fn, ms, restArgs(arguments, 2), true); }
  function clearTimeout(id) { clearTimer(id); }
  function clearInterval(id) { clearTimer(id); }
  function queueMicrotask(fn) {
    if (typeof fn !== "function") throw new TypeErrorCtor("queueMicrotask needs a function");
    thenOf(apply(promiseResolve, PromiseCtor, [undefined]), () => { try { fn(); } catch (e) { reportUncaught(e); } });
  }

  // ---- base64 (forgiving-base64, as browsers do) ----
  const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const B64_INDEX = create(null);
  for (let i = 0; i < 64; i++) B64_INDEX[B64[i]] = i;
  function btoa(data) {
    if (arguments.length === 0) throw new TypeErrorCtor("btoa requires 1 argument");
    const s = typeof data === "string" ? data : displayText(data);
    let out = "";
    for (let i = 0; i < s.length; i += 3) {
      const a = apply(stringCharCodeAt, s, [i]), b = i + 1 < s.length ? apply(stringCharCodeAt, s, [i + 1]) : 0, c = i + 2 < s.length ? apply(stringCharCodeAt, s, [i + 2]) : 0;
      if (a > 255 || b > 255 || c > 255) throw domError("InvalidCharacterError", "btoa: the string contains characters outside of the Latin1 range");
      out += B64[a >> 2] + B64[((a & 3) << 4) | (b >> 4)] + (i + 1 < s.length ? B64[((b & 15) << 2) | (c >> 6)] : "=") + (i + 2 < s.length ? B64[c & 63] : "=");
    }
    return out;
  }
  function atob(data) {
    if (arguments.length === 0) throw new TypeErrorCtor("atob requires 1 argument");
    const raw = typeof data === "string" ? data : displayText(data);
    let s = "";
    for (let i = 0; i < raw.length; i++) { const c = raw[i]; if (c !== " " && c !== "\t" && c !== "\n" && c !== "\f" && c !== "\r") s += c; }
    if (s.length % 4 === 0) { if (s[s.length - 1] === "=") s = apply(stringSlice, s, [0, s[s.length - 2] === "=" ? -2 : -1]); }
    if (s.length % 4 === 1) throw domError("InvalidCharacterError", "atob: the string to be decoded is not correctly encoded");
    let out = "", bits = 0, acc = 0;
    for (let i = 0; i < s.length; i++) {
      const v = B64_INDEX[s[i]];
      if (v === undefined) throw domError("InvalidCharacterError", "atob: the string to be decoded is not correctly encoded");
      acc = (acc << 6) | v;
      bits += 6;
      if (bits >= 8) { bits -= 8; out += stringFromCharCode((acc >> bits) & 255); }
    }
    return out;
  }

  // ---- UTF-8 TextEncoder / TextDecoder ----
  function utf8Bytes(s) {
    const out = new Uint8ArrayCtor(s.length * 3);
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      let c = apply(stringCharCodeAt, s, [i]);
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
        const d = apply(stringCharCodeAt, s, [i + 1]);
        if (d >= 0xdc00 && d <= 0xdfff) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); i++; }
        else c = 0xfffd;
      } else if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
      if (c < 0x80) out[n++] = c;
      else if (c < 0x800) { out[n++] = 0xc0 | (c >> 6); out[n++] = 0x80 | (c & 63); }
      else if (c < 0x10000) { out[n++] = 0xe0 | (c >> 12); out[n++] = 0x80 | ((c >> 6) & 63); out[n++] = 0x80 | (c & 63); }
      else { out[n++] = 0xf0 | (c >> 18); out[n++] = 0x80 | ((c >> 12) & 63); out[n++] = 0x80 | ((c >> 6) & 63); out[n++] = 0x80 | (c & 63); }
    }
    return apply(typedArraySlice, out, [0, n]);
  }
  class TextEncoder {
    get encoding() { return "utf-8"; }
    encode(input) { return utf8Bytes(input === undefined ? "" : typeof input === "string" ? input : displayText(input)); }
    encodeInto(source, destination) {
      const bytes = utf8Bytes(typeof source === "string" ? source : displayText(source));
      let written = 0, read = 0, i = 0;
      const s = typeof source === "string" ? source : displayText(source);
      while (i < s.length) {
        const c = apply(stringCodePointAt, s, [i]);
        const len = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
        if (written + len > destination.length) break;
        for (let k = 0; k < len; k++) destination[written + k] = bytes[written + k];
        written += len;
        const units = c >= 0x10000 ? 2 : 1;
        read += units;
        i += units;
      }
      return { read, written };
    }
  }
  const UTF8_LABELS = create(null);
  UTF8_LABELS["utf-8"] = true; UTF8_LABELS["utf8"] = true; UTF8_LABELS["unicode-1-1-utf-8"] = true;
  function bytesOf(input) {
    if (input === undefined) return new Uint8ArrayCtor(0);
    if (isView(input)) {
      if (brand(typedArrayBytes, input)) return new Uint8ArrayCtor(apply(typedArrayBuffer, input, []), apply(typedArrayOffset, input, []), apply(typedArrayBytes, input, []));
      return new Uint8ArrayCtor(apply(dataViewBuffer, input, []), apply(dataViewOffset, input, []), apply(dataViewBytes, input, []));
    }
    if (brand(arrayBufferByteLength, input)) return new Uint8ArrayCtor(input);
    throw new TypeErrorCtor("TextDecoder.decode needs an ArrayBuffer or an ArrayBufferView");
  }
  class TextDecoder {
    #fatal; #ignoreBOM; #pending; #bomSeen;
    constructor(label, options) {
      const l = label === undefined ? "utf-8" : displayText(label);
      let norm = "";
      for (let i = 0; i < l.length; i++) { const c = l[i]; if (c !== " " && c !== "\t" && c !== "\n") norm += c >= "A" && c <= "Z" ? stringFromCharCode(apply(stringCharCodeAt, c, [0]) + 32) : c; }
      if (!UTF8_LABELS[norm]) throw new RangeErrorCtor("TextDecoder: only utf-8 is supported in code mode, not " + stringify(l));
      this.#fatal = !!optionOf(options, "fatal");
      this.#ignoreBOM = !!optionOf(options, "ignoreBOM");
      this.#pending = [];
      this.#bomSeen = false;
    }
    get encoding() { return "utf-8"; }
    get fatal() { return this.#fatal; }
    get ignoreBOM() { return this.#ignoreBOM; }
    decode(input, options) {
      const stream = !!optionOf(options, "stream");
      const fresh = bytesOf(input);
      const pend = this.#pending;
      const all = new Uint8ArrayCtor(pend.length + fresh.length);
      for (let i = 0; i < pend.length; i++) all[i] = pend[i];
      for (let i = 0; i < fresh.length; i++) all[pend.length + i] = fresh[i];
      let out = "", i = 0;
      if (!this.#bomSeen && !this.#ignoreBOM && all.length >= 3 && all[0] === 0xef && all[1] === 0xbb && all[2] === 0xbf) i = 3;
      if (all.length > 0) this.#bomSeen = true;
      const bad = () => { if (this.#fatal) throw new TypeErrorCtor("TextDecoder: the encoded data was not valid utf-8"); out += "\ufffd"; };
      while (i < all.length) {
        const b = all[i];
        let need = 0, cp = 0, min = 0;
        if (b < 0x80) { out += stringFromCharCode(b); i++; continue; }
        if (b >= 0xc2 && b <= 0xdf) { need = 1; cp = b & 0x1f; min = 0x80; }
        else if (b >= 0xe0 && b <= 0xef) { need = 2; cp = b & 0x0f; min = 0x800; }
        else if (b >= 0xf0 && b <= 0xf4) { need = 3; cp = b & 0x07; min = 0x10000; }
        else { bad(); i++; continue; }
        if (stream && i + need >= all.length) {
          // An incomplete sequence at the end of a stream chunk waits for the next chunk.
          let partial = true;
          for (let k = i + 1; k < all.length; k++) if ((all[k] & 0xc0) !== 0x80) partial = false;
          if (partial) break;
        }
        let j = 1, ok = true;
        for (; j <= need; j++) {
          if (i + j >= all.length) { ok = false; break; }
          const c = all[i + j];
          if ((c & 0xc0) !== 0x80) { ok = false; break; }
          cp = (cp << 6) | (c & 0x3f);
        }
        if (!ok || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) { bad(); i += MathMax(1, j); continue; }
        i += need + 1;
        if (cp >= 0x10000) { cp -= 0x10000; out += stringFromCharCode(0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff)); }
        else out += stringFromCharCode(cp);
      }
      const rest = [];
      for (let k = i; k < all.length; k++) defineData(rest, k - i, all[k]);
      this.#pending = rest;
      if (!stream) { this.#pending = []; this.#bomSeen = false; }
      return out;
    }
  }

  // ---- structuredClone (the structured-serialize types a program can hold) ----
  function cloneError(message) { return domError("DataCloneError", message); }
  function cloneValue(v, memo) {
    const t = typeof v;
    if (t === "function") throw cloneError("structuredClone: a function could not be cloned");
    if (t === "symbol") throw cloneError("structuredClone: a symbol could not be cloned");
    if (v === null || t !== "object") return v;
    if (apply(mapHas, memo, [v])) return apply(mapGet, memo, [v]);
    let out;
    if (brand(dateGetTime, v)) out = new DateCtor(apply(dateGetTime, v, []));
    else if (brand(regexpSource, v)) out = new RegExpCtor(apply(regexpSource, v, []), apply(regexpFlags, v, []));
    else if (brand(arrayBufferByteLength, v)) out = apply(arrayBufferSlice, v, [0]);
    else if (isView(v)) { try { out = apply(typedArraySlice, v, []); } catch (_) { throw cloneError("structuredClone: this view could not be cloned"); } }
    else if (brand(mapSize, v)) {
      out = new MapCtor();
      apply(mapSet, memo, [v, out]);
      apply(mapForEach, v, [(val, key) => { apply(mapSet, out, [cloneValue(key, memo), cloneValue(val, memo)]); }]);
      return out;
    } else if (brand(setSize, v)) {
      out = new SetCtor();
      apply(mapSet, memo, [v, out]);
      apply(setForEach, v, [(val) => { apply(setAdd, out, [cloneValue(val, memo)]); }]);
      return out;
    } else if (protoIs(v, ErrorProto)) {
      const p = errorParts(v);
      out = new ErrorCtor(p[1]);
      defineProperty(out, "name", dataDesc(p[0], true, false, true));
    } else if (protoIs(v, PromiseProto)) throw cloneError("structuredClone: a Promise could not be cloned");
    else if (isArray(v)) {
      out = [];
      apply(mapSet, memo, [v, out]);
      const len = dataOf(v, "length");
      for (let i = 0; i < len; i++) { const d = getOwnDesc(v, i); if (d !== undefined) defineData(out, i, cloneValue(hasOwn(d, "value") ? d.value : v[i], memo)); }
      defineProperty(out, "length", dataDesc(len, true, false, false));
      return out;
    } else {
      out = {};
      apply(mapSet, memo, [v, out]);
      const ks = keysOf(v);
      for (let i = 0; i < ks.length; i++) defineData(out, ks[i], cloneValue(v[ks[i]], memo));
      return out;
    }
    apply(mapSet, memo, [v, out]);
    return out;
  }
  function structuredClone(value) {
    if (arguments.length === 0) throw new TypeErrorCtor("structuredClone requires 1 argument");
    return cloneValue(value, new MapCtor());
  }
`;

/**
 * quickjs-wasi's URL extension has no `URL.prototype.searchParams`; this adds it, live as
 * on the web: the params reflect the URL's current query, and changing them updates the
 * URL. Spliced after WEB_SOURCE; a no-op when the extension is not loaded.
 */
export const URL_SHIM_SOURCE = String.raw`
  if (typeof G.URL === "function" && typeof G.URLSearchParams === "function" && getOwnDesc(G.URL.prototype, "searchParams") === undefined) {
    const URLProto = G.URL.prototype, USP = G.URLSearchParams;
    const searchDesc = getOwnDesc(URLProto, "search");
    const searchGet = searchDesc.get, searchSet = searchDesc.set;
    const uspToString = USP.prototype.toString;
    const weakGet = WeakMap.prototype.get, weakSet = WeakMap.prototype.set;
    const bound = new WeakMap(), iteratorKey = Symbol.iterator;
    // QuickJS checks its interrupt every ~10000 calls and back-edges, not by time, and ada's
    // work on a long query is native: a loop over big params would reach the next check
    // only seconds after its deadline. charge(n) spends about n/64 back-edges, so the engine
    // checks at least once per ~640 KB of query ada handles (a few percent of ada's cost).
    const charge = (n) => { for (let i = n >> 6; i > 0; i--); };
    const uspSize = getOwnDesc(USP.prototype, "size").get;
    // ada converts a second argument even when converting the first threw, and that
    // second error replaces the first: a deadline's uncatchable "interrupted" raised in the
    // first argument's toString became a catchable error. Convert in JavaScript first, so
    // the native methods never run guest code.
    // ToString as the web's binding does it: a Symbol throws a TypeError.
    const toStr = (v) => { if (typeof v === "symbol") throw new TypeErrorCtor("Cannot convert a Symbol value to a string"); return StringCtor(v); };
    const replace = (name, wrapped, native) => {
      defineProperty(wrapped, "length", dataDesc(native.length, false, false, true));
      defineProperty(USP.prototype, name, dataDesc(wrapped, true, false, true));
      if (USP.prototype[iteratorKey] === native) defineProperty(USP.prototype, iteratorKey, dataDesc(wrapped, true, false, true));
    };
    for (const name of ["append", "set", "has", "delete", "get", "getAll"]) {
      const native = USP.prototype[name];
      const wrapped = {
        [name](a, b) {
          if (arguments.length >= 2 && b !== undefined) return apply(native, this, [toStr(a), toStr(b)]);
          if (arguments.length >= 1) return apply(native, this, [toStr(a)]);
          return apply(native, this, []);
        },
      }[name];
      replace(name, wrapped, native);
    }
    for (const name of ["keys", "values", "entries", "forEach", "sort", "toString"]) {
      const native = USP.prototype[name];
      const wrapped = { [name](...args) { charge(apply(uspSize, this, []) << 5); return apply(native, this, args); } }[name];
      replace(name, wrapped, native);
    }
    class BoundSearchParams extends USP {
      #url;
      constructor(url, query) { charge(query.length); super(query); this.#url = url; }
      #sync() { const q = apply(uspToString, this, []); charge(q.length); apply(searchSet, this.#url, [q === "" ? "" : "?" + q]); }
      append(name, value) { super.append(name, value); this.#sync(); }
      delete(name, value) { if (arguments.length > 1) super.delete(name, value); else super.delete(name); this.#sync(); }
      set(name, value) { super.set(name, value); this.#sync(); }
      sort() { super.sort(); this.#sync(); }
    }
    // ada's URLSearchParams takes only a query string; the web also takes pairs and records.
    const uspAppend = USP.prototype.append;
    class URLSearchParams extends USP {
      constructor(init) {
        if (init === undefined || init === null || typeof init !== "object" || init instanceof USP) { super(init === undefined ? "" : init); return; }
        super("");
        if (typeof init[iteratorKey] === "function") {
          for (const pair of init) apply(uspAppend, this, [StringCtor(pair[0]), StringCtor(pair[1])]);
        } else {
          const ks = keysOf(init);
          for (let i = 0; i < ks.length; i++) apply(uspAppend, this, [ks[i], StringCtor(init[ks[i]])]);
        }
      }
    }
    defineProperty(G, "URLSearchParams", dataDesc(URLSearchParams, true, false, true));
    const searchParamsDesc = create(null);
    searchParamsDesc.configurable = true;
    searchParamsDesc.enumerable = true;
    searchParamsDesc.get = getOwnDesc({
      get searchParams() {
        const search = apply(searchGet, this, []);
        const entry = apply(weakGet, bound, [this]);
        if (entry !== undefined && entry[0] === search) return entry[1];
        const params = new BoundSearchParams(this, search);
        apply(weakSet, bound, [this, [search, params]]);
        return params;
      },
    }, "searchParams").get;
    defineProperty(URLProto, "searchParams", searchParamsDesc);
  }
`;
