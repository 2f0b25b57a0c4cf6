/**
 * Serves gRPC services typed from their protobuf-es descriptors, so no handler is written
 * per method (the typed client is ./grpc-client.ts). Handlers are async functions; a
 * thrown ServiceError becomes its gRPC status, anything else becomes INTERNAL (logged, never
 * leaked to the caller). Request bytes that do not decode are INVALID_ARGUMENT before
 * any handler runs, and a server's calls can be counted for a graceful drain. A service
 * may require a bearer token (an Authorizer, checked before anything else, which may name
 * the caller's tenant for the handler); transport credentials come from ./credentials.ts.
 */
import type { Readable } from "node:stream";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type { Logger } from "../shared/logger.js";
import { serverCredentials, type Authorizer, type ServerTls } from "./credentials.js";
import type { DrainTracker } from "./drain.js";
import { ServiceError } from "./service-error.js";

type In<M> = M extends { input: infer I extends DescMessage } ? MessageShape<I> : never;
type OutDesc<M> = M extends { output: infer O extends DescMessage } ? O : never;
type OutInit<M> = MessageInitShape<OutDesc<M>>;

/** Context every handler gets: the call's cancellation, the peer, and the tenant its token named (none: the port has no tenants). */
export type CallContext = { signal: AbortSignal; peer: string; metadata: grpc.Metadata; tenant?: string | undefined };

export type ServerStream<M> = { send(message: OutInit<M>): boolean; signal: AbortSignal };

export type BidiStream<M> = {
  /** Messages from the peer; ends when the peer half-closes. */
  messages: AsyncIterable<In<M>>;
  /**
   * The other way to read the peer (a handler uses one or the other): `onMessage` gets each
   * message in the turn it is decoded, in order; while a promise it returned is pending, the
   * call is paused (later messages wait, and HTTP/2 flow control holds the peer). `onEnd`
   * once, after which nothing is taken: with no argument when the peer half-closed, else the
   * error `messages` would throw (INVALID_ARGUMENT: a message did not decode) or UNAVAILABLE
   * (the call ended first).
   */
  listen(onMessage: (m: In<M>) => void | Promise<void>, onEnd: (err?: ServiceError) => void): void;
  send(message: OutInit<M>): boolean;
  signal: AbortSignal;
  peer: string;
  metadata: grpc.Metadata;
  tenant?: string | undefined;
};

export type ServiceHandlers<S extends GenServiceMethods> = {
  [K in keyof S]: S[K]["methodKind"] extends "unary"
    ? (request: In<S[K]>, ctx: CallContext) => Promise<OutInit<S[K]>>
    : S[K]["methodKind"] extends "server_streaming"
      ? (request: In<S[K]>, stream: ServerStream<S[K]>, ctx: CallContext) => Promise<void>
      : S[K]["methodKind"] extends "bidi_streaming"
        ? (stream: BidiStream<S[K]>) => Promise<void>
        : never;
};

/**
 * A request whose bytes did not decode. grpc-js answers a throwing deserializer with
 * INTERNAL, so the server-side deserializer returns this instead and the adapter
 * answers INVALID_ARGUMENT: malformed input is the caller's contract violation.
 */
class MalformedRequest {
  constructor(readonly details: string) {}
}

/**
 * Decoders used in place of the generated ones, by request message type name (e.g. one
 * that leaves a large field as bytes, ../sandbox/exec/answer-wire.ts). Each must decode exactly
 * what the generated decoder does, and throw where it throws.
 */
export type RequestDecoders = Readonly<Record<string, (bytes: Uint8Array) => unknown>>;

/**
 * Encoders tried before the generated one, by request message type name (a client's, e.g.
 * ./answer-encoding.ts): each gives bytes that decode to exactly the message, or undefined
 * to leave it to the generated encoder.
 */
export type RequestEncoders = Readonly<Record<string, (message: unknown) => Uint8Array | undefined>>;

/**
 * Encoders a server tries on what a handler sends or returns, by response message type
 * name (e.g. ../sandbox/exec/event-wire.ts), before `create` and the generated encoder:
 * each gives exactly the bytes those would, or undefined to leave the message to them.
 */
