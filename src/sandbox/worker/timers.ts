/**
 * A VM session's armed guest timers (setTimeout/setInterval): host call id → when it is
 * due. Each is pending host work like a tool call; a due timer is answered (with no value)
 * by the session's drain loop, earliest first, and a suspended run carries the due times.
 */

/** Timers a run may have armed at once (they do not count against maxPendingToolCalls). */
export const MAX_TIMERS = 100;
/** The longest delay accepted (browsers clamp to a signed 32-bit millisecond count). */
export const MAX_TIMER_MS = 2_147_483_647;

export class TimerTable extends Map<string, number> {
  /** Removes and returns the call ids of timers due by `now`, earliest first. */
  takeDue(now: number): string[] {
    if (this.size === 0) return [];
    const due = [...this].filter(([, at]) => at <= now).sort((a, b) => a[1] - b[1]);
    for (const [callId] of due) this.delete(callId);
    return due.map(([callId]) => callId);
  }

  /** When the next timer is due (epoch ms); Infinity when none is armed. */
  nextDue(): number {
    let next = Number.POSITIVE_INFINITY;
    for (const at of this.values()) if (at < next) next = at;
    return next;
  }
}
