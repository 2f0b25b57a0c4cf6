/**
 * The sidecar's unary SidecarLink calls on its standing Attach stream.
 *
 * When the orchestrator's welcome says it takes them, ResolveRun, SuspendRun, ClaimRun,
 * ReleaseRun and RouteToolResult go as LinkCall messages on the open stream and come back
 * as LinkReply messages with the same id (../../orchestrator/link/link-calls.ts says why: a
 * fraction of a unary call's cost, on the path of every suspension and every wait). They
 * fail the way the unary calls do, so callers and their retries see no difference: the
 * orchestrator's ServiceError as it was thrown, and "unavailable" when the stream ends
 * before the reply, the deadline passes or the caller cancels (a unary call's
 * DEADLINE_EXCEEDED and CANCELLED read as "unavailable" too).
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { LinkCallSchema, LinkReply, SidecarLink } from "../../gen/codemode/orchestrator/v1/link_pb.js";
import type { ServiceClient } from "../../protocol/grpc-client.js";
import { SERVICE_ERROR_CODES, ServiceError, type ServiceErrorCode } from "../../protocol/service-error.js";
import { LINK_CALL_METHODS, type LinkCallMethod } from "../../shared/link-wire.js";

/** The link calls a sidecar makes, typed as the unary client's. */
export type LinkRpc = Pick<ServiceClient<typeof SidecarLink.method>, LinkCallMethod>;
type CallOptions = { deadlineMs?: number; signal?: AbortSignal };

type InFlight = { method: LinkCallMethod; resolve: (value: unknown) => void; reject: (err: Error) => void; timer?: NodeJS.Timeout; done?: () => void };

const LINK_CLOSED = "the orchestrator link closed before the call was answered";

function codeOf(name: string): ServiceErrorCode {
  return Object.hasOwn(SERVICE_ERROR_CODES, name) ? (name as ServiceErrorCode) : "internal";
}

/** The calls in flight on one Attach stream. */
export class StreamCalls {
  private nextId = 1n;
  private readonly inFlight = new Map<bigint, InFlight>();
  private closed = false;

  constructor(private readonly send: (call: MessageInitShape<typeof LinkCallSchema>) => void) {}

  call(method: LinkCallMethod, request: unknown, opts: CallOptions = {}): Promise<unknown> {
    if (this.closed) return Promise.reject(new ServiceError("unavailable", LINK_CLOSED));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const entry: InFlight = { method, resolve, reject };
      this.inFlight.set(id, entry);
      if (opts.deadlineMs !== undefined && opts.deadlineMs > 0) {
        entry.timer = setTimeout(
          () => this.settle(id, new ServiceError("unavailable", `the orchestrator did not answer ${method} within ${opts.deadlineMs} ms`)),
          opts.deadlineMs,
        );
      }
      const signal = opts.signal;
      if (signal) {
        const onAbort = () => this.settle(id, new ServiceError("unavailable", `${method} was cancelled`));
        if (signal.aborted) return onAbort();
        signal.addEventListener("abort", onAbort, { once: true });
        entry.done = () => signal.removeEventListener("abort", onAbort);
      }
      try {
        this.send({ id, request: { case: method, value: request } } as MessageInitShape<typeof LinkCallSchema>);
      } catch {
        this.settle(id, new ServiceError("unavailable", LINK_CLOSED));
      }
    });
  }

  /** A reply from the orchestrator; one for a call that already ended (its deadline passed) is dropped. */
  reply(reply: LinkReply): void {
    const entry = this.inFlight.get(reply.id);
    if (!entry) return;
    const r = reply.response;
    if (r.case === "error") this.settle(reply.id, new ServiceError(codeOf(r.value.code), r.value.message));
    else if (r.case === entry.method) this.settle(reply.id, undefined, r.value);
    else this.settle(reply.id, new ServiceError("internal", `the orchestrator answered ${entry.method} with ${r.case ?? "nothing"}`));
  }

  /** The stream ended: every call still in flight fails as unavailable (its caller may retry it). */
  close(): void {
    this.closed = true;
    for (const id of [...this.inFlight.keys()]) this.settle(id, new ServiceError("unavailable", LINK_CLOSED));
  }

  private settle(id: bigint, err: Error | undefined, value?: unknown): void {
    const entry = this.inFlight.get(id);
    if (!entry) return;
    this.inFlight.delete(id);
    clearTimeout(entry.timer);
    entry.done?.();
    if (err) entry.reject(err);
    else entry.resolve(value);
  }
}

/**
 * The link calls, on `streamCalls()` while it gives one (the link is up and its
 * orchestrator takes calls), else as unary calls on `client`.
 */
export function linkRpc(client: LinkRpc, streamCalls: () => StreamCalls | undefined): LinkRpc {
  const via =
    (method: LinkCallMethod) =>
    (request: unknown, opts?: CallOptions): Promise<unknown> => {
      const calls = streamCalls();
      return calls ? calls.call(method, request, opts) : (client[method] as (r: unknown, o?: CallOptions) => Promise<unknown>)(request, opts);
    };
  return Object.fromEntries(LINK_CALL_METHODS.map((method) => [method, via(method)])) as unknown as LinkRpc;
}
