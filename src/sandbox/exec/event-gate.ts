/**
 * The order a segment's events reach the gateway in, when a nested call must wait for the
 * store before it goes out: the run's stored snapshot is invalidated first, so no resume
 * can repeat the call (../suspend/checkpoints.ts). The events the VM sent after that call
 * wait with it, so the stream keeps the VM's order; a call the store did not clear is
 * dropped (its segment is cancelled, unless the VM had already ended while a store outage
 * held the call). With nothing held, an event goes out at once.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ExecEventSchema } from "../../gen/codemode/sandbox/v1/sandbox_pb.js";

type EventInit = NonNullable<MessageInitShape<typeof ExecEventSchema>["event"]>;

export class EventGate {
  private readonly queue: EventInit[] = [];
  /** The latest hold; the events queue until it is over. */
  private holding: Promise<void> | undefined;
  private readonly dropped = new Set<string>();

  constructor(private readonly out: (event: EventInit) => void) {}

  readonly send = (event: EventInit): void => {
    if (this.holding) this.queue.push(event);
    else this.out(event);
  };

  /** Holds nested call `callId`, and what is sent after it, until `cleared` settles: true sends it, anything else drops it. */
  hold(callId: string, cleared: Promise<boolean>): void {
    const held: Promise<void> = cleared
      .then(
        (ok) => ok,
        () => false,
      )
      .then((ok) => {
        if (!ok) this.dropped.add(callId);
        // A later hold (settled after this one) sends what queued behind both.
        if (this.holding !== held) return;
        this.holding = undefined;
        for (const e of this.queue.splice(0)) if (!(e.case === "toolCall" && this.dropped.has(e.value.callId ?? ""))) this.out(e);
      });
    this.holding = held;
  }
}