export type ResponseEncoders = Readonly<Record<string, (init: unknown) => Uint8Array | undefined>>;

/** A response a ResponseEncoders entry already encoded: the serializer passes its bytes on. */
class Encoded {
  constructor(readonly bytes: Uint8Array) {}
}

function decodeRequest(desc: DescMessage, bytes: Buffer, decode?: (bytes: Uint8Array) => unknown): unknown {
  try {
    return decode ? decode(bytes) : fromBinary(desc, bytes);
  } catch (err) {
    return new MalformedRequest(`malformed request: could not decode ${desc.typeName} (${(err as Error).message})`);
  }
}

const malformedStatus = (m: MalformedRequest) => ({ code: grpc.status.INVALID_ARGUMENT, details: m.details });

/** A call's admission: refused with a status, or admitted with the tenant its token named; NO_TENANT, shared: none. */
type Admission = { refused?: Partial<grpc.StatusObject> | undefined; tenant?: string | undefined };
const NO_TENANT: Admission = Object.freeze({});

/** Why `listen` ended when the call ended before the peer half-closed: one shared value (no stack per call). */
const CALL_ENDED_FIRST = new ServiceError("unavailable", "the call ended before the peer half-closed");

/**
 * BidiStream.listen over `call`: each message handed on from its `data` event, the call
 * paused while a promise `onMessage` returned is pending (messages that came meanwhile wait
 * in order), `onEnd` once.
 */
function listenTo(call: Readable, onMessage: (m: unknown) => void | Promise<void>, onEnd: (err?: ServiceError) => void): void {
  const waiting: unknown[] = [];
  let busy = false;
  let ended = false;
  let peerDone = false;
  const finish = (err?: ServiceError) => {
    if (ended) return;
    ended = true;
    waiting.length = 0;
    call.off("data", onData);
    call.off("end", onPeerEnd);
    call.off("close", onClose);
    onEnd(err);
  };
  const take = (m: unknown) => {
    if (m instanceof MalformedRequest) return finish(new ServiceError("invalid_argument", m.details));
    let pending: void | Promise<void>;
    try {
      pending = onMessage(m);
    } catch {
      // A handler's bug must not escape a stream event: the call ends as when the peer stops.
      return finish(new ServiceError("internal", "a message could not be taken"));
    }
    if (!pending) return;
    busy = true;
    call.pause();
    const next = () => {
      busy = false;
      while (!ended && !busy && waiting.length > 0) take(waiting.shift());
      if (ended || busy) return;
      if (peerDone) finish();
      else call.resume();
    };
    pending.then(next, next);
  };
  function onData(m: unknown) {
    if (ended) return;
    if (busy) waiting.push(m);
    else take(m);
  }
  function onPeerEnd() {
    peerDone = true;
    if (!busy) finish();
  }
  function onClose() {
    finish(peerDone ? undefined : CALL_ENDED_FIRST);
  }
  call.on("data", onData);
  call.on("end", onPeerEnd);
  call.on("close", onClose);
}

/**
 * Peer messages of a bidi stream; a message that did not decode ends them with INVALID_ARGUMENT.
 * The call is read without `destroyOnReturn`: a Readable's default async iterator destroys the
 * stream when it ends, so a peer that half-closed while the handler still worked (an
 * ExecSession gateway with no answers to send) destroyed the call, and the result and status
 * the handler then sent never left: the gateway waited for its deadline.
 */
async function* decodedMessages(source: Readable): AsyncIterable<unknown> {
  for await (const m of source.iterator({ destroyOnReturn: false })) {
    if (m instanceof MalformedRequest) throw new ServiceError("invalid_argument", m.details);
    yield m;
  }
}

/**
 * The encoded bytes as a Buffer over the same memory: grpc-js copies a message into its
 * frame anyway, and `Buffer.from(bytes)` copied it once more (a 0.7 MB answer: a fresh
 * 0.7 MB allocation and its page faults on every send).
 */
const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

