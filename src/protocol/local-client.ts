/**
 * A typed client of a service's unary methods served by handlers in this same process,
 * with no port and no channel: each request and reply is encoded and decoded exactly as
 * it would cross gRPC, so a handler sees the message a remote caller's would be, and the
 * caller gets the reply it would get from a served instance. A ServiceError a handler
 * throws reaches the caller as it is. Streaming methods are not offered.
 */
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type { UnaryMethod } from "./grpc-client.js";
import type { CallContext, ServiceHandlers } from "./grpc-service.js";

type UnaryNames<S extends GenServiceMethods> = { [K in keyof S]: S[K]["methodKind"] extends "unary" ? K : never }[keyof S];

export type LocalClient<S extends GenServiceMethods> = { [K in UnaryNames<S>]: UnaryMethod<S[K]> };

type AnyUnaryHandler = (request: unknown, ctx: CallContext) => Promise<MessageInitShape<DescMessage>>;

export function localClient<S extends GenServiceMethods>(service: GenService<S>, handlers: ServiceHandlers<S>): LocalClient<S> {
  const out: Record<string, unknown> = {};
  for (const method of service.methods) {
    if (method.methodKind !== "unary") continue;
    const handler = (handlers as unknown as Record<string, AnyUnaryHandler>)[method.localName]!;
    out[method.localName] = async (req: MessageInitShape<DescMessage>, opts: { signal?: AbortSignal } = {}) => {
      const request = fromBinary(method.input, toBinary(method.input, create(method.input, req)));
      const ctx: CallContext = { signal: opts.signal ?? new AbortController().signal, peer: "in-process", metadata: new grpc.Metadata() };
      const reply = await handler(request, ctx);
      return fromBinary(method.output, toBinary(method.output, create(method.output, reply)));
    };
  }
  return out as LocalClient<S>;
}
