/**
 * The one error type a gRPC handler throws for a contract violation, and the one place
 * it maps to a gRPC status. A guest program failing is never a ServiceError: it is a
 * `failed` Result.
 */

/**
 * The gRPC status codes answered here, by their numbers in the gRPC protocol (grpc-js's
 * `status` has the same): kept here so the modules that name a ServiceError, the pool's
 * among them, load without gRPC (test/unit/service-errors.test.ts compares the two).
 */
export const GrpcStatus = {
  INVALID_ARGUMENT: 3,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/** Codes a handler may answer with, and what each means in this product. */
export const SERVICE_ERROR_CODES = {
  invalid_argument: {
    status: GrpcStatus.INVALID_ARGUMENT,
    doc: "the request breaks the contract (missing scope, bytes that do not decode, an id over its limit, malformed JSON)",
  },
  not_found: { status: GrpcStatus.NOT_FOUND, doc: "no such call, run or catalog" },
  already_exists: { status: GrpcStatus.ALREADY_EXISTS, doc: "the call was already answered" },
  failed_precondition: { status: GrpcStatus.FAILED_PRECONDITION, doc: "the call's exec already ended, or no run is open for the scope (call OpenRun first)" },
  permission_denied: { status: GrpcStatus.PERMISSION_DENIED, doc: "the caller's scope does not own the call or run" },
  unauthenticated: {
    status: GrpcStatus.UNAUTHENTICATED,
    doc: "the port requires a bearer token (authorization: Bearer <token> metadata) and the call carried none, or another one",
  },
  resource_exhausted: { status: GrpcStatus.RESOURCE_EXHAUSTED, doc: "a store or queue limit was reached" },
  unavailable: { status: GrpcStatus.UNAVAILABLE, doc: "a dependency (orchestrator, store) cannot be reached, or this sidecar is draining" },
  unimplemented: { status: GrpcStatus.UNIMPLEMENTED, doc: "the method is part of the contract but not served yet" },
  internal: { status: GrpcStatus.INTERNAL, doc: "a bug: logged with details, reported without them" },
} as const;

export type ServiceErrorCode = keyof typeof SERVICE_ERROR_CODES;

export class ServiceError extends Error {
  override name = "ServiceError";
  constructor(
    readonly code: ServiceErrorCode,
    message: string,
  ) {
    super(message);
  }

  get grpcStatus(): number {
    return SERVICE_ERROR_CODES[this.code].status;
  }
}

/** Rebuilds a ServiceError from a gRPC status received by a client. */
export function fromGrpcStatus(code: number, message: string): ServiceError {
  for (const [name, info] of Object.entries(SERVICE_ERROR_CODES)) {
    if (info.status === code) return new ServiceError(name as ServiceErrorCode, message);
  }
  return new ServiceError("unavailable", message);
}
