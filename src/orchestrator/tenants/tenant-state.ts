/**
 * Each tenant's own state: its catalogs, open runs, namespaces, session stores and
 * suspended runs live in stores of its own, so nothing one tenant creates can be read,
 * changed or counted by another, and an id of another tenant is simply not there
 * (NOT_FOUND, never PERMISSION_DENIED). In Redis a tenant's keys are under
 * `<prefix>tenant:<name>:`; the default tenant keeps the layout of a process without a
 * tenants file (`<prefix>` alone), so adding a file that names a tenant `default` keeps
 * its data. Without a file the one default tenant's stores are those of a process that
 * knows no tenants (../state/create-state.ts, ../state/create-store.ts).
 */
import type { Redis } from "ioredis";
import { ServiceError } from "../../protocol/service-error.js";
import type { Logger } from "../../shared/logger.js";
import { DEFAULT_TENANT } from "../../shared/scope.js";
import type { Tenants } from "../../shared/tenants.js";
import { MemoryCatalogStore, type CatalogStore } from "../catalog/catalog-store.js";
import { MemoryNamespaceRegistry } from "../namespaces/namespace-registry.js";
import { RunNamespaces } from "../namespaces/run-namespaces.js";
import { MemoryRunRegistry, type RunRegistry } from "../runs/runs.js";
import { MemorySessionStore, type SessionStore } from "../sessions/session-store.js";
import { createOrchestratorState } from "../state/create-state.js";
import { checkRedis, createRunStore, redisUrlOf } from "../state/create-store.js";
import { redactUrl } from "../state/redact-url.js";
import { MemoryRunStore } from "../suspended/memory-store.js";
import type { RunStore } from "../suspended/run-store.js";
import type { StoreQuota } from "./store-quotas.js";
import type { StoreAccount } from "../sessions/session-store.js";

export type TenantState = {
  tenant: string;
  catalogs: CatalogStore;
  runs: RunRegistry;
  namespaces: RunNamespaces;
  sessions: SessionStore;
  /** The tenant's suspended runs. */
  store: RunStore;
};

/** The Redis key prefix of `tenant`'s keys, under the store's `base` prefix. */
export function tenantPrefix(base: string, tenant: string): string {
  return tenant === DEFAULT_TENANT ? base : `${base}tenant:${tenant}:`;
}

/** What a sidecar is told when it names a tenant this orchestrator does not serve. */
export function unknownTenant(tenant: string): ServiceError {
  return new ServiceError(
    "failed_precondition",
    `tenant ${JSON.stringify(tenant)} is not in this orchestrator's tenants file; give every sidecar and orchestrator the same --tenants-file`,
  );
}

export class TenantStates {
  /** Told of every refusal of a store quota (metrics). */
  quotaRefused: ((tenant: string, quota: StoreQuota) => void) | undefined;

  constructor(
    readonly kind: "memory" | "redis",
    private readonly byName: ReadonlyMap<string, TenantState>,
    private readonly closeAll: () => Promise<void>,
    /** With Redis, the connection every tenant's run state is written on (run-cache invalidations follow the writes on it). */
    readonly connection?: Redis,
  ) {}

  /** The tenant's state; a tenant this orchestrator does not serve is FAILED_PRECONDITION. */
  get(tenant: string): TenantState {
    const state = this.byName.get(tenant);
    if (!state) throw unknownTenant(tenant);
    return state;
  }

  get all(): TenantState[] {
    return [...this.byName.values()];
  }

  close(): Promise<void> {
    return this.closeAll();
  }
}

/** Every tenant's stores for one store setting (`spec`: memory, or a redis:// URL). */
export async function createTenantStates(spec: string | undefined, tenants: Tenants, log: Logger, timeoutMs?: number): Promise<TenantStates> {
  if (!tenants.configured) {
    const store = await createRunStore(spec, log, timeoutMs);
    const state = await createOrchestratorState(spec, log, timeoutMs).catch(async (err: unknown) => {
      await store.close();
      throw err;
    });
    const { connection, ...rest } = state;
    const only: TenantState = { tenant: DEFAULT_TENANT, ...rest, namespaces: new RunNamespaces(state.namespaces), store };
    return new TenantStates(
      state.kind,
      new Map([[DEFAULT_TENANT, only]]),
      async () => {
        await Promise.all([store.close(), state.close()]);
      },
      connection,
    );
  }
  const url = redisUrlOf(spec);
  // Set once the states exist; each tenant's session store counts its bytes and reports refusals there.
  let states: TenantStates | undefined;
  const account = (tenant: string): StoreAccount => {
    const max = tenants.quotas(tenant).maxStoreBytes;
    return { tenant, ...(max !== undefined ? { maxStoreBytes: max } : {}), refused: () => states?.quotaRefused?.(tenant, "maxStoreBytes") };
  };
  if (url === undefined) {
    const list = tenants.names.map((tenant): TenantState => {
      return {
        tenant,
        catalogs: new MemoryCatalogStore(),
        runs: new MemoryRunRegistry(),
        namespaces: new RunNamespaces(new MemoryNamespaceRegistry()),
        sessions: new MemorySessionStore(account(tenant)),
        store: new MemoryRunStore(log),
      };
    });
    states = new TenantStates("memory", new Map(list.map((s) => [s.tenant, s])), async () => {
      await Promise.all(list.flatMap((s) => [s.store.close(), s.sessions.close()]));
    });
    return states;
  }
  const [
    { connectRedis, quitRedis, REDIS_PREFIX, RedisRunStore },
    { RedisCatalogStore },
    { RedisNamespaceRegistry },
    { RedisRunRegistry },
    { RedisSessionStore },
  ] = await Promise.all([
    import("../suspended/redis-store.js"),
    import("../catalog/redis-catalogs.js"),
    import("../namespaces/redis-namespaces.js"),
    import("../runs/redis-runs.js"),
    import("../sessions/redis-sessions.js"),
  ]);
  const stateLog = log.child({ state: "redis", url: redactUrl(url) });
  // One connection for the state, one for the suspended runs (as without tenants), shared by every tenant.
  const redis = connectRedis(url, stateLog, timeoutMs);
  const runsConnection = connectRedis(url, log.child({ store: "redis", url: redactUrl(url) }), timeoutMs);
  const list = tenants.names.map((tenant): TenantState => {
    const prefix = tenantPrefix(REDIS_PREFIX, tenant);
    return {
      tenant,
      catalogs: new RedisCatalogStore(redis, stateLog, prefix),
      runs: new RedisRunRegistry(redis, stateLog, prefix),
      namespaces: new RunNamespaces(new RedisNamespaceRegistry(redis, stateLog, prefix)),
      sessions: new RedisSessionStore(redis, stateLog, prefix, account(tenant)),
      store: new RedisRunStore(url, { prefix, log, connection: runsConnection, ...(timeoutMs !== undefined ? { timeoutMs } : {}) }),
    };
  });
  const close = async () => {
    await Promise.all(list.map((s) => s.store.close()));
    await Promise.all([quitRedis(redis), quitRedis(runsConnection)]);
  };
  await checkRedis(url, () => Promise.all([redis.ping(), runsConnection.ping()]), close);
  states = new TenantStates("redis", new Map(list.map((s) => [s.tenant, s])), close, redis);
  return states;
}
