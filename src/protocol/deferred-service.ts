/**
 * A library's gRPC service registered at start but built at its first call. grpc-health-check
 * and @grpc/reflection parse their .proto files with protobufjs when they load and when they
 * are added to a server: main-thread time before the ready line, for services that may be
 * called much later, if ever. Here the server gets each method's path at once, with
 * handlers and (de)serializers that build the library's service on first use, through its
 * own public `addToServer(Pick<Server, "addService">)`, and then delegate to it. Calls
 * behave exactly as the library's; only the first one pays for loading it.
 */
import * as grpc from "@grpc/grpc-js";

type MethodType = "unary" | "serverStream" | "clientStream" | "bidi";
type Built = { definition: grpc.MethodDefinition<unknown, unknown>; handler: (...args: unknown[]) => unknown };

/** A service a library adds with addToServer: its methods' paths and kinds, and how to add it. */
export type DeferredService = {
  /** What the service is, for errors. */
  name: string;
  /** Full method path ("/package.Service/Method") to its kind. */
  methods: Record<string, MethodType>;
  /** Builds the library's service and adds it to `target` (called once, at the first call). */
  addTo: (target: Pick<grpc.Server, "addService">) => void;
};

function kindOf(def: grpc.MethodDefinition<unknown, unknown>): MethodType {
  if (def.requestStream) return def.responseStream ? "bidi" : "clientStream";
  return def.responseStream ? "serverStream" : "unary";
}

/** Builds `service` through a target that records what it adds; throws if a declared method is missing or of another kind. */
function build(service: DeferredService): Map<string, Built> {
  const built = new Map<string, Built>();
  service.addTo({
    addService(definition: grpc.ServiceDefinition, implementation: grpc.UntypedServiceImplementation) {
      for (const [name, def] of Object.entries(definition)) {
        const fn = implementation[name] ?? (typeof def.originalName === "string" ? implementation[def.originalName] : undefined);
        if (typeof fn === "function") built.set(def.path, { definition: def, handler: (fn as (...args: unknown[]) => unknown).bind(implementation) });
      }
    },
  });
  for (const [path, kind] of Object.entries(service.methods)) {
    const b = built.get(path);
    if (!b) throw new Error(`${service.name} did not add ${path}`);
    if (kindOf(b.definition) !== kind) throw new Error(`${service.name} added ${path} as ${kindOf(b.definition)}, expected ${kind}`);
  }
  return built;
}

/**
 * Registers `service`'s methods on `server`; the library's service is built at the first
 * call of any of them. `onBuilt` runs once, right after (the caller hands it state it kept
 * meanwhile). A library that cannot be built fails the call with INTERNAL and the reason;
 * the next call tries again.
 */
export function addDeferred(server: grpc.Server, service: DeferredService, onBuilt?: () => void): void {
  let built: Map<string, Built> | undefined;
  /** The built method, or why the service cannot be built (tried again at the next call). */
  const method = (path: string): Built | Error => {
    if (!built) {
      try {
        built = build(service);
      } catch (err) {
        return err instanceof Error ? err : new Error(String(err));
      }
      onBuilt?.();
    }
    return built.get(path)!;
  };
  for (const [path, kind] of Object.entries(service.methods)) {
    const handler = (call: grpc.ServerUnaryCall<unknown, unknown> & grpc.ServerDuplexStream<unknown, unknown>, callback?: grpc.sendUnaryData<unknown>) => {
      const target = method(path);
      if (target instanceof Error) {
        const status = { code: grpc.status.INTERNAL, details: `${service.name} is unavailable: ${target.message}` };
        if (callback) callback(status);
        else call.emit("error", status);
        return;
      }
      target.handler(call, callback);
    };
    server.register(
      path,
      handler as grpc.UntypedHandleCall,
      (value: unknown) => (method(path) as Built).definition.responseSerialize(value),
      // A unary request is read before the handler runs: a service that cannot be built
      // leaves the bytes as they are, and the handler reports why.
      (bytes: Buffer) => {
        const target = method(path);
        return target instanceof Error ? bytes : target.definition.requestDeserialize(bytes);
      },
      kind,
    );
  }
}
