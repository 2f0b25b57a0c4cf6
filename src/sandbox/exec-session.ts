/**
 * ExecSession: an Exec or a Wait whose nested calls the gateway answers on the same
 * stream. The first message starts the segment exactly as Exec or Wait would (the same
 * handlers, so the same checks, limits, drain and metrics); every later message is an
 * answer, taken exactly as BridgeCallback takes one (the same handler: validation, live
 * delivery, routing to a suspended run or another sidecar), in the turn it is decoded and
 * in the order it came. An answer that is refused comes back as an AnswerRefused event with
 * the status BridgeCallback would have failed with; the segment goes on. Compared with a
 * BridgeCallback call per answer, this saves a gRPC round trip per nested call.
 */
import type { ExecSessionRequest, Sandbox } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { ServiceHandlers } from "../protocol/grpc-service.js";
import { ServiceError } from "../protocol/service-error.js";

type Handlers = Partial<ServiceHandlers<typeof Sandbox.method>>;
type Start = Extract<ExecSessionRequest["message"], { case: "exec" | "wait" }>;

/** Answers taken but not yet settled (routed ones wait for the orchestrator) past which the stream pauses. */
const MAX_UNSETTLED = 16;
const SETTLED = Promise.resolve();
const ignore = () => undefined;

export function execSessionHandler(handlers: Handlers): NonNullable<Handlers["execSession"]> {
  return (stream) =>
    new Promise<void>((resolve, reject) => {
      const ctx = { signal: stream.signal, peer: stream.peer, metadata: stream.metadata, tenant: stream.tenant };
      const refuse = (callId: string, code: string, message: string) => stream.send({ event: { case: "answerRefused", value: { callId, code, message } } });
      let start: Start | undefined;
      /** The segment's handler returned (or the first message was refused): later messages are dropped. */
      let ended = false;
      /** The last answer taken, until it settled: the next one is taken after it, as one reader taking them in turn would. */
      let last: Promise<void> | undefined;
      let unsettled = 0;

      const takeAnswer = (m: ExecSessionRequest["message"]): Promise<void> => {
        if (ended) return SETTLED;
        if (m.case !== "answer") {
          refuse("", "invalid_argument", "after its first message, an ExecSession carries only answers");
          return SETTLED;
        }
        const req = m.value.scope ? m.value : { ...m.value, scope: start!.value.scope };
        const refused = (err: unknown) => {
          const e = err instanceof ServiceError ? err : new ServiceError("internal", "the answer could not be taken");
          refuse(req.callId, e.code, e.message);
        };
        // The handler runs at once, up to the answer's delivery to its VM (or to its routing).
        try {
          return handlers.bridgeCallback!(req, ctx).then(ignore, refused);
        } catch (err) {
          refused(err);
          return SETTLED;
        }
      };

      const onAnswer = (m: ExecSessionRequest["message"]): Promise<void> | undefined => {
        const taken = last ? last.then(() => takeAnswer(m)) : takeAnswer(m);
        last = taken;
        unsettled++;
        void taken.then(() => {
          unsettled--;
          if (last === taken) last = undefined;
        });
        return unsettled > MAX_UNSETTLED ? taken : undefined;
      };

      stream.listen(
        (msg) => {
          if (start) return ended ? undefined : onAnswer(msg.message);
          if (ended) return;
          const first = msg.message;
          if (first.case !== "exec" && first.case !== "wait") {
            ended = true;
            return reject(new ServiceError("invalid_argument", "the first message of an ExecSession is an exec or a wait"));
          }
          start = first;
          const segment = { send: stream.send, signal: stream.signal };
          new Promise<void>((r) => r(first.case === "exec" ? handlers.exec!(first.value, segment, ctx) : handlers.wait!(first.value, segment, ctx)))
            .finally(() => {
              ended = true;
            })
            .then(resolve, reject);
        },
        (err) => {
          // Before a first message: the peer half-closed (nothing to do), sent bytes that do not decode, or the call ended.
          if (start || ended) return;
          ended = true;
          if (err) reject(err);
          else resolve();
        },
      );
    });
}