export function serviceDefinition<S extends GenServiceMethods>(
  service: GenService<S>,
  { decoders = {}, encoders = {} }: { decoders?: RequestDecoders; encoders?: RequestEncoders } = {},
): grpc.ServiceDefinition {
  const def: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    const encode = encoders[method.input.typeName];
    def[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: (m: unknown) => asBuffer(encode?.(m) ?? toBinary(method.input, m as MessageShape<DescMessage>)),
      requestDeserialize: (b: Buffer) => decodeRequest(method.input, b, decoders[method.input.typeName]),
      responseSerialize: (m: unknown) => asBuffer(m instanceof Encoded ? m.bytes : toBinary(method.output, m as MessageShape<DescMessage>)),
      responseDeserialize: (b: Buffer) => fromBinary(method.output, b),
    };
  }
  return def as grpc.ServiceDefinition;
}

function toStatus(err: unknown, log: Logger, method: string): Partial<grpc.StatusObject> {
  if (err instanceof ServiceError) return { code: err.grpcStatus, details: err.message };
  log.error({ err, method }, "handler failed");
  return { code: grpc.status.INTERNAL, details: "internal error" };
}

/** The handler's promise; a handler that throws before returning one rejects it the same way. */
function settle<T>(run: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve) => resolve(run()));
}

/**
 * Why a call's signal aborted: one shared value. `abort()` without a reason makes a new
 * DOMException, stack included, for every call that ends (about 2% of the sidecar's main
 * thread per exec); nothing reads this reason beyond "not a string" (the segment then
 * says the gateway cancelled).
 */
const CALL_ENDED: unknown = Object.freeze({ callEnded: true });

type EndingCall = { cancelled: boolean; on(event: string, fn: () => void): unknown };

/**
 * The call's signal, made on first read (already aborted if the call ended before): a
 * stream's handler reads it at once; most unary handlers never do (BridgeCallback, called
 * once per nested tool call, does not), and a controller made and aborted per call was
 * about 9 µs of the main thread each under the profiler (W2 with BridgeCallback: 183 ms of
 * AbortController work in 20,000 calls).
 */
function lazySignal(call: EndingCall): () => AbortSignal {
  let ac: AbortController | undefined;
  let ended = call.cancelled;
  const end = () => {
    ended = true;
    ac?.abort(CALL_ENDED);
  };
  call.on("cancelled", end);
  call.on("close", end);
  return () => {
    if (!ac) {
      ac = new AbortController();
      if (ended) ac.abort(CALL_ENDED);
    }
    return ac.signal;
  };
}

const callSignal = (call: EndingCall): AbortSignal => lazySignal(call)();

/** A unary call's context; its signal is made only if the handler reads it. */
function unaryContext(call: EndingCall & { getPeer(): string; metadata: grpc.Metadata }, tenant: string | undefined): CallContext {
  const signal = lazySignal(call);
  return {
    get signal() {
      return signal();
    },
    get peer() {
      return call.getPeer();
    },
    metadata: call.metadata,
    tenant,
  };
}

/**
 * Adds a typed implementation of `service` to `server`. With `drain`, every call is
 * counted while it runs, except the standing links (a bidi stream named in `standing`,
 * e.g. the sidecars' Attach). `decoders` replace generated request decoders, and
 * `responseEncoders` encode what handlers send or return in place of `create`. With
 * `authorize`, a call whose metadata it refuses is answered with its error (UNAUTHENTICATED)
 * before the request is looked at, and logged.
 */
