/**
 * A tiny gateway for tests: opens a run with a catalog and policy on the orchestrator,
 * runs execs on the sidecar, and answers each nested tool call with BridgeCallback from
 * a handler table (a handler may delay, throw, or return any JSON value).
 */
import type { RunScope } from "../../src/gen/codemode/common/v1/common_pb.js";
import { toWireMcpServer, toWireTool, type GatewayMcpServer } from "../../src/shared/tool-wire.js";
import type { ToolCallRequested } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { execute, scope as newScope, type ExecOutcome, type Stack } from "./harness.js";

export type TestTool = {
  name: string;
  description?: string;
  label?: string;
  source?: "openclaw" | "mcp" | "client";
  owner?: string;
  origin?: "core" | "bundled_plugin" | "external_plugin";
  parameters?: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: { title?: string; readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
  examples?: unknown[];
  handler?: (input: unknown, call: ToolCallRequested) => unknown;
};

export async function openRun(
  stack: Pick<Stack, "control">,
  tools: TestTool[],
  policy: { allow?: string[]; deny?: string[]; allowNone?: boolean } = {},
  extra: { disableTools?: boolean; config?: Record<string, unknown>; mcpServers?: GatewayMcpServer[] } = {},
) {
  const scope = newScope("gw");
  const res = await stack.control.openRun({
    scope,
    catalog: {
      case: "tools",
      value: {
        tools: tools.map(toWireTool),
        mcpServers: (extra.mcpServers ?? []).map(toWireMcpServer),
      },
    },
    policy: { allow: policy.allow ?? [], deny: policy.deny ?? [], allowNone: policy.allowNone ?? false },
    disableTools: extra.disableTools ?? false,
    config: extra.config ?? {},
  });
  return { scope, response: res };
}

export type Answered = { call: ToolCallRequested; input: unknown };

/** An answer BridgeCallback refused: the call, and the status it refused it with. */
export type Refused = { call: ToolCallRequested; code: string; message: string };

/**
 * Runs `code` as the gateway would: each nested call is answered with its tool's handler
 * through BridgeCallback. An answer the sidecar refuses fails the exec's promise, unless
 * `options.refusals` is "return": then the refusals come back in `refused` for the test
 * to check (a test whose answers arrive after the exec ended, for example).
 */
export async function gatewayExec(
  stack: Stack,
  scope: RunScope | ReturnType<typeof newScope>,
  tools: TestTool[],
  code: string,
  config: Record<string, unknown> = {},
  options: { refusals?: "fail" | "return" } = {},
): Promise<ExecOutcome & { answered: Answered[]; refused: Refused[] }> {
  const answered: Answered[] = [];
  const refused: Refused[] = [];
  const inflight: Promise<void>[] = [];
  const out = await execute(stack, { scope, code, config }, (call) => {
    const input = JSON.parse(call.inputJson) as unknown;
    answered.push({ call, input });
    const tool =
      tools.find((t) => t.name === call.toolName && (t.owner ?? (t.source === "openclaw" || !t.source ? "core" : "")) === call.sourceName) ??
      tools.find((t) => t.name === call.toolName);
    inflight.push(
      (async () => {
        let outcome: { case: "resultJson"; value: string } | { case: "error"; value: { name: string; message: string } };
        try {
          const v = await (tool?.handler ?? (() => ({ ok: true })))(input, call);
          outcome = { case: "resultJson", value: JSON.stringify(v ?? null) };
        } catch (err) {
          outcome = { case: "error", value: { name: (err as Error).name, message: (err as Error).message } };
        }
        try {
          await stack.sandbox.bridgeCallback({ scope, callId: call.callId, outcome });
        } catch (err) {
          refused.push({ call, code: String((err as { code?: unknown }).code ?? "unknown"), message: (err as Error).message });
        }
      })(),
    );
  });
  await Promise.all(inflight);
  if (refused.length > 0 && options.refusals !== "return") {
    const list = refused.map((r) => `${r.call.toolName} (${r.call.callId}): ${r.code}: ${r.message}`).join("; ");
    throw new Error(`BridgeCallback refused ${refused.length} answer(s): ${list}`);
  }
  return { ...out, answered, refused };
}
