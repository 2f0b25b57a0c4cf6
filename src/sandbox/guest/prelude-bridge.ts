/**
 * The guest side of the host bridge, shared by every surface's prelude: `request(op,
 * payload)` sends a host operation and returns a promise its answer settles, `deliver` is
 * how the host settles it (by call id; the empty id asks for the program's settlement after
 * a restore; a large answer may be parsed ahead, ../worker/staged-answers.ts), and `run`
 * starts the program once and reports how it settled. Spliced into a prelude after
 * MARSHAL_SOURCE: BRIDGE_SOURCE first (`method`, `then`, `waiting`, `request`, `deliver`),
 * RUN_SOURCE last (it returns [deliver, run, boot] to the host; `boot()`, called once before
 * the program runs, reads the run's catalog and context).
 */

/** The staged-answer modes of `deliver`, and why a value is held: docs/module-notes.md#srcsandboxguestprelude-bridgets. */
export const EARLY_SOURCE = String.raw`
  const early = create(null);
  let held;
  function parsedAhead(id, json, mode, awaited) {
    if (mode === 1) { if (awaited) early[id] = json; return true; }
    if (mode === 2) { delete early[id]; return true; }
    if (mode === 5) { held = undefined; return true; }
    return false;
  }
  function answerValue(id, json, mode) {
    const ahead = early[id];
    if (ahead !== undefined) delete early[id];
    if (ahead === undefined || (mode !== 3 && mode !== 4)) return json === "" ? undefined : parse(json);
    if (mode === 4) held = ahead;
    return ahead;
  }
`;

export const BRIDGE_SOURCE = String.raw`
  function method(obj, name, fn) { defineProperty(obj, name, dataDesc(fn, false, true, false)); }
  function then(p, onOk, onErr) { return thenOf(p, onOk, onErr); }

  const waiting = create(null);
  const promiseReject = Promise.reject;
  function request(op, payload) {
    let id;
    try { id = hostAsync(op, payloadText(payload)); } catch (e) { return apply(promiseReject, PromiseCtor, [e]); }
    return new PromiseCtor((resolve, reject) => { waiting[id] = [resolve, reject]; });
  }
  // "" until the program settled, then "1" + value JSON or "0" + error JSON.
  let settlement = "";
  ${EARLY_SOURCE}
  function deliver(id, ok, json, mode) {
    if (id === "") return settlement;
    const entry = waiting[id];
    if (parsedAhead(id, json, mode, entry !== undefined)) return true;
    if (entry === undefined) return false;
    delete waiting[id];
    if (ok) { entry[0](answerValue(id, json, mode)); return true; }
    const data = parse(json);
    const message = ownData(data, "message"), name = ownData(data, "name");
    const err = new ErrorCtor(typeof message === "string" ? message : "");
    if (typeof name === "string" && name) defineProperty(err, "name", dataDesc(name, true, false, true));
    entry[1](err);
    return true;
  }
`;

export const RUN_SOURCE = String.raw`
  function settle(ok, text) {
    if (settlement !== "") return;
    settlement = (ok ? "1" : "0") + text;
    hostSync(ok ? "result" : "error", text);
  }
  let started = false;
  function run(cell) {
    if (started) return;
    started = true;
    let p;
    try { p = cell(); } catch (e) { settle(false, errorJson(e)); return; }
    then(p, (v) => {
      let text;
      try { text = toJsonText(v); } catch (e) { settle(false, errorJson(e)); return; }
      settle(true, text);
    }, (e) => { settle(false, errorJson(e)); });
  }
  return [deliver, run, boot];
`;
