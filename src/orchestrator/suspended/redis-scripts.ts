/**
 * The Lua scripts behind the Redis run store: every change that touches more than one
 * key (suspend with the cap, claim, release, answers, deleteScope) runs as one script,
 * so orchestrator replicas sharing a Redis never see half an update. Each script gets
 * the key prefix and the orchestrator's Date.now() first, and runs by SHA with a full
 * send only when the server has not cached it. The key layout is in ./redis-store.ts.
 */
import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import { GENERATION_MEMORY_MS, SETTLED_CALL_MEMORY_MS } from "./run-store.js";
import { APPROVAL_KEEP_MS } from "../../shared/link-wire.js";
import { LIMITS } from "../../shared/limits.js";

/** Shared by every script. ARGV[1] is the key prefix, ARGV[2] the orchestrator's Date.now(). */
const PRELUDE = `
local P, NOW, MEMORY, GEN_MEMORY, KEEP = ARGV[1], tonumber(ARGV[2]), ${SETTLED_CALL_MEMORY_MS}, ${GENERATION_MEMORY_MS}, ${APPROVAL_KEEP_MS}
local RUNS = P .. 'runs'
local function runKey(id) return P .. 'run:' .. id end
local function answersKey(id) return P .. 'answers:' .. id end
local function callsKey(id) return P .. 'calls:' .. id end
local function callKey(c) return P .. 'call:' .. c end
local function scopeSetKey(s) return P .. 'scope:' .. s end
local function genKey(id) return P .. 'gen:' .. id end
local function holderKey(h) return P .. 'holder:' .. h end
-- Notes that sidecar h holds run id's claim until leaseEnd (releaseHolder reads it).
local function noteHolder(id, h, leaseEnd)
  if h == '' then return end
  redis.call('HSET', runKey(id), 'holder', h)
  redis.call('SADD', holderKey(h), id)
  if redis.call('PTTL', holderKey(h)) < leaseEnd - NOW then redis.call('PEXPIRE', holderKey(h), leaseEnd - NOW) end
end
-- The run's expiry when it is stored and has not expired, else nil.
local function liveExp(id)
  local exp = tonumber(redis.call('HGET', runKey(id), 'exp'))
  if exp and exp > NOW then return exp end
  return nil
end
-- Whether token is the run's current claim (its lease not passed).
local function holds(id, token)
  local claim = redis.call('HMGET', runKey(id), 'token', 'lease')
  return claim[1] == token and tonumber(claim[2]) > NOW
end
-- Moves a run's expiry: Redis drops its keys then, its call ids MEMORY later, and its
-- generation GEN_MEMORY later (never sooner than it would have before).
local function setExpiry(id, exp, scope)
  local ttl = exp - NOW
  if redis.call('PTTL', genKey(id)) < ttl + GEN_MEMORY then redis.call('PEXPIRE', genKey(id), ttl + GEN_MEMORY) end
  redis.call('HSET', runKey(id), 'exp', exp)
  redis.call('ZADD', RUNS, exp, id)
  for _, key in ipairs({runKey(id), answersKey(id), callsKey(id)}) do redis.call('PEXPIRE', key, ttl) end
  for _, c in ipairs(redis.call('SMEMBERS', callsKey(id))) do
    if redis.call('HGET', callKey(c), 'run') == id then redis.call('PEXPIRE', callKey(c), ttl + MEMORY) end
  end
  if redis.call('PTTL', scopeSetKey(scope)) < ttl then redis.call('PEXPIRE', scopeSetKey(scope), ttl) end
end
-- Deletes a run. A live one settles now: its call ids are remembered for MEMORY from now
-- (a pending call of a run that is gone reads as ended).
local function remove(id, live)
  if live then
    for _, c in ipairs(redis.call('SMEMBERS', callsKey(id))) do
      if redis.call('HGET', callKey(c), 'run') == id then redis.call('PEXPIRE', callKey(c), MEMORY) end
    end
  end
  local scope = redis.call('HGET', runKey(id), 'scope')
  if scope then redis.call('SREM', scopeSetKey(scope), id) end
  redis.call('DEL', runKey(id), answersKey(id), callsKey(id))
  redis.call('ZREM', RUNS, id)
end
`;

