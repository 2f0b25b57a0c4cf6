/**
 * Whether the sidecars attached to this orchestrator can run guest code, from the pool
 * health each reports over its link (in its hello, then whenever it changes). Tool
 * Search's default mode, `tool_search_code`, needs an isolated runtime; the seed says a
 * runtime that cannot launch one falls back to mode tools before the model sees the
 * surface. So while sidecars are attached and none of them can run code, the runs'
 * surfaces are described in mode tools (`fallbackReason`), and in mode code again as
 * soon as one that can reports in.
 *
 * No sidecar attached at all is never a reason to fall back: it says nothing about the
 * runtime (docs/module-notes.md#srcorchestratorlinksidecar-poolsts). A run whose own
 * program found no runtime still falls back on its own (the per-run fallback).
 */
import type { Logger } from "../../shared/logger.js";

/** A sidecar's report: can its worker pool run guest code, and if not, why. */
export type PoolReport = { canRunCode: boolean; reason: string };

/** What a sidecar that reports nothing (an older build) is read as: it attaches only once its pool started. */
const STARTED: PoolReport = { canRunCode: true, reason: "" };
/** Reasons named in a fallback reason at most (the rest are counted). */
const NAMED = 3;

export class SidecarPools {
  /** By sidecar id: its report, and the link (stream) that made it. */
  private readonly pools = new Map<string, PoolReport & { link: object }>();
  /** The fallback reason last logged (undefined: code could run). */
  private falling: string | undefined;

  constructor(private readonly log: Logger) {}

  /** A sidecar attached (over `link`) or reported a change; `report` absent: an older sidecar. */
  report(sidecarId: string, link: object, report: PoolReport | undefined): void {
    const r = report ?? STARTED;
    const next = { canRunCode: r.canRunCode, reason: r.canRunCode ? "" : r.reason.slice(0, 300), link };
    const prev = this.pools.get(sidecarId);
    this.pools.set(sidecarId, next);
    if (!prev || prev.canRunCode !== next.canRunCode) {
      if (next.canRunCode) this.log.info({ sidecarId, canRunCode: true }, "sidecar pool can run code");
      else this.log.warn({ sidecarId, canRunCode: false, reason: next.reason }, "sidecar pool cannot run code");
    }
    this.changed();
  }

  /** Whether an attached sidecar's pool can run code now (one that never reported cannot). */
  canRunCode(sidecarId: string): boolean {
    return this.pools.get(sidecarId)?.canRunCode === true;
  }

  /** A sidecar's link closed (not if the sidecar attached again over another one meanwhile). */
  detach(sidecarId: string, link: object): void {
    if (this.pools.get(sidecarId)?.link !== link) return;
    this.pools.delete(sidecarId);
    this.changed();
  }

  /**
   * Why Tool Search mode code falls back to mode tools now: sidecars are attached and
   * none can run code. Empty when one can, or none is attached (see the header).
   */
  fallbackReason(): string {
    if (this.pools.size === 0) return "";
    const down: string[] = [];
    for (const [id, p] of this.pools) {
      if (p.canRunCode) return "";
      down.push(`${id}: ${p.reason || "no reason given"}`);
    }
    const more = down.length > NAMED ? `; and ${down.length - NAMED} more` : "";
    return `no sandbox sidecar attached to the orchestrator can run code (${down.slice(0, NAMED).join("; ")}${more})`;
  }

  /** Logs when Tool Search's mode code stops or starts being offered. */
  private changed(): void {
    const reason = this.fallbackReason() || undefined;
    if ((reason === undefined) === (this.falling === undefined)) {
      this.falling = reason;
      return;
    }
    this.falling = reason;
    if (reason) this.log.warn({ reason, sidecars: this.pools.size }, "Tool Search falls back from mode code to mode tools: no attached sidecar can run code");
    else this.log.info({ sidecars: this.pools.size }, "Tool Search offers mode code again: an attached sidecar can run code (or none is attached)");
  }
}