export function addService<S extends GenServiceMethods>(
  server: grpc.Server,
  service: GenService<S>,
  handlers: Partial<ServiceHandlers<S>>,
  log: Logger,
  drain?: DrainTracker,
  authorize?: Authorizer,
  {
    standing = ["attach"],
    decoders = {},
    responseEncoders = {},
  }: { standing?: readonly string[]; decoders?: RequestDecoders; responseEncoders?: ResponseEncoders } = {},
): void {
  /** The refusal of a call `authorize` does not admit, or the tenant it named (undefined: none). */
  const admit = (call: { metadata: grpc.Metadata; getPeer(): string }, name: string): Admission => {
    if (!authorize) return NO_TENANT;
    try {
      const tenant = authorize(call.metadata);
      return tenant === undefined ? NO_TENANT : { tenant };
    } catch (err) {
      log.warn({ method: name, peer: call.getPeer(), reason: (err as Error).message }, "refused an unauthenticated call");
      return { refused: toStatus(err, log, name) };
    }
  };
  const impl: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const handler = (handlers as Record<string, unknown>)[method.localName] as ((...a: unknown[]) => Promise<unknown>) | undefined;
    const name = `${service.typeName}/${method.name}`;
    const encodeOut = responseEncoders[method.output.typeName];
    /** What goes to grpc-js for a handler's response `m`: encoded here when an encoder takes it. */
    const outOf = (m: unknown): unknown => {
      const bytes = encodeOut?.(m);
      return bytes ? new Encoded(bytes) : create(method.output, m as MessageInitShape<DescMessage>);
    };
    if (!handler) {
      impl[method.localName] = (call: { emit?: unknown }, cb?: grpc.sendUnaryData<unknown>) => {
        const e = { code: grpc.status.UNIMPLEMENTED, details: `${name} is not implemented yet` };
        if (cb) cb(e);
        else (call as grpc.ServerWritableStream<unknown, unknown>).emit("error", e);
      };
      continue;
    }
    switch (method.methodKind) {
      case "unary":
        impl[method.localName] = (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
          const { refused, tenant } = admit(call, name);
          if (refused) return cb(refused);
          if (call.request instanceof MalformedRequest) return cb(malformedStatus(call.request));
          const leave = drain?.enter();
          const ctx = unaryContext(call, tenant);
          settle(() => handler(call.request, ctx))
            .then(
              (res) => cb(null, outOf(res)),
              (err: unknown) => cb(toStatus(err, log, name)),
            )
            .finally(leave);
        };
        break;
      case "server_streaming":
        impl[method.localName] = (call: grpc.ServerWritableStream<unknown, unknown>) => {
          const { refused, tenant } = admit(call, name);
          if (refused) return void call.emit("error", refused);
          if (call.request instanceof MalformedRequest) return void call.emit("error", malformedStatus(call.request));
          const leave = drain?.enter();
          const signal = callSignal(call);
          const stream = {
            signal,
            send: (m: unknown) => (signal.aborted ? false : call.write(outOf(m))),
          };
          settle(() => handler(call.request, stream, { signal, peer: call.getPeer(), metadata: call.metadata, tenant }))
            .then(
              () => call.end(),
              (err: unknown) => {
                if (!signal.aborted) call.emit("error", toStatus(err, log, name));
              },
            )
            .finally(leave);
        };
        break;
      case "bidi_streaming":
        impl[method.localName] = (call: grpc.ServerDuplexStream<unknown, unknown>) => {
          const { refused, tenant } = admit(call, name);
          if (refused) return void call.emit("error", refused);
          const leave = standing.includes(method.localName) ? undefined : drain?.enter();
          const signal = callSignal(call);
          const stream = {
            messages: decodedMessages(call),
            listen: (onMessage: (m: unknown) => void | Promise<void>, onEnd: (err?: ServiceError) => void) => listenTo(call, onMessage, onEnd),
            signal,
            peer: call.getPeer(),
            metadata: call.metadata,
            tenant,
            send: (m: unknown) => (signal.aborted ? false : call.write(outOf(m))),
          };
          settle(() => handler(stream))
            .then(
              () => call.end(),
              (err: unknown) => {
                if (!signal.aborted) call.emit("error", toStatus(err, log, name));
              },
            )
            .finally(leave);
        };
        break;
      default:
        throw new Error(`${name}: ${method.methodKind} methods are not supported`);
    }
  }
  server.addService(serviceDefinition(service, { decoders }), impl);
}

/** Binds `server` to `address` ("host:port", port 0 allowed), with TLS when given, and resolves the bound port. */
export function bindServer(server: grpc.Server, host: string, port: number, tls?: ServerTls): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(`${host}:${port}`, serverCredentials(tls), (err, bound) => (err ? reject(err) : resolve(bound)));
  });
}

/** Stops accepting calls and waits up to `graceMs` for running calls, then forces. */
export function shutdownServer(server: grpc.Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
