#!/usr/bin/env python3
"""A complete minimal gateway for codemode-sidecar.

It registers four tools (one of them from an MCP server, one slow, one that needs a
person's approval), opens a run, gives the model exactly `exec` and `wait`, runs a program
"the model wrote", answers every nested tool call, follows `waiting` results with `wait` as
the model would, and prints each result's `model_json` (the exec/wait tool result the model
reads) as one line. The approval is asked on stdin (`approve send_summary {...}? [y/N]`, on
stderr); anything but y/yes, or the end of stdin, denies it.

    npm start                                             # in another terminal
    clients/python/generate.sh                            # once: the gRPC stubs
    /usr/bin/python3 clients/python/example_gateway.py    # [--sandbox ADDR] [--orchestrator ADDR]
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codemode_client import (  # noqa: E402
    Annotations,
    CodeModeClient,
    CodeModeConfig,
    Decision,
    McpServerSpec,
    Scope,
    ToolCall,
    ToolSource,
    ToolSpec,
    WaitReason,
)


# --- the gateway's tools (its own code, auth and approvals stay here) ---------------------
def get_weather(args: dict[str, Any]) -> dict[str, Any]:
    if args["city"] == "Atlantis":
        raise LookupError(f"no weather station in {args['city']}")  # the guest gets a catchable Error
    return {"city": args["city"], "tempC": {"Oslo": 4, "Lima": 19}.get(args["city"], 12)}


def build_report(args: dict[str, Any]) -> dict[str, Any]:
    time.sleep(1.5)  # slower than the exec's timeoutMs: the exec returns `waiting`
    return {"kind": args["kind"], "rows": 3}


def create_issue(args: dict[str, Any]) -> dict[str, Any]:  # an MCP tool: answer with a CallToolResult
    return {"content": [{"type": "text", "text": f"created issue #42: {args['title']}"}], "structuredContent": {"number": 42}}


def send_summary(args: dict[str, Any]) -> dict[str, Any]:  # runs only once a person approved it
    return {"sent_to": args["to"], "chars": len(args["text"])}


_ask_lock = threading.Lock()  # parallel calls needing approval ask one after another


def ask_on_stdin(call: ToolCall, reason: str) -> Decision:
    """The approver: asks the person at the terminal. True approves; a string denies."""
    with _ask_lock:
        print(f"approve {call.tool_name} {call.input_json}? ({reason}) [y/N] ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
    if not line:
        return "nobody answered on stdin"
    return True if line.strip().lower() in ("y", "yes") else "the person said no"


CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [
    ToolSpec("get_weather", "Current weather for a city.", CITY, handler=get_weather),
    ToolSpec("build_report", "Build a report (slow).", {"type": "object", "properties": {"kind": {"type": "string"}}}, handler=build_report),
    ToolSpec(
        "create_issue",
        "Create a GitHub issue.",
        {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
        source=ToolSource.MCP,
        owner="github",  # the MCP server's name: catalog id mcp:github:create_issue
        output_schema={"type": "object", "properties": {"number": {"type": "integer"}}},
        annotations=Annotations(destructive_hint=True),
        handler=create_issue,
    ),
    ToolSpec(
        "send_summary",
        "Email a summary to someone.",
        {"type": "object", "properties": {"to": {"type": "string"}, "text": {"type": "string"}}, "required": ["to", "text"]},
        handler=send_summary,
        needs_approval="sends an email on your behalf",  # answered "approval pending", then ask_on_stdin decides
    ),
]
MCP_SERVERS = [McpServerSpec("github", server_id="github-mcp", title="GitHub", version="1.0.0", description="Issues and pull requests.")]

# The `code` argument of the model's exec call.
MODEL_PROGRAM = """
const weather = await Promise.all(["Oslo", "Lima"].map((city) => tools.get_weather({ city })));
let missing;
try { await tools.get_weather({ city: "Atlantis" }); } catch (e) { missing = e.message; }
const issue = await MCP.github.createIssue({ title: weather.map((w) => `${w.city} ${w.tempC}C`).join(", ") });
text(issue.content[0].text);
const report = await tools.build_report({ kind: "weekly" });
let sent;
try { sent = await tools.send_summary({ to: "team@example.com", text: `report: ${report.rows} rows` }); }
catch (e) { sent = `${e.name}: ${e.message}`; }  // ApprovalDenied when the person said no
return { weather, missing, issue: issue.structuredContent.number, report, sent };
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sandbox", default="127.0.0.1:7300", help="a sandbox sidecar (Sandbox service)")
    parser.add_argument("--orchestrator", default="127.0.0.1:7301", help="the orchestrator (Control service)")
    parser.add_argument("--max-waits", type=int, default=10)
    args = parser.parse_args()

    turn = uuid.uuid4().hex[:8]
    scope = Scope(agent_id="example-agent", session_id=f"session-{turn}", session_key="agent:example:main", agent_run_id=f"run-{turn}")
    with CodeModeClient(orchestrator=args.orchestrator, sandbox=args.sandbox) as client:
        # Orchestrator: the run's catalog, policy and config (the ToolSpecs' handlers answer calls).
        run = client.open_run(scope, tools=TOOLS, mcp_servers=MCP_SERVERS, config=CodeModeConfig(timeout_ms=1000), approver=ask_on_stdin)
        try:
            surface = run.describe_surface()  # send surface.tools_json to the model: exec and wait
            print(f"model tools: {surface.tool_names} ({surface.serialized_bytes} bytes)", file=sys.stderr)

            # Sidecar: the model called exec(MODEL_PROGRAM).
            result = run.exec(MODEL_PROGRAM, language="javascript")
            print(result.model_json)  # the exec tool result, to the model
            waits = 0
            while result.waiting and result.code_mode_run_id and waits < args.max_waits:
                if result.reason is WaitReason.APPROVAL:
                    # Only a person's decision can move the program on: a real gateway ends the
                    # model's turn here and resumes when the decision lands; this one waits for
                    # the prompt (the decision is kept with the suspended run).
                    print(f"waiting for approval: {json.dumps([p.tool_name for p in result.awaiting_approval])}", file=sys.stderr)
                    client.join_answers()
                # The model called wait({runId}); any sidecar may serve it.
                result = run.wait(result.code_mode_run_id)
                print(result.model_json)
                waits += 1
        finally:
            run.close()  # end of the agent run: drops suspended snapshots and the trajectory
    return 0 if result.completed else 1


if __name__ == "__main__":
    sys.exit(main())
