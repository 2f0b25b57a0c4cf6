/**
 * Waits relayed between sidecars of different builds, the sidecar's half (the
 * orchestrator's is ../../orchestrator/link/wait-relays.ts). As the origin, a wait whose
 * run's snapshot this build cannot restore asks, before rebuilding the run by replay, for a
 * sidecar of the snapshot's build; when one takes it, that sidecar serves the wait under the
 * origin's claim and its events reach the gateway through here. As the target, a relayed
 * wait is served as a gateway's wait is, its events sent back on the link. Answers to the
 * relayed run's calls need nothing of this: a gateway's answer on the origin goes to the
 * orchestrator like any answer for a VM not here (docs/replay.md#upgrades).
 */
import { randomUUID } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { WaitRelay, WaitRelayEnd, WaitRelayOpen, WaitRelayOpenSchema, WaitRelaySchema } from "../../gen/codemode/orchestrator/v1/link_pb.js";
import type { ExecEvent } from "../../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { ExecEventInit } from "../exec/segment.js";
import { SERVICE_ERROR_CODES, ServiceError, type ServiceErrorCode } from "../../protocol/service-error.js";
import type { Logger } from "../../shared/logger.js";
import type { OrchestratorLink } from "../link/orchestrator-link.js";
import { ownSnapshotBuild } from "./own-build.js";
import { CLAIM_LEASE_MS } from "./resume.js";

/**
 * Serves a relayed wait here: as a gateway's Wait would, sending each event. `cancel`: the
 * gateway cancelled it; `handBack`: nobody is told of it any more (its origin or the link is
 * gone): it ends keeping the run, as a drain does.
 */
export type ServeRelayed = (
  open: WaitRelayOpen,
  send: (event: ExecEventInit) => void,
  signals: { cancel: AbortSignal; handBack: AbortSignal },
) => Promise<void>;

/** The longest a relay may go without its end: as long as any wait can take, then the gateway is told to call wait again. */
const RELAY_DEADLINE_MS = CLAIM_LEASE_MS;

type Origin = { event(e: ExecEvent): void; end(end: WaitRelayEnd | ServiceError): void };

export class WaitRelayHub {
  /** Relays this sidecar started, by relay id. */
  private readonly origins = new Map<string, Origin>();
  /** Ends of relayed waits that could not be sent (the link was down), sent when it is up again. */
  private unsentEnds: Array<MessageInitShape<typeof WaitRelaySchema>> = [];
  /** Relayed waits this sidecar serves, by relay id. */
  private readonly served = new Map<string, { cancel: AbortController; handBack: AbortController }>();

  constructor(
    private readonly link: OrchestratorLink,
    private readonly serve: ServeRelayed,
    private readonly log: Logger,
  ) {
    link.onRelay = (m) => this.onMessage(m);
    link.onBuildQuery = ownSnapshotBuild;
    link.onLinkEnded = () => this.linkEnded();
    link.onStateChange((state) => {
      if (state === "up") this.sendUnsentEnds();
    });
  }

