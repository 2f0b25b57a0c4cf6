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

export async function gatewayExec(
  stack: Stack,
  scope: RunScope | ReturnType<typeof newScope>,
  tools: TestTool[],
  code: string,
  config: Record<string, unknown> = {},
): Promise<ExecOutcome & { answered: Answered[] }> {
  const answered: Answered[] = [];
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
        await stack.sandbox.bridgeCallback({ scope, callId: call.callId, outcome });
      })(),
    );
  });
  await Promise.allSettled(inflight);
  return { ...out, answered };
}
