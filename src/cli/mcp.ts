/**
 * `codemode mcp --config FILE`: reads flags, starts the MCP front (src/mcp/front.ts),
 * wires signals. On stdio, stdout is the MCP channel: the ready line goes to stderr and the
 * process exits when the client closes stdin. With `--http HOST:PORT` it prints
 * `ready mcp=http://HOST:PORT/mcp` on stdout.
 */
import { parseArgs } from "node:util";
import { LIMITS } from "../shared/config.js";
import { parseHostPort } from "../shared/address.js";
import { createLogger } from "../shared/logger.js";
import { MCP_RUN_LIMITS } from "../shared/mcp-run/config.js";
import { loadFrontConfig } from "../mcp/config.js";
import { startMcpFront } from "../mcp/front.js";
import { UsageError } from "./exec.js";
import { clientSecurity, clientSecurityFlags, SECURITY_USAGE } from "./security-flags.js";
import { onShutdown } from "./signals.js";

const USAGE = `usage: codemode mcp --config FILE [--http HOST:PORT] [--sandbox HOST:PORT --orchestrator HOST:PORT]
                    [--timeout-ms N] [--max-memory-bytes N] [--max-log-bytes N] [--max-tool-calls N]
                    [--max-concurrent-calls N] [--threads N]
                    (remote services: ${SECURITY_USAGE.client})`;

function limitFlag(value: string | undefined, flag: string, range: { default: number; min: number; max: number }, fallback = range.default): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < range.min || n > range.max)
    throw new UsageError(`${flag} must be an integer from ${range.min} to ${range.max}, got ${JSON.stringify(value)}`);
  return n;
}

export async function runMcp(argv: string[]): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        config: { type: "string" },
        http: { type: "string" },
        sandbox: { type: "string" },
        orchestrator: { type: "string" },
        "timeout-ms": { type: "string" },
        "max-memory-bytes": { type: "string" },
        "max-log-bytes": { type: "string" },
        "max-tool-calls": { type: "string" },
        "max-concurrent-calls": { type: "string" },
        threads: { type: "string" },
        ...clientSecurityFlags,
      },
      strict: true,
    }));
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${USAGE}`);
  }
  if (!values.config) throw new UsageError(`--config is required\n${USAGE}`);
  if ((values.sandbox === undefined) !== (values.orchestrator === undefined))
    throw new UsageError(`give both --sandbox and --orchestrator (remote services), or neither (embedded)\n${USAGE}`);
  const http = values.http !== undefined ? parseHostPort(values.http, "--http") : undefined;
  if (values.sandbox !== undefined) parseHostPort(values.sandbox, "--sandbox");
  if (values.orchestrator !== undefined) parseHostPort(values.orchestrator, "--orchestrator");
  const limits = {
    timeoutMs: limitFlag(values["timeout-ms"], "--timeout-ms", LIMITS.timeoutMs, 30_000),
    maxMemoryBytes: limitFlag(values["max-memory-bytes"], "--max-memory-bytes", LIMITS.memoryLimitBytes),
    maxLogBytes: limitFlag(values["max-log-bytes"], "--max-log-bytes", MCP_RUN_LIMITS.maxLogBytes),
    maxToolCalls: limitFlag(values["max-tool-calls"], "--max-tool-calls", MCP_RUN_LIMITS.maxToolCalls),
    maxConcurrentCalls: limitFlag(values["max-concurrent-calls"], "--max-concurrent-calls", LIMITS.maxPendingToolCalls),
  };
  const threads = values.threads !== undefined ? limitFlag(values.threads, "--threads", { default: 1, min: 1, max: 256 }) : undefined;
  const config = await loadFrontConfig(values.config);
  const log = createLogger("codemode-mcp");
  let stopping: Promise<void> | undefined;
  let closeFront: (() => Promise<void>) | undefined;
  const stop = () => (stopping ??= closeFront ? closeFront() : Promise.resolve());
  const front = await startMcpFront({
    config,
    log,
    limits,
    ...(http ? { http } : {}),
    ...(values.sandbox !== undefined && values.orchestrator !== undefined
      ? { remote: { sandbox: values.sandbox, orchestrator: values.orchestrator, security: clientSecurity(values) } }
      : {}),
    ...(threads !== undefined ? { threads } : {}),
    onStdioClosed: () => void stop().then(() => process.exit(0)),
  });
  closeFront = front.close;
  if (front.url) process.stdout.write(`ready mcp=${front.url}\n`);
  else process.stderr.write(`ready mcp=stdio servers=${config.servers.length}\n`);
  onShutdown(log, stop);
}
