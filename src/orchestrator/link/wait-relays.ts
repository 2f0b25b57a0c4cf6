/**
 * Relays a wait to a sidecar of the run's build. A wait that reaches a sidecar whose build
 * cannot restore the run's snapshot (a rolling upgrade) is passed, while a sidecar of that
 * build is attached, to that sidecar: the origin sends `open` on its link, this picks a
 * target (asking each sidecar's snapshot build once per link, with a BuildQuery), and then
 * carries the target's events and end back to the origin and the origin's cancel to the
 * target, in order. A relay whose target's link ends is ended to its origin as unavailable;
 * one whose origin's link ends is handed back at its target (the run is kept, as a drain
 * keeps it). With no target (none of that build whose pool runs code) the origin is told
 * `unserved` and rebuilds the run by replay itself (docs/replay.md#upgrades).
 */
import { randomUUID } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { WaitRelay, WaitRelaySchema } from "../../gen/codemode/orchestrator/v1/link_pb.js";
import type { Logger } from "../../shared/logger.js";

type RelayInit = MessageInitShape<typeof WaitRelaySchema>;

/** How an attached sidecar is reached, and what is known of it. */
type Peer = {
  sendRelay(msg: RelayInit): void;
  askBuild(requestId: string): void;
  /** Hex engine fingerprint, once it answered a BuildQuery; "" when it could not say. */
  build?: Promise<string> | undefined;
};

/** How long a sidecar has to say its build (its first answer computes it on a thread of its own). */
const BUILD_DEADLINE_MS = 5_000;

type Relay = { origin: string; target?: string; cancelled?: string };

export class WaitRelays {
  private readonly peers = new Map<string, Peer>();
  private readonly relays = new Map<string, Relay>();
  private readonly asked = new Map<string, (build: string) => void>();

  /** `canRunCode`: whether a sidecar's pool can run code now (./sidecar-pools.ts): no other is picked. */
  constructor(
    private readonly log: Logger,
    private readonly canRunCode: (sidecarId: string) => boolean = () => true,
  ) {}

  /** A sidecar whose hello says it serves relays. */
  attach(sidecarId: string, sendRelay: Peer["sendRelay"], askBuild: Peer["askBuild"]): void {
    this.peers.set(sidecarId, { sendRelay, askBuild });
  }

  detach(sidecarId: string): void {
    this.peers.delete(sidecarId);
    for (const [id, r] of this.relays) {
      if (r.target === sidecarId) {
        this.relays.delete(id);
        this.toOrigin(r, id, {
          case: "end",
          value: { code: "unavailable", message: "the sidecar serving this wait for the run's build stopped; call wait again" },
        });
      } else if (r.origin === sidecarId) {
        this.relays.delete(id);
        // The gateway may call wait again elsewhere: the run is kept, not cancelled.
        if (r.target) this.peers.get(r.target)?.sendRelay({ relayId: id, message: { case: "handBack", value: "the sidecar the gateway called is gone" } });
      }
    }
  }

  buildReply(requestId: string, build: Uint8Array): void {
    const done = this.asked.get(requestId);
    this.asked.delete(requestId);
    done?.(Buffer.from(build).toString("hex"));
  }

  /** A message a sidecar sent on its link. */
  onMessage(sidecarId: string, msg: WaitRelay): void {
    const id = msg.relayId;
    const m = msg.message;
    if (m.case === "open") {
      if (this.relays.has(id)) return;
      const relay: Relay = { origin: sidecarId };
      this.relays.set(id, relay);
      void this.open(id, relay, Buffer.from(m.value.snapshotBuild).toString("hex"), msg);
      return;
    }
    const r = this.relays.get(id);
    if (!r) return;
    if (m.case === "cancel" && r.origin === sidecarId) {
      if (r.target) {
        this.relays.delete(id);
        this.peers.get(r.target)?.sendRelay({ relayId: id, message: { case: "cancel", value: m.value } });
      } else r.cancelled = m.value;
    } else if (m.case === "event" && r.target === sidecarId) this.toOrigin(r, id, m);
    else if (m.case === "end" && r.target === sidecarId) {
      this.relays.delete(id);
      this.toOrigin(r, id, m);
    }
  }

  private async open(id: string, relay: Relay, build: string, msg: WaitRelay): Promise<void> {
    const target = await this.find(build, relay.origin);
    if (this.relays.get(id) !== relay) return;
    if (relay.cancelled !== undefined || !target || !this.peers.has(target)) {
      this.relays.delete(id);
      if (relay.cancelled === undefined) this.toOrigin(relay, id, { case: "end", value: { unserved: true } });
      return;
    }
    relay.target = target;
    this.log.info({ relayId: id, origin: relay.origin, target, build: build.slice(0, 12) }, "relaying a wait to a sidecar of the run's build");
    this.peers.get(target)!.sendRelay(msg);
  }

  private toOrigin(r: Relay, relayId: string, message: NonNullable<RelayInit["message"]>): void {
    this.peers.get(r.origin)?.sendRelay({ relayId, message });
  }

  /** An attached sidecar (not `except`) whose snapshot build is `build`, asking those not asked yet. */
  private find(build: string, except: string): Promise<string | undefined> {
    const candidates = [...this.peers].filter(([id]) => id !== except && this.canRunCode(id));
    if (candidates.length === 0 || !build) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      let left = candidates.length;
      const settle = (id: string | undefined) => {
        if (id !== undefined || --left === 0) {
          left = -1;
          resolve(id);
        }
      };
      for (const [id, peer] of candidates) {
        peer.build ??= this.ask(peer);
        void peer.build.then((b) => {
          if (left > 0) settle(b === build ? id : undefined);
        });
      }
    });
  }

  private ask(peer: Peer): Promise<string> {
    const requestId = randomUUID();
    return new Promise<string>((resolve) => {
      const timer = setTimeout(() => {
        this.asked.delete(requestId);
        // Asked again next time: it may have been busy.
        peer.build = undefined;
        resolve("");
      }, BUILD_DEADLINE_MS);
      timer.unref();
      this.asked.set(requestId, (b) => {
        clearTimeout(timer);
        resolve(b);
      });
      peer.askBuild(requestId);
    });
  }
}
