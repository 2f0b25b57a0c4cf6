/**
 * A gRPC health client for tests (grpc.health.v1.Health from grpc-health-check's
 * definition): Check one service name, or Watch one and wait for a given status.
 */
import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import { until } from "./until.js";

type Reply = { status: string };
type RawHealth = grpc.Client & {
  check(req: { service: string }, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Reply) => void): void;
  watch(req: { service: string }): grpc.ClientReadableStream<Reply>;
};

const Health = grpc.makeGenericClientConstructor(healthService as unknown as grpc.ServiceDefinition, "Health");

export type Watch = { statuses: string[]; until(status: string, ms?: number): Promise<void>; close(): void };

export function healthClient(address: string) {
  const raw = new Health(address, grpc.credentials.createInsecure()) as unknown as RawHealth;
  return {
    /** The status, or the gRPC error code name (e.g. "NOT_FOUND", "UNAVAILABLE"). */
    check(service: string, timeoutMs = 5_000): Promise<string> {
      return new Promise((resolve) => {
        raw.check({ service }, { deadline: Date.now() + timeoutMs }, (err, res) => resolve(err ? grpc.status[err.code] : res!.status));
      });
    },
    /** Polls Check until it answers `status`. */
    async until(service: string, status: string, ms = 20_000): Promise<void> {
      let last = "";
      await until(async () => (last = await this.check(service)) === status, `health of ${JSON.stringify(service)} at ${address} to be ${status}`, {
        ms,
        everyMs: 100,
        detail: () => `it stayed ${last}`,
      });
    },
    watch(service: string): Watch {
      const call = raw.watch({ service });
      const statuses: string[] = [];
      const waiters = new Set<() => void>();
      call.on("data", (r: Reply) => {
        statuses.push(r.status);
        for (const w of [...waiters]) w();
      });
      call.on("error", () => {});
      return {
        statuses,
        until(status, ms = 20_000) {
          return new Promise<void>((resolve, reject) => {
            const check = () => {
              if (statuses.at(-1) !== status) return;
              clearTimeout(timer);
              waiters.delete(check);
              resolve();
            };
            const timer = setTimeout(() => {
              waiters.delete(check);
              reject(new Error(`watch of ${JSON.stringify(service)} at ${address} saw ${JSON.stringify(statuses)}, never ${status}`));
            }, ms);
            waiters.add(check);
            check();
          });
        },
        close: () => call.cancel(),
      };
    },
    close: () => raw.close(),
  };
}
