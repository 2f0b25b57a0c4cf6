/**
 * `codemode health`: one gRPC health Check, for probes on machines without a
 * grpc_health_probe binary (the Dockerfile's HEALTHCHECK). Exit 0 when the service is
 * SERVING, 1 otherwise (NOT_SERVING, unknown service, unreachable), with one line saying
 * which; 2 for usage errors. Health needs no bearer token; on a TLS port give the CA
 * (`--tls-ca`), and on an mTLS port a client certificate too.
 */
import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import { parseArgs } from "node:util";
import { clientConnection, type ClientTls } from "../protocol/credentials.js";
import { DEFAULT_SANDBOX_ADDRESS, parseHostPort } from "../shared/address.js";
import { UsageError } from "./exec.js";
import { clientTls, clientTlsFlags } from "./security-flags.js";

const USAGE = `usage: codemode health [--address HOST:PORT] [--service NAME] [--timeout-ms N]
  --address     default: $CODEMODE_HEALTH_ADDRESS, else ${DEFAULT_SANDBOX_ADDRESS}
  --service     "" (default: the whole server), codemode.sandbox.v1.Sandbox,
                codemode.orchestrator.v1.Control or codemode.orchestrator.v1.SidecarLink
  --timeout-ms  default 5000
  --tls-ca FILE [--tls-client-cert FILE --tls-client-key FILE] [--tls-server-name NAME]
                TLS (mTLS with a client certificate); also CODEMODE_TLS_CA, ...`;

/** Where `codemode health` checks when no --address is given (the image sets it per role). */
export const HEALTH_ADDRESS_ENV = "CODEMODE_HEALTH_ADDRESS";

type CheckReply = { status: string };

function check(address: string, serviceName: string, timeoutMs: number, tls: ClientTls | undefined): Promise<CheckReply> {
  const Health = grpc.makeGenericClientConstructor(healthService as unknown as grpc.ServiceDefinition, "Health");
  const connection = clientConnection(tls ? { tls } : {});
  const client = new Health(address, connection.credentials, connection.options) as unknown as grpc.Client & {
    check(req: { service: string }, meta: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: CheckReply) => void): void;
  };
  return new Promise<CheckReply>((resolve, reject) => {
    client.check({ service: serviceName }, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => (err || !res ? reject(err) : resolve(res)));
  }).finally(() => client.close());
}

export async function runHealth(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { address: { type: "string" }, service: { type: "string", default: "" }, "timeout-ms": { type: "string", default: "5000" }, ...clientTlsFlags },
      strict: true,
    }));
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${USAGE}`);
  }
  const address = values.address ?? process.env[HEALTH_ADDRESS_ENV] ?? DEFAULT_SANDBOX_ADDRESS;
  try {
    parseHostPort(address, "--address");
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${USAGE}`);
  }
  const timeoutMs = Number(values["timeout-ms"]);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1)
    throw new UsageError(`--timeout-ms must be a positive integer, got ${JSON.stringify(values["timeout-ms"])}\n${USAGE}`);
  const named = JSON.stringify(values.service);
  const tls = clientTls(values, "");
  try {
    const { status } = await check(address, values.service, timeoutMs, tls);
    if (status === "SERVING") {
      process.stdout.write(`${address} ${named}: SERVING\n`);
      return 0;
    }
    process.stderr.write(`codemode health: ${address} ${named}: ${status}\n`);
  } catch (err) {
    const e = err as Partial<grpc.ServiceError>;
    if (e.code === grpc.status.NOT_FOUND) process.stderr.write(`codemode health: ${address} has no health status for service ${named}\n`);
    else if (e.code === grpc.status.UNIMPLEMENTED) process.stderr.write(`codemode health: ${address} does not serve grpc.health.v1.Health\n`);
    else process.stderr.write(`codemode health: cannot check ${address} within ${timeoutMs} ms: ${e.details || e.message || String(err)}\n`);
  }
  return 1;
}
