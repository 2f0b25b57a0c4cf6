/**
 * Catalogs kept in Redis, so every orchestrator sharing the Redis (and one restarted)
 * knows every catalog a gateway stored. A catalog is immutable by its content id, so
 * storing is a SET NX and never races.
 *
 * Key, under the shared prefix (`codemode:`):
 *   catalog:<id>   string: {"tools": [...], "servers": [...]} in canonical form (a bare
 *                  array of tools also reads, as a catalog with no MCP server metadata).
 *                  No TTL: like the in-memory store, a catalog stays as long as its
 *                  Redis does.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import type { McpServer, Tool } from "../../gen/codemode/common/v1/common_pb.js";
import { canonicalCatalog, type CatalogStore, type StoredCatalog, type StoredServer, type StoredTool } from "./catalog-store.js";
import { storeCall } from "../state/store-failure.js";

export class RedisCatalogStore implements CatalogStore {
  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
    private readonly prefix: string,
  ) {}

  async put(tools: readonly Tool[], servers: readonly McpServer[] = []): Promise<StoredCatalog> {
    const catalog = canonicalCatalog(tools, servers);
    await storeCall(this.log, "store the catalog", () =>
      this.redis.set(this.key(catalog.id), JSON.stringify({ tools: catalog.tools, servers: catalog.servers }), "NX"),
    );
    return catalog;
  }

  async get(id: string): Promise<StoredCatalog | undefined> {
    const json = await storeCall(this.log, "read the catalog", () => this.redis.get(this.key(id)));
    if (json === null) return undefined;
    const stored = JSON.parse(json) as StoredTool[] | { tools: StoredTool[]; servers: StoredServer[] };
    if (Array.isArray(stored)) return { id, tools: stored.map(withDefaults), servers: [] };
    return { id, tools: stored.tools.map(withDefaults), servers: stored.servers };
  }

  private key(id: string): string {
    return `${this.prefix}catalog:${id}`;
  }
}

/** Tools stored by builds before MCP metadata existed lack its fields. */
function withDefaults(t: StoredTool): StoredTool {
  return { ...t, outputSchemaJson: t.outputSchemaJson ?? "", annotations: t.annotations ?? {}, examplesJson: t.examplesJson ?? [], keywords: t.keywords ?? [] };
}
