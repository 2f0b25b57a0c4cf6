/**
 * Tenants for tests: a tenants file naming two tenants, acme and globex, each with a random
 * bearer token (and quotas when given), and gateway clients of both ports that send one of
 * those tokens.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";

export type TenantName = "acme" | "globex";

/** Each tenant's bearer token. */
export const TOKENS: Record<TenantName, string> = { acme: randomBytes(24).toString("base64url"), globex: randomBytes(24).toString("base64url") };

export const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** Writes a tenants file for acme and globex, with `quotas` per tenant; returns its path. */
export function writeTenantsFile(quotas: Partial<Record<TenantName, Record<string, number>>> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "cm-tenants-"));
  const file = join(dir, "tenants.json");
  const tenants = (Object.keys(TOKENS) as TenantName[]).map((name) => ({ name, tokenSha256: sha256(TOKENS[name]), quotas: quotas[name] ?? {} }));
  writeFileSync(file, JSON.stringify({ tenants }));
  return file;
}

export type TenantClients = { sandbox: ServiceClient<typeof Sandbox.method>; control: ServiceClient<typeof Control.method>; close(): void };

/** Clients of a sidecar and an orchestrator that send `token` (none: no authorization metadata). */
export function tenantClients(addresses: { sandboxAddress: string; orchestratorAddress: string }, token?: string): TenantClients {
  const security = token === undefined ? {} : { token };
  const sandbox = createClient(Sandbox, addresses.sandboxAddress, {}, security);
  const control = createClient(Control, addresses.orchestratorAddress, {}, security);
  return {
    sandbox,
    control,
    close() {
      sandbox.close();
      control.close();
    },
  };
}

/** How a gRPC call failed ("not_found", "resource_exhausted", ...), or "ok". */
export async function outcomeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "ok";
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}
