/**
 * ExecSession: an Exec or a Wait whose nested calls the gateway answers on the same
 * stream. The first message starts the segment exactly as Exec or Wait would (the same
 * handlers, so the same checks, limits, drain and metrics); every later message is an
 * answer, taken exactly as BridgeCallback takes one (the same handler: validation, live
 * delivery, routing to a suspended run or another sidecar). An answer that is refused
 * comes back as an AnswerRefused event with the status BridgeCallback would have failed
 * with; the segment goes on. Compared with a BridgeCallback call per answer, this saves a
 * gRPC round trip per nested call.
 */
import type { Sandbox } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { ServiceHandlers } from "../protocol/grpc-service.js";
import { ServiceError } from "../protocol/service-error.js";

type Handlers = Partial<ServiceHandlers<typeof Sandbox.method>>;

export function execSessionHandler(handlers: Handlers): NonNullable<Handlers["execSession"]> {
  return async (stream) => {
    const messages = stream.messages[Symbol.asyncIterator]();
    const first = await messages.next();
    if (first.done) return;
    const start = first.value.message;
    if (start.case !== "exec" && start.case !== "wait") {
      throw new ServiceError("invalid_argument", "the first message of an ExecSession is an exec or a wait");
    }
    const ctx = { signal: stream.signal, peer: stream.peer, metadata: stream.metadata };
    const refuse = (callId: string, code: string, message: string) => stream.send({ event: { case: "answerRefused", value: { callId, code, message } } });
    let ended = false;
    const answers = (async () => {
      for (;;) {
        let next: IteratorResult<(typeof first)["value"]>;
        try {
          next = await messages.next();
        } catch {
          return; // the call ended (cancelled, or a message that did not decode)
        }
        if (next.done || ended) return;
        const m = next.value.message;
        if (m.case !== "answer") {
          refuse("", "invalid_argument", "after its first message, an ExecSession carries only answers");
          continue;
        }
        const req = m.value.scope ? m.value : { ...m.value, scope: start.value.scope };
        try {
          await handlers.bridgeCallback!(req, ctx);
        } catch (err) {
          const e = err instanceof ServiceError ? err : new ServiceError("internal", "the answer could not be taken");
          refuse(req.callId, e.code, e.message);
        }
      }
    })();
    const segment = { send: stream.send, signal: stream.signal };
    try {
      if (start.case === "exec") await handlers.exec!(start.value, segment, ctx);
      else await handlers.wait!(start.value, segment, ctx);
    } finally {
      ended = true;
      void answers;
    }
  };
}