/**
 * ARGV: 3 id, 4 scope key, 5 session key, 6 agent run id, 7 expiresAtMs, 8 meta JSON,
 * 9 pending JSON, 10 snapshot, 11 maxSuspendedRuns, 12 "new" | "replace", 13 claim token,
 * 14 generation (the stored one plus one, else 'stale'), 15 n, 16 approvalTimeoutMs, 17 the
 * record's bytes, 18 maxSuspendedBytes (-1: none; else 'bytes' when the unexpired runs would
 * hold more), 19 a checkpoint's hold token ('' none: the claim ends), 20 its lease ms, 21 its
 * holder, then n pending call ids, then (call id, answer JSON, approval expiry or 0)
 * triples: an expiry marks an approval mark, which a decision (old or new) replaces.
 */
const SUSPEND = `
local id, scope, session, runid = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local exp, gen, n = tonumber(ARGV[7]), tonumber(ARGV[14]), tonumber(ARGV[15])
local live = liveExp(id)
-- This very request again (its reply was lost with an orchestrator): already stored as sent.
if live and tonumber(redis.call('GET', genKey(id))) == gen and redis.call('HGET', runKey(id), 'snap') == ARGV[10] then
  local out = {'ok'}
  for _, c in ipairs(redis.call('HKEYS', answersKey(id))) do
    if redis.call('HGET', callKey(c), 'state') ~= 'approval' then out[#out + 1] = c end
  end
  return out
end
if ARGV[12] == 'new' then
  if live then return {'claim_lost'} end
  redis.call('ZREMRANGEBYSCORE', RUNS, '-inf', NOW)
  if redis.call('ZCARD', RUNS) >= tonumber(ARGV[11]) then return {'cap'} end
elseif not live or not holds(id, ARGV[13]) then
  return {'claim_lost'}
end
local current = tonumber(redis.call('GET', genKey(id))) or 0
if gen ~= current + 1 or (ARGV[12] == 'new' and current ~= 0) then return {'stale'} end
local size, maxBytes = tonumber(ARGV[17]), tonumber(ARGV[18])
if maxBytes >= 0 then
  redis.call('ZREMRANGEBYSCORE', RUNS, '-inf', NOW)
  local held = size
  for _, other in ipairs(redis.call('ZRANGE', RUNS, 0, -1)) do
    if other ~= id then held = held + (tonumber(redis.call('HGET', runKey(other), 'bytes')) or 0) end
  end
  if held > maxBytes then return {'bytes'} end
end
if not live then remove(id, false) end
local pending, answers, marks, asked = {}, {}, {}, {}
for i = 22, 21 + n do pending[ARGV[i]] = true end
if live then
  local old = redis.call('HGETALL', answersKey(id))
  for i = 1, #old, 2 do
    local c = old[i]
    if pending[c] then
      answers[c] = old[i + 1]
      local call = redis.call('HMGET', callKey(c), 'state', 'until', 'asked')
      if call[1] == 'approval' then marks[c] = tonumber(call[2]); asked[c] = call[3] end
    end
  end
  for _, c in ipairs(redis.call('SMEMBERS', callsKey(id))) do
    local call = redis.call('HMGET', callKey(c), 'run', 'state')
    if not pending[c] and call[1] == id and (call[2] == 'pending' or call[2] == 'approval') then redis.call('HSET', callKey(c), 'state', 'ended') end
  end
end
for i = 22 + n, #ARGV, 3 do
  local c, u = ARGV[i], tonumber(ARGV[i + 2])
  if pending[c] and (not answers[c] or (marks[c] and u == 0)) then
    answers[c] = ARGV[i + 1]
    if u > 0 then marks[c] = u else marks[c] = nil end
  end
end
redis.call('DEL', runKey(id), answersKey(id))
for c, json in pairs(answers) do redis.call('HSET', answersKey(id), c, json) end
for i = 22, 21 + n do
  local c = ARGV[i]
  local call = redis.call('HMGET', callKey(c), 'run', 'state')
  local state = 'pending'
  if marks[c] then state = 'approval'
  elseif answers[c] or (call[1] == id and call[2] == 'answered') then state = 'answered' end
  redis.call('HSET', callKey(c), 'run', id, 'scope', scope, 'state', state)
  if marks[c] then redis.call('HSET', callKey(c), 'until', marks[c]) end
  redis.call('SADD', callsKey(id), c)
end
redis.call('HSET', runKey(id), 'meta', ARGV[8], 'pending', ARGV[9], 'snap', ARGV[10], 'scope', scope, 'session', session, 'runid', runid, 'apto', ARGV[16], 'bytes', size)
redis.call('SADD', scopeSetKey(scope), id)
local genTtl = redis.call('PTTL', genKey(id))
redis.call('SET', genKey(id), gen)
if genTtl > 0 then redis.call('PEXPIRE', genKey(id), genTtl) end
if ARGV[19] ~= '' then
  local leaseEnd = NOW + tonumber(ARGV[20])
  redis.call('HSET', runKey(id), 'token', ARGV[19], 'lease', leaseEnd)
  noteHolder(id, ARGV[21], leaseEnd)
  if leaseEnd > exp then exp = leaseEnd end
end
setExpiry(id, exp, scope)
local out = {'ok'}
for c, _ in pairs(answers) do if not marks[c] then out[#out + 1] = c end end
return out
`;

