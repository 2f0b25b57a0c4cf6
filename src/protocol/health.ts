/**
 * `grpc.health.v1.Health` (Check, Watch and List) for one server, from grpc-health-check:
 * one status for the whole server ("") and one per service it serves, all SERVING or
 * all NOT_SERVING together. The owner decides what serving means (the sidecar: its
 * orchestrator link is up and it is not draining; the orchestrator: not draining).
 * Apart from those, `liveness` is SERVING for as long as the process answers: a
 * liveness probe must not restart a sidecar because its orchestrator is away.
 *
 * The library parses its .proto with protobufjs as it loads, so it loads at the first
 * health call (./deferred-service.ts); until then the statuses live here, and the
 * library's implementation starts with them.
 */
import type * as grpc from "@grpc/grpc-js";
import { createRequire } from "node:module";
import type { HealthImplementation } from "grpc-health-check";
import { addDeferred } from "./deferred-service.js";

/** The service name a Health check names for a whole server. */
export const OVERALL = "";
/** Always SERVING while the process runs (liveness probes); not tied to dependencies or drain. */
export const LIVENESS = "liveness";

type Status = "SERVING" | "NOT_SERVING";
const require = createRequire(import.meta.url);

export class ServingHealth {
  /** The library's implementation, once a health call arrived on one of the servers. */
  private impl: HealthImplementation | undefined;
  private readonly statuses = new Map<string, Status>();
  private serving: boolean | undefined;

  constructor(private readonly services: readonly string[]) {
    this.set(false);
    this.setStatus(LIVENESS, "SERVING");
  }

  get isServing(): boolean {
    return this.serving === true;
  }

  /** Sets every status of this server; watchers hear only real changes. */
  set(serving: boolean): void {
    if (serving === this.serving) return;
    this.serving = serving;
    const status = serving ? "SERVING" : "NOT_SERVING";
    for (const name of [OVERALL, ...this.services]) this.setStatus(name, status);
  }

  private setStatus(name: string, status: Status): void {
    this.statuses.set(name, status);
    this.impl?.setStatus(name, status);
  }

  /** The library's implementation with the statuses so far (one for every server this health is added to). */
  private implementation(): HealthImplementation {
    if (!this.impl) {
      const { HealthImplementation: Impl } = require("grpc-health-check") as typeof import("grpc-health-check");
      this.impl = new Impl(Object.fromEntries(this.statuses));
    }
    return this.impl;
  }

  addToServer(server: grpc.Server): void {
    addDeferred(server, {
      name: "grpc.health.v1.Health",
      methods: { "/grpc.health.v1.Health/Check": "unary", "/grpc.health.v1.Health/Watch": "serverStream", "/grpc.health.v1.Health/List": "unary" },
      addTo: (target) => this.implementation().addToServer(target as grpc.Server),
    });
  }
}
