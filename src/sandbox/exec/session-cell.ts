/**
 * One cell's view of its session's store (code mode's `store` / `load`). The first call
 * reads the session's committed entries once over the link; writes stay here, where the
 * cell's own `load` sees them, until the segment ends: `commit` sends them when it
 * completes or parks `waiting` (a checkpoint), and a failed segment's are dropped with it.
 * Limits are checked as the guest writes (a catchable RangeError naming the limit), and
 * again by the orchestrator when it commits. Nothing here runs for a program that never
 * calls `store` or `load`.
 */
import type { CodeModeConfig } from "../../shared/config.js";
import type { AnswerValue } from "../../shared/link-wire.js";
import type { Scope } from "../../shared/scope.js";
import { sessionKeyProblem } from "../../shared/session-keys.js";
import type { LinkRpc } from "../link/link-calls.js";
import { withRetries } from "../link/retry.js";
import { ServiceError } from "../../protocol/service-error.js";

const LINK_DEADLINE_MS = 10_000;
const utf8 = (s: string) => Buffer.byteLength(s, "utf8");
const fail = (name: string, message: string): AnswerValue => ({ ok: false, error: { name, message } });

/** What a segment did with its session's store, for telemetry and the trajectory. */
export type SessionUse = { loads: number; stores: number; keysWritten: number; bytesWritten: number; keys: number; bytes: number };

export class SessionCell {
  private committed: Promise<Map<string, string>> | undefined;
  private readonly writes = new Map<string, string>();
  private readonly counts = { loads: 0, stores: 0 };
  private size = { keys: 0, bytes: 0 };
  private written = { keys: 0, bytes: 0 };

  constructor(
    private readonly rpc: Pick<LinkRpc, "loadSession" | "commitSession">,
    private readonly scope: Scope,
    private readonly config: CodeModeConfig,
  ) {}

  /** The guest's `store` or `load`, from the request's payload; the answer settles its promise. */
  async handle(op: "store" | "load", payloadJson: string): Promise<AnswerValue> {
    let payload: { key?: unknown; json?: unknown };
    try {
      payload = JSON.parse(payloadJson) as { key?: unknown; json?: unknown };
    } catch {
      return fail("TypeError", "the session store's request is not JSON.");
    }
    const key = typeof payload.key === "string" ? payload.key : "";
    const problem = sessionKeyProblem(key);
    if (problem) return fail(/characters, got/.test(problem) ? "RangeError" : "TypeError", `${op}: ${problem}.`);
    let committed: Map<string, string>;
    try {
      committed = await this.load();
    } catch (err) {
      this.committed = undefined;
      return fail("Error", `${op}: the session store cannot be reached (${(err as Error).message}).`);
    }
    if (op === "load") {
      this.counts.loads++;
      return { ok: true, json: this.writes.get(key) ?? committed.get(key) ?? "" };
    }
    const json = typeof payload.json === "string" ? payload.json : "";
    try {
      JSON.parse(json);
    } catch {
      return fail("TypeError", "store: the value is not JSON.");
    }
    const { maxSessionValueBytes, maxSessionKeys, maxSessionBytes } = this.config;
    const valueBytes = utf8(json);
    if (valueBytes > maxSessionValueBytes)
      return fail("RangeError", `store: the value is ${valueBytes} bytes of JSON, over maxSessionValueBytes (${maxSessionValueBytes}).`);
    const before = this.writes.get(key) ?? committed.get(key);
    const keys = this.size.keys + (before === undefined ? 1 : 0);
    const bytes = this.size.bytes - (before === undefined ? 0 : utf8(key) + utf8(before)) + utf8(key) + valueBytes;
    if (keys > maxSessionKeys) return fail("RangeError", `store: the session would hold ${keys} keys, over maxSessionKeys (${maxSessionKeys}).`);
    if (bytes > maxSessionBytes) return fail("RangeError", `store: the session would hold ${bytes} bytes, over maxSessionBytes (${maxSessionBytes}).`);
    this.counts.stores++;
    this.writes.set(key, json);
    this.size = { keys, bytes };
    return { ok: true, json: "" };
  }

  /** True when the cell wrote something not yet committed. */
  get dirty(): boolean {
    return this.writes.size > 0;
  }

  /**
   * Sends the cell's writes to the orchestrator (the segment completed or parked).
   * Undefined when they were kept; else why not, for the segment's failure.
   */
  async commit(): Promise<string | undefined> {
    if (this.writes.size === 0) return undefined;
    const writes = [...this.writes].map(([key, valueJson]) => ({ key, valueJson }));
    const res = await withRetries(
      () =>
        this.rpc.commitSession(
          {
            agentId: this.scope.agentId,
            sessionKey: this.scope.sessionKey,
            writes,
            maxKeys: this.config.maxSessionKeys,
            maxBytes: BigInt(this.config.maxSessionBytes),
            ttlSeconds: this.config.sessionTtlSeconds,
          },
          { deadlineMs: LINK_DEADLINE_MS },
        ),
      (err) => err instanceof ServiceError && err.code === "unavailable",
    );
    this.size = { keys: res.keys, bytes: Number(res.bytes) };
    if (res.refused) return res.refused;
    this.written = { keys: this.written.keys + writes.length, bytes: this.written.bytes + writes.reduce((n, w) => n + utf8(w.valueJson), 0) };
    // A checkpoint commits while the program runs on: a write made meanwhile stays staged,
    // and the cell's later loads read what it committed.
    const committed = await this.committed?.catch(() => undefined);
    for (const w of writes) {
      committed?.set(w.key, w.valueJson);
      if (this.writes.get(w.key) === w.valueJson) this.writes.delete(w.key);
    }
    return undefined;
  }

  /** Writes since the last checkpoint are dropped (the segment failed). */
  discard(): void {
    this.writes.clear();
  }

  get use(): SessionUse {
    return { ...this.counts, keysWritten: this.written.keys, bytesWritten: this.written.bytes, ...this.size };
  }

  private load(): Promise<Map<string, string>> {
    this.committed ??= withRetries(
      () => this.rpc.loadSession({ agentId: this.scope.agentId, sessionKey: this.scope.sessionKey }, { deadlineMs: LINK_DEADLINE_MS }),
      (err) => err instanceof ServiceError && err.code === "unavailable",
    ).then((res) => {
      const m = new Map(res.entries.map((e) => [e.key, e.valueJson] as const));
      let bytes = 0;
      for (const [k, v] of m) bytes += utf8(k) + utf8(v);
      this.size = { keys: m.size, bytes };
      return m;
    });
    return this.committed;
  }
}
