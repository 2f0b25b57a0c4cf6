/**
 * Replay records in Redis, with MemoryReplayRecords' semantics: a list per code-mode run,
 * `<prefix>replay:<scope key>:<run id>`, its first MAX_REPLAY_SEGMENTS segments kept,
 * expiring REPLAY_TTL_MS after its last segment. Shared by orchestrator replicas.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import type { Scope } from "../../shared/scope.js";
import { storeCall } from "../state/store-failure.js";
import { MAX_REPLAY_SEGMENTS, REPLAY_TTL_MS, replayKey, type ReplayRecords } from "./replay-records.js";

/** KEYS: the run's list. ARGV: 1 segment JSON, 2 max segments, 3 ttl ms. */
const APPEND = `
if redis.call('LLEN', KEYS[1]) < tonumber(ARGV[2]) then redis.call('RPUSH', KEYS[1], ARGV[1]) end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
`;

export class RedisReplayRecords implements ReplayRecords {
  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
    private readonly prefix: string,
  ) {}

  private key(scope: Scope, codeModeRunId: string): string {
    return `${this.prefix}replay:${replayKey(scope, codeModeRunId)}`;
  }

  async append(scope: Scope, codeModeRunId: string, segmentJson: string): Promise<void> {
    await storeCall(this.log, "keep a replay record", () =>
      this.redis.eval(APPEND, 1, this.key(scope, codeModeRunId), segmentJson, MAX_REPLAY_SEGMENTS, REPLAY_TTL_MS),
    );
  }

  async segments(scope: Scope, codeModeRunId: string): Promise<string[]> {
    return storeCall(this.log, "read a replay record", () => this.redis.lrange(this.key(scope, codeModeRunId), 0, -1));
  }
}
