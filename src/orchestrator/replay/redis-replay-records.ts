/**
 * Replay records in Redis, with MemoryReplayRecords' semantics: a list per code-mode run,
 * `<prefix>replay:<scope key>:<run id>`, its first MAX_REPLAY_SEGMENTS segments kept,
 * expiring REPLAY_TTL_MS after its last segment, and nothing after a tainted segment (a
 * mark key beside the list says so). Shared by orchestrator replicas.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import type { Scope } from "../../shared/scope.js";
import { storeCall } from "../state/store-failure.js";
import { isTainted, MAX_REPLAY_SEGMENTS, REPLAY_TTL_MS, replayKey, type ReplayRecords } from "./replay-records.js";

/** KEYS: the run's list, its taint mark. ARGV: 1 segment JSON, 2 max segments, 3 ttl ms, 4 "1" when the segment is tainted. */
const APPEND = `
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('LLEN', KEYS[1]) < tonumber(ARGV[2]) then redis.call('RPUSH', KEYS[1], ARGV[1]) end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
if ARGV[4] == '1' then redis.call('SET', KEYS[2], '1', 'PX', tonumber(ARGV[3])) end
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
      this.redis.eval(
        APPEND,
        2,
        this.key(scope, codeModeRunId),
        `${this.key(scope, codeModeRunId)}:tainted`,
        segmentJson,
        MAX_REPLAY_SEGMENTS,
        REPLAY_TTL_MS,
        isTainted(segmentJson) ? "1" : "0",
      ),
    );
  }

  async segments(scope: Scope, codeModeRunId: string): Promise<string[]> {
    return storeCall(this.log, "read a replay record", () => this.redis.lrange(this.key(scope, codeModeRunId), 0, -1));
  }
}
