/**
 * The drain's shared signals and `linkedSignal` (src/sandbox/exec/drain-signals.ts): a drain
 * touches the calls in flight when it acts and none that start later; a shared signal
 * carries a listener per call without Node's leak warning; a linked signal aborts with the
 * first source's reason and, once done, leaves nothing on a long-lived source (which
 * AbortSignal.any does, shown here so the test fails if Node ever stops doing it and the
 * module's reason to exist goes away).
 */
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { DrainSignals, linkedSignal } from "../../src/sandbox/exec/drain-signals.js";

describe("DrainSignals", () => {
  it("cancels and suspends the calls in flight, not those that start later", () => {
    const drain = new DrainSignals();
    const before = { cancel: drain.cancel, suspend: drain.suspend };
    drain.suspendAll();
    expect(before.suspend.aborted).toBe(true);
    expect(before.cancel.aborted).toBe(false);
    drain.cancelAll("the drain's grace ran out");
    expect(before.cancel.aborted).toBe(true);
    expect(before.cancel.reason).toBe("the drain's grace ran out");
    expect(drain.cancel.aborted).toBe(false);
    expect(drain.suspend.aborted).toBe(false);
  });

  it("takes a listener per call in flight without a leak warning", async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    const drain = new DrainSignals();
    const fns = Array.from({ length: 100 }, () => () => {});
    for (const fn of fns) drain.cancel.addEventListener("abort", fn);
    await new Promise((r) => setImmediate(r));
    process.off("warning", onWarning);
    expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning")).toEqual([]);
    for (const fn of fns) drain.cancel.removeEventListener("abort", fn);
  });
});

describe("linkedSignal", () => {
  it("aborts with the reason of the first source to abort, and detaches from the others", () => {
    const a = new AbortController();
    const b = new AbortController();
    const linked = linkedSignal([a.signal, b.signal]);
    b.abort("b went first");
    expect(linked.signal.reason).toBe("b went first");
    expect(getEventListeners(a.signal, "abort")).toHaveLength(0);
    const already = linkedSignal([a.signal, b.signal]);
    expect(already.signal.aborted).toBe(true);
    expect(already.signal.reason).toBe("b went first");
    expect(getEventListeners(a.signal, "abort")).toHaveLength(0);
  });

  it("leaves nothing on a long-lived source once done, where AbortSignal.any keeps every signal it made", () => {
    const drain = new DrainSignals();
    for (let i = 0; i < 1_000; i++) {
      const call = new AbortController();
      linkedSignal([call.signal, drain.cancel]).done();
    }
    expect(getEventListeners(drain.cancel, "abort")).toHaveLength(0);
    const dependants = (s: AbortSignal) => {
      const key = Object.getOwnPropertySymbols(s).find((k) => k.description === "kDependantSignals");
      return key ? ((s as unknown as Record<symbol, Set<unknown>>)[key]?.size ?? 0) : 0;
    };
    expect(dependants(drain.cancel)).toBe(0);
    for (let i = 0; i < 1_000; i++) AbortSignal.any([new AbortController().signal, drain.cancel]);
    expect(dependants(drain.cancel)).toBe(1_000);
  });
});