/**
 * ARGV: 3 id, 4 session key, 5 agent run id, 6 leaseMs, 7 the caller's token (a retry with
 * the current claim's token renews it), 8 the claiming sidecar ('' none).
 */
const CLAIM = `
local id = ARGV[3]
local exp = liveExp(id)
if not exp then return {'unavailable'} end
local run = redis.call('HMGET', runKey(id), 'session', 'runid', 'token', 'lease', 'scope', 'lost')
if run[1] ~= ARGV[4] then return {'session'} end
if run[2] ~= ARGV[5] then return {'run'} end
if run[3] and tonumber(run[4]) > NOW and run[3] ~= ARGV[7] then return {'busy'} end
if run[6] == '1' then return {'lost'} end
local leaseEnd = NOW + tonumber(ARGV[6])
redis.call('HDEL', runKey(id), 'holder')
redis.call('HSET', runKey(id), 'token', ARGV[7], 'lease', leaseEnd)
noteHolder(id, ARGV[8], leaseEnd)
if leaseEnd > exp then
  exp = leaseEnd
  setExpiry(id, exp, run[5])
end
local out = {'ok', tostring(exp), redis.call('GET', genKey(id)) or '0'}
for _, field in ipairs(redis.call('HMGET', runKey(id), 'meta', 'pending', 'snap')) do out[#out + 1] = field end
for _, answer in ipairs(redis.call('HVALS', answersKey(id))) do out[#out + 1] = answer end
return out
`;

/** ARGV: 3 id, 4 token, 5 keep ("1" | "0"). */
const RELEASE = `
local id = ARGV[3]
if not liveExp(id) or not holds(id, ARGV[4]) then return 0 end
if ARGV[5] == '1' then redis.call('HDEL', runKey(id), 'token', 'lease', 'holder') else remove(id, true) end
return 1
`;

/**
 * ARGV: 3 id, 4 token, 5 generation of the snapshot that no longer holds. 1 when the run is
 * lost now (or was already, at the next generation); 0 when the claim or generation is not current.
 */
const INVALIDATE = `
local id = ARGV[3]
if not liveExp(id) or not holds(id, ARGV[4]) then return 0 end
local gen = tonumber(ARGV[5])
local current = tonumber(redis.call('GET', genKey(id))) or 0
if redis.call('HGET', runKey(id), 'lost') == '1' then
  if current == gen + 1 then return 1 end
  return 0
end
if current ~= gen then return 0 end
local snap = redis.call('HGET', runKey(id), 'snap') or ''
local bytes = (tonumber(redis.call('HGET', runKey(id), 'bytes')) or 0) - #snap
redis.call('HSET', runKey(id), 'lost', '1', 'snap', '', 'bytes', bytes)
local genTtl = redis.call('PTTL', genKey(id))
redis.call('SET', genKey(id), gen + 1)
if genTtl > 0 then redis.call('PEXPIRE', genKey(id), genTtl) end
return 1
`;

/** ARGV: 3 the holder (a sidecar id). Ends every current claim it holds; returns how many. */
const RELEASE_HOLDER = `
local h = ARGV[3]
local n = 0
for _, id in ipairs(redis.call('SMEMBERS', holderKey(h))) do
  local run = redis.call('HMGET', runKey(id), 'holder', 'token', 'lease')
  if liveExp(id) and run[1] == h and run[2] and tonumber(run[3]) > NOW then
    redis.call('HDEL', runKey(id), 'token', 'lease', 'holder')
    n = n + 1
  end
end
redis.call('DEL', holderKey(h))
return n
`;

/** ARGV: 3 id, 4 token. Nil when the claim is not current, else pending JSON and answers. */
const ANSWERS = `
local id = ARGV[3]
if not liveExp(id) or not holds(id, ARGV[4]) then return false end
local out = {redis.call('HGET', runKey(id), 'pending')}
for _, answer in ipairs(redis.call('HVALS', answersKey(id))) do out[#out + 1] = answer end
return out
`;

