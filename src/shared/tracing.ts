/**
 * OpenTelemetry tracing for a codemode process, configured only by the standard OTEL_*
 * environment variables. Off unless configured: then the SDK is never loaded, no
 * provider is registered, and `tracingEnabled()` is false so instrumented code skips all
 * span work. On: spans go to an OTLP/HTTP (JSON) exporter in batches; trace context
 * crosses gRPC as W3C `traceparent`/`tracestate` metadata. No context manager is
 * installed: code that makes spans passes parent contexts explicitly. Nothing of
 * OpenTelemetry is imported until tracing starts.
 */
import type { Logger } from "./logger.js";

export type TracingConfig = { enabled: true; endpoint: string } | { enabled: false; why: string };

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Whether to trace, from the environment: off when OTEL_SDK_DISABLED=true; with
 * OTEL_TRACES_EXPORTER set, on only when it lists `otlp` (`none` turns it off);
 * otherwise on when an OTLP endpoint is configured.
 */
export function tracingConfig(env: Env = process.env): TracingConfig {
  if ((env.OTEL_SDK_DISABLED ?? "").trim().toLowerCase() === "true") return { enabled: false, why: "OTEL_SDK_DISABLED=true" };
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT || "";
  const exporters = (env.OTEL_TRACES_EXPORTER ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (exporters.length > 0) {
    if (!exporters.includes("otlp")) return { enabled: false, why: `OTEL_TRACES_EXPORTER=${exporters.join(",")}` };
    return { enabled: true, endpoint: endpoint || "http://localhost:4318" };
  }
  if (!endpoint) return { enabled: false, why: "no OTEL_EXPORTER_OTLP_ENDPOINT" };
  return { enabled: true, endpoint };
}

let enabled = false;

/** True once `startTracing` registered a provider: instrumented code makes spans only then. */
export function tracingEnabled(): boolean {
  return enabled;
}

export type Tracing = { enabled: boolean; shutdown(): Promise<void> };

const PROTOCOLS_SPOKEN = new Set(["http/json"]);

/** Starts tracing when the environment asks for it (see `tracingConfig`); idempotent per process. */
export async function startTracing(defaultServiceName: string, version: string, log: Logger, env: Env = process.env): Promise<Tracing> {
  const config = tracingConfig(env);
  if (!config.enabled || enabled) return { enabled: enabled, shutdown: async () => {} };
  for (const key of ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"]) {
    const p = env[key];
    if (p && !PROTOCOLS_SPOKEN.has(p.trim().toLowerCase())) {
      log.warn({ [key]: p }, "this build exports traces as OTLP/HTTP with JSON bodies (http/json) only; the configured protocol is ignored");
      break;
    }
  }
  for (const name of (env.OTEL_TRACES_EXPORTER ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s && s !== "otlp")) {
    log.warn({ exporter: name }, "unsupported OTEL_TRACES_EXPORTER entry ignored (only otlp is built in)");
  }
  const [{ propagation, trace }, { BasicTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { W3CTraceContextPropagator }, resources, semconv] =
    await Promise.all([
      import("@opentelemetry/api"),
      import("@opentelemetry/sdk-trace-base"),
      import("@opentelemetry/exporter-trace-otlp-http"),
      import("@opentelemetry/core"),
      import("@opentelemetry/resources"),
      import("@opentelemetry/semantic-conventions"),
    ]);
  // Defaults first; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override them.
  const resource = resources
    .resourceFromAttributes({ [semconv.ATTR_SERVICE_NAME]: defaultServiceName, [semconv.ATTR_SERVICE_VERSION]: version })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] });
  trace.setGlobalTracerProvider(provider);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  enabled = true;
  log.info({ endpoint: config.endpoint, service: resource.attributes[semconv.ATTR_SERVICE_NAME] }, "tracing on: OTLP/HTTP exporter");
  return {
    enabled: true,
    async shutdown() {
      try {
        await provider.shutdown();
      } catch (err) {
        log.warn({ err }, "flushing traces at shutdown failed");
      }
    },
  };
}
