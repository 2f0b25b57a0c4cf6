/**
 * Keeps the prelude's functions out of the guest's reach through stack traces. QuickJS-ng
 * supports V8's `Error.prepareStackTrace(error, callSites)`, and a CallSite's
 * `getFunction()` would hand a guest hook the prelude's internal functions (`request`,
 * `run`, `deliver`) for every error made while one is on the stack; calling them forges
 * tool calls or the program's result. So a guest hook must never see the engine's call
 * sites: the prelude captures the engine's accessor before any guest code exists and
 * installs its own non-configurable accessor, and a guest hook gets copies whose
 * `getFunction()` and `getThis()` return undefined, as V8 does for strict code
 * (docs/module-notes.md#srcsandboxguestprelude-stack-guardts).
 *
 * A source fragment spliced into the code-mode and Tool Search preludes after
 * ./prelude-marshal.ts. (The codemode.run prelude installs its own hook:
 * ../surfaces/mcp-run/prelude-stack.ts.)
 */
export const STACK_GUARD_SOURCE = String.raw`
  {
    const hookDesc = getOwnDesc(ErrorCtor, "prepareStackTrace");
    const engineSetHook = hookDesc !== undefined && hasOwn(hookDesc, "set") ? hookDesc.set : undefined;
    let siteProto = null;
    if (typeof engineSetHook === "function") {
      // One probe, before any guest code, finds the engine's CallSite.prototype.
      apply(engineSetHook, ErrorCtor, [function (e, cs) { if (cs.length > 0) siteProto = getProto(cs[0]); return ""; }]);
      try { new ErrorCtor(""); } finally { apply(engineSetHook, ErrorCtor, [undefined]); }
    }
    const realSites = new WeakMap(), weakMapGet = WeakMap.prototype.get, weakMapSet = WeakMap.prototype.set;
    const SafeSiteProto = create(ObjectProto);
    const siteNames = siteProto === null ? [] : Reflect.ownKeys(siteProto);
    for (let i = 0; i < siteNames.length; i++) {
      const name = siteNames[i];
      const d = getOwnDesc(siteProto, name);
      if (typeof name !== "string" || name === "constructor" || d === undefined || !hasOwn(d, "value") || typeof d.value !== "function") continue;
      const real = d.value;
      const fn = function () {
        const site = apply(weakMapGet, realSites, [this]);
        if (site === undefined) throw new TypeErrorCtor("CallSite method called on an incompatible receiver");
        return apply(real, site, []);
      };
      defineProperty(fn, "name", dataDesc(name, false, false, true));
      defineProperty(SafeSiteProto, name, dataDesc(fn, true, false, true));
    }
    for (const name of ["getFunction", "getThis"]) {
      const fn = function () { return undefined; };
      defineProperty(fn, "name", dataDesc(name, false, false, true));
      defineProperty(SafeSiteProto, name, dataDesc(fn, true, false, true));
    }
    let guestHook;
    // Called by the engine (receiver: Error) only while guestHook is a function. The brand
    // checks of prelude-marshal throw and catch engine errors nobody sees; those never run
    // the guest's hook (nothing guest-reachable is called while marshaling).
    const guard = function (err, sites) {
      if (quietStacks > 0) return "";
      const safe = [];
      const n = sites.length;
      for (let i = 0; i < n; i++) {
        const s = create(SafeSiteProto);
        apply(weakMapSet, realSites, [s, sites[i]]);
        defineData(safe, i, s);
      }
      return apply(guestHook, this, [err, safe]);
    };
    const accessors = {
      get prepareStackTrace() { return guestHook; },
      set prepareStackTrace(value) {
        guestHook = value;
        // A non-function goes to the engine as it is: it then formats stacks itself.
        if (engineSetHook !== undefined) apply(engineSetHook, ErrorCtor, [typeof value === "function" && siteProto !== null ? guard : typeof value === "function" ? undefined : value]);
      },
    };
    const own = getOwnDesc(accessors, "prepareStackTrace");
    const desc = create(null);
    desc.get = own.get; desc.set = own.set;
    desc.enumerable = hookDesc !== undefined && hookDesc.enumerable === true;
    desc.configurable = false;
    defineProperty(ErrorCtor, "prepareStackTrace", desc);
  }
`;
