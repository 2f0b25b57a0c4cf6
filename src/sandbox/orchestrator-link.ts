/**
 * The sidecar's standing connection to the orchestrator: an Attach stream that
 * announces this sidecar, exchanges heartbeats, and is re-opened with backoff whenever
 * it drops. Every state change is logged and reported to listeners (the sidecar's health
 * follows it). Unary calls (ResolveRun, RecordSegment) go over the same channel.
 */
import { SidecarLink } from "../gen/codemode/orchestrator/v1/link_pb.js";
import { createClient, type ServiceClient } from "../protocol/grpc-service.js";
import type { Logger } from "../shared/logger.js";

export type LinkState = "connecting" | "up" | "down" | "closed";

const HEARTBEAT_MS = 5_000;
const MAX_BACKOFF_MS = 5_000;

export class OrchestratorLink {
  readonly client: ServiceClient<typeof SidecarLink.method>;
  private state: LinkState = "connecting";
  private closed = false;
  private abort = new AbortController();
  private liveExecs: () => number = () => 0;
  private readonly listeners = new Set<(state: LinkState) => void>();

  constructor(
    readonly address: string,
    private readonly identity: { sidecarId: string; address: string; version: string },
    private readonly log: Logger,
  ) {
    this.client = createClient(SidecarLink, address, {
      "grpc.keepalive_time_ms": 10_000,
      "grpc.keepalive_timeout_ms": 5_000,
      "grpc.max_receive_message_length": 64 * 1024 * 1024,
    });
  }

  get linkState(): LinkState {
    return this.state;
  }

  /** Calls `listener` with every state change from now on. */
  onStateChange(listener: (state: LinkState) => void): void {
    this.listeners.add(listener);
  }

  start(liveExecs: () => number): void {
    this.liveExecs = liveExecs;
    void this.loop();
  }

  private setState(next: LinkState, detail?: Record<string, unknown>): void {
    if (next === this.state) return;
    this.state = next;
    const fields = { orchestrator: this.address, link: next, ...detail };
    if (next === "down") this.log.warn(fields, "orchestrator link down");
    else this.log.info(fields, `orchestrator link ${next}`);
    for (const listener of this.listeners) listener(next);
  }

  private async loop(): Promise<void> {
    let backoff = 100;
    while (!this.closed) {
      this.setState("connecting");
      const started = Date.now();
      try {
        await this.attachOnce();
        if (!this.closed) this.setState("down", { reason: "stream ended" });
      } catch (err) {
        if (this.closed) break;
        this.setState("down", { reason: (err as Error).message });
      }
      if (this.closed) break;
      if (Date.now() - started > 10_000) backoff = 100;
      await new Promise((r) => setTimeout(r, backoff).unref());
      backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
    }
  }

  private async attachOnce(): Promise<void> {
    const ac = new AbortController();
    this.abort = ac;
    const stream = this.client.attach({ signal: ac.signal });
    stream.send({ message: { case: "hello", value: this.identity } });
    const beat = setInterval(() => {
      stream.send({ message: { case: "heartbeat", value: { sentAtMs: BigInt(Date.now()), liveExecs: this.liveExecs() } } });
    }, HEARTBEAT_MS);
    beat.unref();
    try {
      for await (const msg of stream.messages) {
        if (msg.message.case === "welcome") this.setState("up", { orchestratorId: msg.message.value.orchestratorId });
      }
    } finally {
      clearInterval(beat);
    }
  }

  close(): void {
    this.closed = true;
    this.abort.abort();
    this.setState("closed");
    this.client.close();
  }
}
