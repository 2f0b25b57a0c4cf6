/**
 * Which VM sessions this worker thread hosts right now. A thread is killed when one
 * guest's native loop ignores its deadline, and every VM on it dies with it; so whenever
 * a thread hosts more than one session, each idle VM keeps a parked copy of itself on the
 * main thread (see GuestSession.park), from which the pool continues it on another
 * thread. A session that arrives parks its idle neighbours before it runs anything.
 */
export type Parkable = { parkIfIdle(): void };

const sessions = new Set<Parkable>();

export function enter(session: Parkable): void {
  for (const other of sessions) other.parkIfIdle();
  sessions.add(session);
}

export function leave(session: Parkable): void {
  sessions.delete(session);
}

/** True when another session shares this thread. */
export function cohosted(): boolean {
  return sessions.size > 1;
}
