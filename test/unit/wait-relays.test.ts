/**
 * The orchestrator's half of a relayed wait (src/orchestrator/link/wait-relays.ts): which
 * sidecar it picks, what the origin hears when none is of the build or the target goes
 * away, and that a cancel reaches the target.
 */
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { WaitRelaySchema, type WaitRelay } from "../../src/gen/codemode/orchestrator/v1/link_pb.js";
import { WaitRelays } from "../../src/orchestrator/link/wait-relays.js";
import { silentLogger } from "../../src/shared/logger.js";

const OLD = new Uint8Array(32).fill(1);
const NEW = new Uint8Array(32).fill(2);

type Sent = { relays: Array<Record<string, unknown>>; asked: string[] };

function hub() {
  const relays = new WaitRelays(silentLogger());
  const sent = new Map<string, Sent>();
  const attach = (id: string) => {
    const s: Sent = { relays: [], asked: [] };
    sent.set(id, s);
    relays.attach(
      id,
      (m) => s.relays.push(m as Record<string, unknown>),
      (requestId) => s.asked.push(requestId),
    );
    return s;
  };
  const msg = (relayId: string, message: WaitRelay["message"]): WaitRelay => create(WaitRelaySchema, { relayId, message });
  return { relays, attach, msg };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("WaitRelays", () => {
  it("asks each other sidecar its build once, and opens the relay at the one whose build matches", async () => {
    const { relays, attach, msg } = hub();
    const origin = attach("new-1");
    const other = attach("new-2");
    const target = attach("old-1");
    relays.onMessage("new-1", msg("r1", { case: "open", value: { snapshotBuild: OLD, codeModeRunId: "cm_1", claimToken: "t" } as never }));
    expect(origin.asked).toEqual([]);
    expect(other.asked).toHaveLength(1);
    expect(target.asked).toHaveLength(1);
    relays.buildReply(other.asked[0]!, NEW);
    relays.buildReply(target.asked[0]!, OLD);
    await tick();
    expect(target.relays).toHaveLength(1);
    expect(target.relays[0]).toMatchObject({ relayId: "r1", message: { case: "open" } });
    // Events and the end go back to the origin, in order; nothing reaches the other sidecar.
    relays.onMessage("old-1", msg("r1", { case: "event", value: {} as never }));
    relays.onMessage("old-1", msg("r1", { case: "end", value: {} as never }));
    expect(origin.relays.map((m) => (m.message as { case: string }).case)).toEqual(["event", "end"]);
    expect(other.relays).toEqual([]);
    // Builds are asked once per link: a second relay needs no question.
    relays.onMessage("new-1", msg("r2", { case: "open", value: { snapshotBuild: OLD } as never }));
    await tick();
    expect(target.asked).toHaveLength(1);
    expect(target.relays.at(-1)).toMatchObject({ relayId: "r2", message: { case: "open" } });
  });

  it("tells the origin `unserved` when no other sidecar has the build", async () => {
    const { relays, attach, msg } = hub();
    const origin = attach("new-1");
    const other = attach("new-2");
    relays.onMessage("new-1", msg("r1", { case: "open", value: { snapshotBuild: OLD } as never }));
    relays.buildReply(other.asked[0]!, NEW);
    await tick();
    expect(origin.relays).toEqual([{ relayId: "r1", message: { case: "end", value: { unserved: true } } }]);
  });

  it("ends the relay as unavailable when its target detaches, and hands it back at the target when its origin does", async () => {
    const { relays, attach, msg } = hub();
    const origin = attach("new-1");
    const target = attach("old-1");
    relays.onMessage("new-1", msg("r1", { case: "open", value: { snapshotBuild: OLD } as never }));
    relays.buildReply(target.asked[0]!, OLD);
    await tick();
    relays.detach("old-1");
    expect(origin.relays.at(-1)).toMatchObject({ relayId: "r1", message: { case: "end", value: { code: "unavailable" } } });

    const target2 = attach("old-2");
    relays.onMessage("new-1", msg("r2", { case: "open", value: { snapshotBuild: OLD } as never }));
    relays.buildReply(target2.asked[0]!, OLD);
    await tick();
    // The origin is gone: the target keeps the run for a later wait.
    relays.detach("new-1");
    expect(target2.relays.at(-1)).toMatchObject({ relayId: "r2", message: { case: "handBack" } });
  });

  it("passes the origin's cancel to the target, and takes no event from a sidecar that is not the target", async () => {
    const { relays, attach, msg } = hub();
    const origin = attach("new-1");
    const target = attach("old-1");
    const stranger = attach("new-2");
    relays.onMessage("new-1", msg("r1", { case: "open", value: { snapshotBuild: OLD } as never }));
    relays.buildReply(target.asked[0]!, OLD);
    relays.buildReply(stranger.asked[0]!, NEW);
    await tick();
    relays.onMessage("new-2", msg("r1", { case: "event", value: {} as never }));
    expect(origin.relays).toEqual([]);
    relays.onMessage("new-1", msg("r1", { case: "cancel", value: "the gateway cancelled the wait" }));
    expect(target.relays.at(-1)).toMatchObject({ relayId: "r1", message: { case: "cancel", value: "the gateway cancelled the wait" } });
  });
});
