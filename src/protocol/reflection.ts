/**
 * gRPC server reflection (`@grpc/reflection`, v1 and v1alpha) for the public services of
 * a server, so `grpcurl -plaintext HOST:PORT list` and `describe` work without .proto
 * files. The descriptors come from the protobuf-es files in src/gen (each service's file
 * and its imports), not from proto/ at run time.
 */
import type * as grpc from "@grpc/grpc-js";
import { toBinary } from "@bufbuild/protobuf";
import type { DescFile, DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { ReflectionService } from "@grpc/reflection";

type PackageDefinition = ConstructorParameters<typeof ReflectionService>[0];

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

/** Adds the reflection service to `server`, listing exactly `services`. */
export function addReflection(server: grpc.Server, services: readonly DescService[]): void {
  new ReflectionService(packageDefinitionOf(services), { services: services.map((s) => s.typeName) }).addToServer(server);
}
