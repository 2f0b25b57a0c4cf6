/**
 * Answers the unary SidecarLink calls a sidecar sends on its standing Attach stream.
 *
 * A unary call between the sidecar and the orchestrator costs an HTTP/2 stream of its own
 * (headers, trailers, a handler set-up on each side), where a request and a reply on an
 * open stream cost a fraction of that (bench/link-rtt.bench.mjs measures both). A
 * suspension stores its run and a wait claims it on the result's path, so these calls
 * ride the Attach stream as LinkCall messages, answered by LinkReply messages with the
 * same id. Each runs the unary method's own handler (metrics included), with the Attach
 * stream's peer, metadata and signal, and fails the way the method would: a
 * ServiceError's code and message, or "internal" (logged, never the error itself).
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { LinkCall, LinkReplySchema, SidecarLink } from "../../gen/codemode/orchestrator/v1/link_pb.js";
import type { CallContext, ServiceHandlers } from "../../protocol/grpc-service.js";
import { ServiceError } from "../../protocol/service-error.js";
import type { LinkCallMethod } from "../../shared/link-wire.js";
import type { Logger } from "../../shared/logger.js";

/** The methods a LinkCall may carry. */
export type LinkCallHandlers = Pick<Partial<ServiceHandlers<typeof SidecarLink.method>>, LinkCallMethod>;

type Reply = MessageInitShape<typeof LinkReplySchema>;

const failed = (id: bigint, code: string, message: string): Reply => ({ id, response: { case: "error", value: { code, message } } });

export async function answerLinkCall(call: LinkCall, handlers: LinkCallHandlers, ctx: CallContext, log: Logger): Promise<Reply> {
  const request = call.request;
  if (request.case === undefined) return failed(call.id, "invalid_argument", "a link call must name its request");
  const handler = handlers[request.case] as ((req: unknown, ctx: CallContext) => Promise<unknown>) | undefined;
  if (!handler) return failed(call.id, "unimplemented", `${request.case} is not served on the link`);
  try {
    const response = await handler(request.value, ctx);
    return { id: call.id, response: { case: request.case, value: response } } as Reply;
  } catch (err) {
    if (err instanceof ServiceError) return failed(call.id, err.code, err.message);
    log.error({ err, method: request.case }, "handler failed");
    return failed(call.id, "internal", "internal error");
  }
}
