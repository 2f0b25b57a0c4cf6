/**
 * The sidecar's half of a relayed wait (src/sandbox/suspend/wait-relay.ts) over a fake link:
 * an orchestrator that does not relay is never asked; events and the end reach the origin;
 * a served wait tells a gateway's cancel from a hand-back (the run is kept), and hands back
 * when its events can no longer be sent or its link ends.
 */
import { describe, expect, it } from "vitest";
import type { WaitRelay } from "../../src/gen/codemode/orchestrator/v1/link_pb.js";
import type { OrchestratorLink } from "../../src/sandbox/link/orchestrator-link.js";
import { ServiceError } from "../../src/protocol/service-error.js";
import { silentLogger } from "../../src/shared/logger.js";
import { WaitRelayHub, type ServeRelayed } from "../../src/sandbox/suspend/wait-relay.js";

type Sent = { relayId: string; message: { case: string; value: unknown } };

function fakeLink(takesRelays = true) {
  const sent: Sent[] = [];
  const link = {
    takesRelays,
    up: true,
    sendRelay(m: Sent) {
      if (!link.up) return false;
      sent.push(m);
      return true;
    },
    stateListeners: [] as Array<(state: string) => void>,
    onStateChange(fn: (state: string) => void) {
      link.stateListeners.push(fn);
    },
  } as unknown as OrchestratorLink & { up: boolean; onRelay: (m: WaitRelay) => void; onLinkEnded: () => void; stateListeners: Array<(state: string) => void> };
  return { link, sent };
}

const msg = (relayId: string, m: { case: string; value: unknown }) => ({ relayId, message: m }) as unknown as WaitRelay;
const OPEN = { snapshotBuild: new Uint8Array(32), codeModeRunId: "cm_1", claimToken: "t" };
const never: ServeRelayed = () => new Promise(() => undefined);

describe("WaitRelayHub", () => {
  it("does not relay through an orchestrator whose welcome does not take relays", async () => {
    const { link, sent } = fakeLink(false);
    const hub = new WaitRelayHub(link, never, silentLogger());
    expect(await hub.relay(OPEN, () => undefined, new AbortController().signal)).toBe("unserved");
    expect(sent).toEqual([]);
  });

  it("hands the target's events to the gateway and ends with the target's end", async () => {
    const { link, sent } = fakeLink();
    const hub = new WaitRelayHub(link, never, silentLogger());
    const events: unknown[] = [];
    const served = hub.relay(OPEN, (e) => events.push(e), new AbortController().signal);
    const id = sent[0]!.relayId;
    expect(sent[0]!.message.case).toBe("open");
    link.onRelay(msg(id, { case: "event", value: { event: { case: "output" } } }));
    link.onRelay(msg(id, { case: "event", value: { event: { case: "result" } } }));
    link.onRelay(msg(id, { case: "end", value: {} }));
    expect(await served).toBe("served");
    expect(events).toHaveLength(2);

    // An end with no Result before it (the Result was lost with a link): the gateway is told to wait again.
    const resultless = hub.relay(OPEN, () => undefined, new AbortController().signal);
    link.onRelay(msg(sent.at(-1)!.relayId, { case: "end", value: {} }));
    await expect(resultless).rejects.toMatchObject({ code: "unavailable" });

    const failing = hub.relay(OPEN, () => undefined, new AbortController().signal);
    link.onRelay(msg(sent.at(-1)!.relayId, { case: "end", value: { code: "failed_precondition", message: "no run is open" } }));
    await expect(failing).rejects.toMatchObject({ code: "failed_precondition", message: "no run is open" });

    const unserved = hub.relay(OPEN, () => undefined, new AbortController().signal);
    link.onRelay(msg(sent.at(-1)!.relayId, { case: "end", value: { unserved: true } }));
    expect(await unserved).toBe("unserved");
  });

  it("a gateway's cancel is sent as a cancel; a link that ends fails the relay as unavailable", async () => {
    const { link, sent } = fakeLink();
    const hub = new WaitRelayHub(link, never, silentLogger());
    const ac = new AbortController();
    const cancelled = hub.relay(OPEN, () => undefined, ac.signal);
    ac.abort("the gateway cancelled the wait");
    expect(await cancelled).toBe("served");
    expect(sent.at(-1)!.message.case).toBe("cancel");
    const cut = hub.relay(OPEN, () => undefined, new AbortController().signal);
    link.onLinkEnded();
    await expect(cut).rejects.toBeInstanceOf(ServiceError);
    await expect(cut).rejects.toMatchObject({ code: "unavailable" });
  });

  it("serves a relayed wait with two signals: cancel for a gateway's cancel, handBack when nobody is told of it any more", async () => {
    const { link, sent } = fakeLink();
    const seen: Array<{ cancel: AbortSignal; handBack: AbortSignal; send: (e: never) => void }> = [];
    new WaitRelayHub(
      link,
      (_open, send, signals) =>
        new Promise<void>((resolve) => {
          seen.push({ ...signals, send: send as (e: never) => void });
          signals.cancel.addEventListener("abort", () => resolve());
          signals.handBack.addEventListener("abort", () => resolve());
        }),
      silentLogger(),
    );
    link.onRelay(msg("a", { case: "open", value: OPEN }));
    link.onRelay(msg("b", { case: "open", value: OPEN }));
    link.onRelay(msg("c", { case: "open", value: OPEN }));
    await new Promise((r) => setImmediate(r));
    link.onRelay(msg("a", { case: "cancel", value: "the gateway cancelled the wait" }));
    link.onRelay(msg("b", { case: "handBack", value: "the sidecar the gateway called is gone" }));
    expect([seen[0]!.cancel.aborted, seen[0]!.handBack.aborted]).toEqual([true, false]);
    expect([seen[1]!.cancel.aborted, seen[1]!.handBack.aborted]).toEqual([false, true]);
    await new Promise((r) => setImmediate(r));
    // An event that cannot be sent: nobody hears of the wait, so it keeps the run.
    link.up = false;
    seen[2]!.send({ case: "output" } as never);
    expect([seen[2]!.cancel.aborted, seen[2]!.handBack.aborted]).toEqual([false, true]);
    await new Promise((r) => setImmediate(r));
    const ends = () => sent.filter((m) => m.message.case === "end").map((m) => m.relayId);
    expect(ends()).toEqual(["a", "b"]);
    // Its end goes out once the link is up again (an orchestrator that missed the blip still waits for it).
    link.up = true;
    for (const fn of link.stateListeners) fn("up");
    expect(ends()).toEqual(["a", "b", "c"]);
  });
});
