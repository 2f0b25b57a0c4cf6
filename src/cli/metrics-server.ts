/**
 * Prometheus metrics for operators: one prom-client registry per process (shared by the
 * sidecar and the orchestrator under `codemode start`) and a plain HTTP server that
 * serves it on its own port (`--metrics-address HOST:PORT`, port 0 allowed), apart from
 * the gRPC ports so a scraper needs no gRPC and cannot reach the services. Without the
 * flag no port is opened and nothing here is loaded. With the process's TLS (`--tls-cert`)
 * it serves HTTPS, and with a client CA it requires client certificates, as its gRPC ports do.
 */
import { createServer, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { ServerTls } from "../protocol/credentials.js";
import { once } from "node:events";
import { collectDefaultMetrics, Registry } from "prom-client";
import { formatHostPort, type HostPort } from "../shared/address.js";
import type { Logger } from "../shared/logger.js";

/** Every metric name of this product starts with this. */
export const METRIC_PREFIX = "codemode_";

/** A registry with the process metrics (CPU, memory, event loop lag, GC) under the prefix. */
export function createMetricsRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });
  return registry;
}

export type MetricsServer = { address: string; close(): Promise<void> };

/** Serves `GET /metrics` (the text exposition format) and nothing else. */
export async function startMetricsServer(registry: Registry, listen: HostPort, log: Logger, tls?: ServerTls): Promise<MetricsServer> {
  const handle: Parameters<typeof createServer>[1] = (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" || (path !== "/metrics" && path !== "/")) {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found: scrape /metrics\n");
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
      (err: unknown) => {
        log.warn({ err }, "collecting metrics failed");
        res.writeHead(500, { "content-type": "text/plain" }).end("collecting metrics failed\n");
      },
    );
  };
  const server: Server = tls
    ? createHttpsServer({ cert: tls.cert, key: tls.key, ...(tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: true } : {}) }, handle)
    : createServer(handle);
  server.keepAliveTimeout = 5_000;
  // The gRPC servers keep the process alive; this one must not (a failed start exits).
  server.unref();
  server.listen(listen.port, listen.host.replace(/^\[(.*)\]$/, "$1"));
  await Promise.race([
    once(server, "listening"),
    once(server, "error").then(([err]) => {
      throw new Error(`--metrics-address ${formatHostPort(listen)}: ${(err as Error).message}`);
    }),
  ]);
  const bound = server.address();
  const port = bound !== null && typeof bound === "object" ? bound.port : listen.port;
  const address = formatHostPort({ host: listen.host, port });
  log.info({ address, tls: tls ? (tls.clientCa ? "mtls" : "tls") : "plaintext" }, "metrics listening");
  return {
    address,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
