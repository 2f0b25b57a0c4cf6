/**
 * `grpc.health.v1.Health` (Check and Watch) for one server, from grpc-health-check:
 * one status for the whole server ("") and one per service it serves, all SERVING or
 * all NOT_SERVING together. The owner decides what serving means (the sidecar: its
 * orchestrator link is up and it is not draining; the orchestrator: not draining).
 * Apart from those, `liveness` is SERVING for as long as the process answers: a
 * liveness probe must not restart a sidecar because its orchestrator is away.
 */
import type * as grpc from "@grpc/grpc-js";
import { HealthImplementation } from "grpc-health-check";

/** The service name a Health check names for a whole server. */
export const OVERALL = "";
/** Always SERVING while the process runs (liveness probes); not tied to dependencies or drain. */
export const LIVENESS = "liveness";

export class ServingHealth {
  private readonly impl = new HealthImplementation();
  private serving: boolean | undefined;

  constructor(private readonly services: readonly string[]) {
    this.set(false);
    this.impl.setStatus(LIVENESS, "SERVING");
  }

  get isServing(): boolean {
    return this.serving === true;
  }

  /** Sets every status of this server; watchers hear only real changes. */
  set(serving: boolean): void {
    if (serving === this.serving) return;
    this.serving = serving;
    const status = serving ? "SERVING" : "NOT_SERVING";
    for (const name of [OVERALL, ...this.services]) this.impl.setStatus(name, status);
  }

  addToServer(server: grpc.Server): void {
    this.impl.addToServer(server);
  }
}