  /**
   * Relays a wait to a sidecar whose build is `open.snapshotBuild`: "served" once it ended
   * there (its events went to `send`), "unserved" when no such sidecar took it. Throws the
   * status the wait failed with there.
   */
  relay(open: MessageInitShape<typeof WaitRelayOpenSchema>, send: (e: ExecEvent) => void, signal: AbortSignal): Promise<"served" | "unserved"> {
    // An orchestrator from before relays would never answer: the run is rebuilt here instead.
    if (!this.link.takesRelays) return Promise.resolve("unserved");
    const relayId = randomUUID();
    let sawResult = false;
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(() => {
        // The target keeps the run for a later wait.
        this.link.sendRelay({ relayId, message: { case: "handBack", value: "the relay passed its deadline" } });
        this.origins
          .get(relayId)
          ?.end(new ServiceError("unavailable", "the sidecar of the run's build serving this wait did not finish in time; call wait again"));
      }, RELAY_DEADLINE_MS);
      deadline.unref();
      const done = () => {
        clearTimeout(deadline);
        this.origins.delete(relayId);
        signal.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        done();
        this.link.sendRelay({ relayId, message: { case: "cancel", value: String(signal.reason ?? "the gateway cancelled the wait") } });
        resolve("served");
      };
      this.origins.set(relayId, {
        event: (e) => {
          if (e.event.case === "result") sawResult = true;
          send(e);
        },
        end: (end) => {
          done();
          if (end instanceof ServiceError) reject(end);
          else if (end.unserved) resolve("unserved");
          else if (end.code) reject(new ServiceError(end.code in SERVICE_ERROR_CODES ? (end.code as ServiceErrorCode) : "internal", end.message));
          // A wait ends with its Result: one that did not reach here (lost with a link) is not a wait's end.
          else if (!sawResult)
            reject(new ServiceError("unavailable", "the wait's result was lost on its way from the sidecar of the run's build; call wait again"));
          else resolve("served");
        },
      });
      signal.addEventListener("abort", onAbort, { once: true });
      if (signal.aborted) return onAbort();
      if (!this.link.sendRelay({ relayId, message: { case: "open", value: open } })) {
        done();
        resolve("unserved");
      }
    });
  }

  private onMessage(msg: WaitRelay): void {
    const id = msg.relayId;
    const m = msg.message;
    if (m.case === "event") this.origins.get(id)?.event(m.value);
    else if (m.case === "end") this.origins.get(id)?.end(m.value);
    else if (m.case === "cancel") this.served.get(id)?.cancel.abort(m.value || "the gateway cancelled the wait");
    else if (m.case === "handBack") this.served.get(id)?.handBack.abort(m.value || "the relay ended");
    else if (m.case === "open") this.serveOne(id, m.value);
  }

  private serveOne(relayId: string, open: WaitRelayOpen): void {
    if (this.served.has(relayId)) return;
    const signals = { cancel: new AbortController(), handBack: new AbortController() };
    this.served.set(relayId, signals);
    const log = this.log.child({ relayId, codeModeRunId: open.codeModeRunId });
    log.info("serving a wait relayed from a sidecar of another build");
    const send = (event: ExecEventInit) => {
      // An event that cannot reach its gateway: nobody is told of this wait any more, so it keeps the run.
      if (!this.link.sendRelay({ relayId, message: { case: "event", value: { event } } })) signals.handBack.abort("the link to the orchestrator is down");
    };
    const end = (value: { code?: string; message?: string }) => {
      const m = { relayId, message: { case: "end" as const, value } };
      // Kept for the next link: an orchestrator that did not see the last one end still waits for it.
      if (!this.link.sendRelay(m)) this.unsentEnds.push(m);
    };
    // A relay that cannot even start (a scope that does not read) ends as a failed one does.
    Promise.resolve()
      .then(() => this.serve(open, send, { cancel: signals.cancel.signal, handBack: signals.handBack.signal }))
      .then(
        () => end({}),
        (err: unknown) => {
          const e = err instanceof ServiceError ? err : new ServiceError("internal", `the relayed wait failed: ${(err as Error).message}`);
          if (!(err instanceof ServiceError)) log.error({ err }, "a relayed wait failed");
          end({ code: e.code, message: e.message });
        },
      )
      .finally(() => this.served.delete(relayId));
  }

  /** Ends an orchestrator that outlived a link blip may still wait for (it ignores those of relays it ended). */
  private sendUnsentEnds(): void {
    const ends = this.unsentEnds;
    this.unsentEnds = [];
    for (const m of ends) if (!this.link.sendRelay(m)) this.unsentEnds.push(m);
  }

  /** The link ended: relays on it are over (the orchestrator ends them on the other side too). */
  private linkEnded(): void {
    for (const origin of [...this.origins.values()])
      origin.end(new ServiceError("unavailable", "the link to the orchestrator dropped while a sidecar of the run's build served this wait; call wait again"));
    for (const s of this.served.values()) s.handBack.abort("the link to the orchestrator dropped: the sidecar that relayed this wait is no longer told of it");
  }
}
