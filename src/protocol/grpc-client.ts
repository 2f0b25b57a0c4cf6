/**
 * Calls gRPC services typed from their protobuf-es descriptors, so no client is written
 * per method: unary calls are promises, streams async iterables, and a failed call's
 * status is rebuilt as a ServiceError. An AbortSignal given to a call cancels it (at once
 * if it is already aborted) and is let go when the call ends. TLS, mTLS and a bearer token
 * come from ./credentials.ts; the receive windows from ./flow-window.ts; a large tool
 * answer is encoded by ./answer-encoding.ts.
 */
import * as grpc from "@grpc/grpc-js";
import { create, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { clientConnection, type ClientSecurity } from "./credentials.js";
import { CLIENT_WINDOW_OPTIONS } from "./flow-window.js";
import { serviceDefinition } from "./grpc-service.js";
import { ANSWER_ENCODERS } from "./answer-encoding.js";
import { fromGrpcStatus } from "./service-error.js";

type OutDesc<M> = M extends { output: infer O extends DescMessage } ? O : never;
type Out<M> = MessageShape<OutDesc<M>>;

export type UnaryMethod<M> = (
  request: MessageInitShape<M extends { input: infer I extends DescMessage } ? I : never>,
  options?: { signal?: AbortSignal; deadlineMs?: number },
) => Promise<Out<M>>;
export type ServerStreamMethod<M> = (
  request: MessageInitShape<M extends { input: infer I extends DescMessage } ? I : never>,
  options?: { signal?: AbortSignal },
) => AsyncIterable<Out<M>>;
export type BidiMethod<M> = (options?: { signal?: AbortSignal }) => {
  send(message: MessageInitShape<M extends { input: infer I extends DescMessage } ? I : never>): void;
  end(): void;
  messages: AsyncIterable<Out<M>>;
  call: grpc.ClientDuplexStream<unknown, unknown>;
};

export type ServiceClient<S extends GenServiceMethods> = {
  [K in keyof S]: S[K]["methodKind"] extends "unary"
    ? UnaryMethod<S[K]>
    : S[K]["methodKind"] extends "server_streaming"
      ? ServerStreamMethod<S[K]>
      : S[K]["methodKind"] extends "bidi_streaming"
        ? BidiMethod<S[K]>
        : never;
} & { close(): void; channel: grpc.Client };

const clientCtors = new WeakMap<object, grpc.ServiceClientConstructor>();

/**
 * A typed client for `service` at `address`. Errors are rebuilt as ServiceErrors.
 * `security`: TLS (or mTLS) and a bearer token sent with every call; plaintext without.
 */
export function createClient<S extends GenServiceMethods>(
  service: GenService<S>,
  address: string,
  options: grpc.ClientOptions = {},
  security: ClientSecurity = {},
): ServiceClient<S> {
  let Ctor = clientCtors.get(service);
  if (!Ctor) {
    Ctor = grpc.makeGenericClientConstructor(serviceDefinition(service, { encoders: ANSWER_ENCODERS }), service.name);
    clientCtors.set(service, Ctor);
  }
  const connection = clientConnection(security);
  const interceptors = [...(connection.options.interceptors ?? []), ...(options.interceptors ?? [])];
  const clientOptions = { ...CLIENT_WINDOW_OPTIONS, ...connection.options, ...options, ...(interceptors.length > 0 ? { interceptors } : {}) };
  const raw = new Ctor(address, connection.credentials, clientOptions) as unknown as Record<string, (...a: unknown[]) => unknown> & grpc.Client;
  const out: Record<string, unknown> = { close: () => raw.close(), channel: raw };
  for (const method of service.methods) {
    const fn = raw[method.localName]!.bind(raw);
    if (method.methodKind === "unary") {
      out[method.localName] = (req: MessageInitShape<DescMessage>, opts: { signal?: AbortSignal; deadlineMs?: number } = {}) =>
        new Promise((resolve, reject) => {
          const callOpts: grpc.CallOptions = opts.deadlineMs ? { deadline: Date.now() + opts.deadlineMs } : {};
          let detach = () => {};
          const call = fn(create(method.input, req), new grpc.Metadata(), callOpts, (err: grpc.ServiceError | null, res: unknown) => {
            detach();
            if (err) reject(fromGrpcStatus(err.code, err.details || err.message));
            else resolve(res);
          }) as grpc.ClientUnaryCall;
          detach = cancelOn(opts.signal, call);
        });
    } else if (method.methodKind === "server_streaming") {
      out[method.localName] = (req: MessageInitShape<DescMessage>, opts: { signal?: AbortSignal } = {}) => {
        const call = fn(create(method.input, req)) as grpc.ClientReadableStream<unknown>;
        call.once("status", cancelOn(opts.signal, call));
        return rethrowing(call as AsyncIterable<unknown>);
      };
    } else if (method.methodKind === "bidi_streaming") {
      out[method.localName] = (opts: { signal?: AbortSignal } = {}) => {
        const call = fn() as grpc.ClientDuplexStream<unknown, unknown>;
        call.once("status", cancelOn(opts.signal, call));
        return {
          call,
          send: (m: MessageInitShape<DescMessage>) => call.write(create(method.input, m)),
          end: () => call.end(),
          messages: rethrowing(call as AsyncIterable<unknown>),
        };
      };
    }
  }
  return out as ServiceClient<S>;
}

/**
 * Cancels `call` when `signal` aborts, at once if it already has; returns what detaches the
 * listener, called when the call is over. A signal that outlives its calls (one per
 * gateway session, say) would otherwise keep a listener, and through it the whole call,
 * for each call it was given.
 */
function cancelOn(signal: AbortSignal | undefined, call: { cancel(): void }): () => void {
  if (!signal) return () => {};
  if (signal.aborted) {
    call.cancel();
    return () => {};
  }
  const onAbort = () => call.cancel();
  signal.addEventListener("abort", onAbort, { once: true });
  return () => signal.removeEventListener("abort", onAbort);
}

async function* rethrowing<T>(source: AsyncIterable<T>): AsyncIterable<T> {
  try {
    yield* source;
  } catch (err) {
    const e = err as Partial<grpc.ServiceError>;
    if (typeof e.code === "number") throw fromGrpcStatus(e.code, e.details || e.message || "");
    throw err;
  }
}
