/**
 * The error catalogs are documented: every gRPC status a handler may answer with and
 * every result error code appears in docs/contract.md, and each service error maps to a
 * distinct gRPC status that a client rebuilds to the same code.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { status } from "@grpc/grpc-js";
import { GrpcStatus, SERVICE_ERROR_CODES, ServiceError, fromGrpcStatus } from "../../src/protocol/service-error.js";
import { ErrorCode } from "../../src/gen/codemode/common/v1/common_pb.js";

const readme = readFileSync(new URL("../../docs/contract.md", import.meta.url), "utf8");

describe("error catalogs", () => {
  it("numbers each gRPC status as grpc-js does", () => {
    for (const [name, code] of Object.entries(GrpcStatus)) expect(code, name).toBe(status[name as keyof typeof status]);
  });
  it("each contract-violation status is documented and round-trips", () => {
    const statuses = new Set<number>();
    for (const [code, info] of Object.entries(SERVICE_ERROR_CODES)) {
      expect(info.doc.length).toBeGreaterThan(10);
      statuses.add(info.status);
      const e = new ServiceError(code as keyof typeof SERVICE_ERROR_CODES, "m");
      expect(fromGrpcStatus(e.grpcStatus, "m").code).toBe(code);
    }
    expect(statuses.size).toBe(Object.keys(SERVICE_ERROR_CODES).length);
    for (const s of ["INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "FAILED_PRECONDITION", "PERMISSION_DENIED", "UNAUTHENTICATED"])
      expect(readme).toContain(s);
  });
  it("each seed error code exists on the wire and in docs/contract.md", () => {
    for (const code of ["invalid_input", "runtime_unavailable", "timeout", "output_limit_exceeded", "snapshot_limit_exceeded", "internal_error"]) {
      expect(readme).toContain(`\`${code}\``);
      expect(ErrorCode[code.toUpperCase() as keyof typeof ErrorCode]).toBeGreaterThan(0);
    }
  });
});
