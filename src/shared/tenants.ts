/**
 * The tenants a control plane serves, from `--tenants-file` (JSON, or YAML): each one's
 * name, the SHA-256 of the bearer token its gateways send, and its quotas. Every process
 * (sidecar, orchestrator, `codemode start`) reads the same file: the token names the tenant
 * on the gateway ports (../protocol/credentials.ts `tenantAuthorizer`), and the tenant owns
 * what its gateways create. Without a file there is one tenant, DEFAULT_TENANT, no quota,
 * and a gateway's token is the port's own (`--auth-token-file`), if it has one.
 * Checked once at start: a bad file fails the start, naming the entry and the key. Loads
 * no gRPC (the CLI reads it before the pool starts) and YAML only for a YAML file.
 */
import { readFile } from "node:fs/promises";
import { DEFAULT_TENANT } from "./scope.js";

/** What one tenant may use; absent: not limited (the process's own limits still apply), but for maxReplayBytes' default. */
export type TenantQuotas = {
  /** Execs and waits in flight at once, per sidecar. */
  maxConcurrentExecs?: number;
  /** Unexpired suspended runs in the store (every sidecar and orchestrator replica together). */
  maxSuspendedRuns?: number;
  /** Bytes those suspended runs hold in the store: sealed snapshots and what is stored with them. */
  maxSuspendedBytes?: number;
  /** New execs per second, per sidecar: a token bucket holding one second's worth. */
  execsPerSecond?: number;
  /** Bytes of every session store of the tenant together (code mode's `store`). */
  maxStoreBytes?: number;
  /** Bytes of the tenant's replay records (256 MiB when absent); past it its oldest runs' records are dropped (docs/replay.md#the-record). */
  maxReplayBytes?: number;
  /** The tenant's weight in a sidecar's CPU fair share (1 by default); its sessions share it. */
  weight?: number;
};

export type Tenant = { name: string; tokenSha256: string; quotas: TenantQuotas };

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const SHA256_RE = /^[0-9a-fA-F]{64}$/;
const COUNTS = ["maxConcurrentExecs", "maxSuspendedRuns", "maxSuspendedBytes", "maxStoreBytes", "maxReplayBytes"] as const;
const RATES = ["execsPerSecond", "weight"] as const;
const MAX_WEIGHT = 1_000;

export class Tenants {
  /** No tenants file: the default tenant alone, unlimited, identified by no token. */
  static readonly NONE = new Tenants([]);

  private readonly byName: ReadonlyMap<string, Tenant>;
  private readonly byDigest: ReadonlyMap<string, string>;

  constructor(list: readonly Tenant[]) {
    this.byName = new Map(list.map((t) => [t.name, t]));
    this.byDigest = new Map(list.map((t) => [t.tokenSha256.toLowerCase(), t.name]));
  }

  /** True when a tenants file was given: every gateway call must carry a tenant's token. */
  get configured(): boolean {
    return this.byName.size > 0;
  }

  /** Every tenant's name (DEFAULT_TENANT alone without a file): the bounded set metrics are labelled with. */
  get names(): readonly string[] {
    return this.configured ? [...this.byName.keys()] : [DEFAULT_TENANT];
  }

  /** The tenant whose token has this SHA-256 (lower-case hex), or undefined. */
  byTokenDigest(hex: string): string | undefined {
    return this.byDigest.get(hex);
  }

  has(name: string): boolean {
    return this.configured ? this.byName.has(name) : name === DEFAULT_TENANT;
  }

  quotas(name: string): TenantQuotas {
    return this.byName.get(name)?.quotas ?? {};
  }
}

/** Reads and checks a tenants file: `.json` as JSON, anything else as YAML (which JSON is too). */
export async function loadTenantsFile(path: string): Promise<Tenants> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new Error(`--tenants-file ${path}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let doc: unknown;
  try {
    doc = path.endsWith(".json") ? JSON.parse(text) : (await import("yaml")).parse(text);
  } catch (err) {
    throw new Error(`--tenants-file ${path}: not valid ${path.endsWith(".json") ? "JSON" : "YAML"} (${(err as Error).message})`);
  }
  return parseTenants(doc, `--tenants-file ${path}`);
}

/** Checks a parsed tenants document (`{"tenants": [...]}`); errors name `source`, the entry and the key. */
export function parseTenants(doc: unknown, source: string): Tenants {
  const fail = (what: string): never => {
    throw new Error(`${source}: ${what}`);
  };
  if (!isObject(doc) || !Array.isArray(doc.tenants)) return fail('expected {"tenants": [ ... ]}');
  for (const key of Object.keys(doc)) if (key !== "tenants") fail(`unknown key ${JSON.stringify(key)} (only "tenants")`);
  if (doc.tenants.length === 0) fail("tenants is empty; leave --tenants-file out for the one default tenant");
  const names = new Set<string>();
  const digests = new Set<string>();
  const list = doc.tenants.map((entry: unknown, i: number): Tenant => {
    const at = `tenants[${i}]`;
    if (!isObject(entry)) return fail(`${at} is not an object`);
    for (const key of Object.keys(entry))
      if (!["name", "tokenSha256", "quotas"].includes(key)) fail(`${at} has an unknown key ${JSON.stringify(key)} (name, tokenSha256, quotas)`);
    const { name, tokenSha256 } = entry;
    if (typeof name !== "string" || !NAME_RE.test(name)) fail(`${at}.name must be 1 to 63 letters, digits, "_", "." or "-", starting with a letter or digit`);
    if (names.has(name as string)) fail(`${at}.name ${JSON.stringify(name)} is given twice`);
    names.add(name as string);
    if (typeof tokenSha256 !== "string" || !SHA256_RE.test(tokenSha256))
      fail(`${at}.tokenSha256 must be the hex SHA-256 (64 characters) of the tenant's bearer token`);
    const digest = (tokenSha256 as string).toLowerCase();
    if (digests.has(digest)) fail(`${at}.tokenSha256 is another tenant's too; each tenant needs a token of its own`);
    digests.add(digest);
    return { name: name as string, tokenSha256: digest, quotas: quotasOf(entry.quotas, `${at}.quotas`, fail) };
  });
  return new Tenants(list);
}

function quotasOf(value: unknown, at: string, fail: (what: string) => never): TenantQuotas {
  if (value === undefined) return {};
  if (!isObject(value)) return fail(`${at} is not an object`);
  const out: TenantQuotas = {};
  for (const [key, v] of Object.entries(value)) {
    if ((COUNTS as readonly string[]).includes(key)) {
      if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) fail(`${at}.${key} must be a whole number, 0 or more`);
    } else if ((RATES as readonly string[]).includes(key)) {
      if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) fail(`${at}.${key} must be a number above 0`);
      if (key === "weight" && (v as number) > MAX_WEIGHT) fail(`${at}.weight must be at most ${MAX_WEIGHT}`);
    } else fail(`${at} has an unknown quota ${JSON.stringify(key)} (${[...COUNTS, ...RATES].join(", ")})`);
    out[key as keyof TenantQuotas] = v as number;
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