/**
 * ARGV: 3 call id, 4 scope key, 5 'answer' then 6 its JSON, or 5 'mark' then 6 reason,
 * 7 requested expiry (0: the run's approvalTimeoutMs), 8 when it was asked. The call's
 * state makes it once per call id; a mark is the one thing a decision may replace, until
 * its expiry. A mark keeps the run at least APPROVAL_KEEP_MS past the expiry.
 */
const ADD_ANSWER = `
local c = ARGV[3]
local call = redis.call('HMGET', callKey(c), 'run', 'scope', 'state', 'until', 'asked')
local id = call[1]
if not id then return {'unknown'} end
if call[2] ~= ARGV[4] then return {'scope'} end
if call[3] == 'answered' then return {'duplicate', id} end
if call[3] == 'approval' then
  if ARGV[5] == 'mark' then return {'asking', id} end
  if tonumber(call[4]) <= NOW then return {'expired', id} end
end
local exp = liveExp(id)
if call[3] == 'ended' or not exp then return {'ended', id} end
if ARGV[5] == 'mark' then
  local asked = tonumber(ARGV[8])
  local latest = asked + (tonumber(redis.call('HGET', runKey(id), 'apto')) or ${LIMITS.approvalTimeoutMs.default})
  local untilMs = tonumber(ARGV[7])
  if untilMs <= 0 or untilMs > latest then untilMs = latest end
  local json = '{"callId":' .. cjson.encode(c) .. ',"approval":{"reason":' .. cjson.encode(ARGV[6]) .. ',"expiresAtMs":' .. string.format('%d', untilMs) .. ',"requestedAtMs":' .. string.format('%d', asked) .. '}}'
  redis.call('HSET', callKey(c), 'state', 'approval', 'until', untilMs, 'asked', asked)
  if untilMs + KEEP > exp then
    exp = untilMs + KEEP
    setExpiry(id, exp, redis.call('HGET', runKey(id), 'scope'))
  end
  redis.call('HSET', answersKey(id), c, json)
else
  local json = ARGV[6]
  if call[3] == 'approval' and call[5] then
    local held = redis.call('HGET', answersKey(id), c)
    local reason = held and cjson.decode(held).approval.reason or ''
    json = string.sub(json, 1, -2) .. ',"approvalRequestedAtMs":' .. call[5] .. ',"approvalReason":' .. cjson.encode(reason) .. '}'
  end
  redis.call('HSET', answersKey(id), c, json)
  redis.call('HSET', callKey(c), 'state', 'answered')
end
redis.call('PEXPIRE', answersKey(id), exp - NOW)
redis.call('PUBLISH', P .. 'answers', id)
return {'stored', id}
`;

/** ARGV: 3 scope key. Returns how many unexpired runs it deleted. */
const DELETE_SCOPE = `
local scope = ARGV[3]
local n = 0
for _, id in ipairs(redis.call('SMEMBERS', scopeSetKey(scope))) do
  if redis.call('HGET', runKey(id), 'scope') == scope then
    local live = liveExp(id) ~= nil
    if live then n = n + 1 end
    remove(id, live)
  end
end
redis.call('DEL', scopeSetKey(scope))
return n
`;

/** No ARGV beyond the prelude's. What the unexpired runs hold (their `bytes`), and when the next one expires (-1: none). */
const HELD = `
redis.call('ZREMRANGEBYSCORE', RUNS, '-inf', NOW)
local held = 0
for _, id in ipairs(redis.call('ZRANGE', RUNS, 0, -1)) do held = held + (tonumber(redis.call('HGET', runKey(id), 'bytes')) or 0) end
local first = redis.call('ZRANGE', RUNS, 0, 0, 'WITHSCORES')
return {held, tonumber(first[2]) or -1}
`;

/** A script run by SHA, sent in full only when the server does not have it cached. */
class Script {
  private readonly lua: string;
  private readonly sha: string;

  constructor(body: string) {
    this.lua = PRELUDE + body;
    this.sha = createHash("sha1").update(this.lua).digest("hex");
  }

  async run(redis: Redis, args: (string | Buffer | number)[]): Promise<unknown> {
    try {
      return await redis.callBuffer("EVALSHA", this.sha, 0, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
      return redis.callBuffer("EVAL", this.lua, 0, ...args);
    }
  }
}

export const scripts = {
  suspend: new Script(SUSPEND),
  claim: new Script(CLAIM),
  release: new Script(RELEASE),
  invalidate: new Script(INVALIDATE),
  releaseHolder: new Script(RELEASE_HOLDER),
  answers: new Script(ANSWERS),
  addAnswer: new Script(ADD_ANSWER),
  deleteScope: new Script(DELETE_SCOPE),
  held: new Script(HELD),
};
