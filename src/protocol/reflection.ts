/**
 * gRPC server reflection (`@grpc/reflection`, v1 and v1alpha) for the public services of
 * a server, so `grpcurl -plaintext HOST:PORT list` and `describe` work without .proto
 * files. The descriptors come from the protobuf-es files in src/gen (each service's file
 * and its imports), not from proto/ at run time.
 *
 * The library loads protobufjs and parses its reflection .proto twice per server it is
 * added to, so each server's reflection is built at its first reflection call
 * (./deferred-service.ts).
 */
import type * as grpc from "@grpc/grpc-js";
import { createRequire } from "node:module";
import { toBinary } from "@bufbuild/protobuf";
import type { DescFile, DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ReflectionService } from "@grpc/reflection";
import { addDeferred } from "./deferred-service.js";

type PackageDefinition = ConstructorParameters<typeof ReflectionService>[0];
const require = createRequire(import.meta.url);

function withImports(file: DescFile, into: Map<string, DescFile>): void {
  if (into.has(file.proto.name)) return;
  into.set(file.proto.name, file);
  for (const dep of file.dependencies) withImports(dep, into);
}

/**
 * The package definition reflection reads: it only uses each entry's serialized file
 * descriptors, so one entry per service carries its file and everything it imports.
 */
export function packageDefinitionOf(services: readonly DescService[]): PackageDefinition {
  const def: Record<string, unknown> = {};
  for (const service of services) {
    const files = new Map<string, DescFile>();
    withImports(service.file, files);
    def[service.typeName] = {
      format: "Protocol Buffer 3 FileDescriptorProto",
      fileDescriptorProtos: [...files.values()].map((f) => Buffer.from(toBinary(FileDescriptorProtoSchema, f.proto))),
    };
  }
  return def as PackageDefinition;
}

const INFO = "ServerReflectionInfo";

/** Adds the reflection service to `server`, listing exactly `services`; built at its first call. */
export function addReflection(server: grpc.Server, services: readonly DescService[]): void {
  addDeferred(server, {
    name: "gRPC server reflection",
    methods: { [`/grpc.reflection.v1.ServerReflection/${INFO}`]: "bidi", [`/grpc.reflection.v1alpha.ServerReflection/${INFO}`]: "bidi" },
    addTo: (target) => {
      const { ReflectionService: Service } = require("@grpc/reflection") as typeof import("@grpc/reflection");
      new Service(packageDefinitionOf(services), { services: services.map((s) => s.typeName) }).addToServer(target);
    },
  });
}
