// The grpc-js service definition a gateway or server team writes for a protobuf-es service
// descriptor: paths and streaming kinds from the descriptor, and protobuf-es toBinary /
// fromBinary as the serializers. Used by the plain gateway (bench/lib/plain-gateway.mjs, for
// its clients) and by the shape's floor (bench/lib/shape-server.mjs, for its services).
import { fromBinary, toBinary } from "@bufbuild/protobuf";

export function plainDefinition(service) {
  const definition = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: (message) => Buffer.from(toBinary(method.input, message)),
      requestDeserialize: (bytes) => fromBinary(method.input, bytes),
      responseSerialize: (message) => Buffer.from(toBinary(method.output, message)),
      responseDeserialize: (bytes) => fromBinary(method.output, bytes),
    };
  }
  return definition;
}
