/**
 * Catalogs kept in Redis, so every orchestrator sharing the Redis (and one restarted)
 * knows every catalog a gateway stored. A catalog is immutable by its content id, so
 * storing is a SET NX and never races.
 *
 * Key, under the shared prefix (`codemode:`):
 *   catalog:<id>   string: the canonical tools as JSON. No TTL: like the in-memory
 *                  store, a catalog stays as long as its Redis does.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import type { Tool } from "../../gen/codemode/common/v1/common_pb.js";
import { canonicalCatalog, type CatalogStore, type StoredCatalog, type StoredTool } from "../catalog/catalog-store.js";
import { storeCall } from "./store-failure.js";

export class RedisCatalogStore implements CatalogStore {
  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
    private readonly prefix: string,
  ) {}

  async put(tools: readonly Tool[]): Promise<StoredCatalog> {
    const catalog = canonicalCatalog(tools);
    await storeCall(this.log, "store the catalog", () => this.redis.set(this.key(catalog.id), JSON.stringify(catalog.tools), "NX"));
    return catalog;
  }

  async get(id: string): Promise<readonly StoredTool[] | undefined> {
    const json = await storeCall(this.log, "read the catalog", () => this.redis.get(this.key(id)));
    return json === null ? undefined : (JSON.parse(json) as StoredTool[]);
  }

  private key(id: string): string {
    return `${this.prefix}catalog:${id}`;
  }
}
