/**
 * `codemode replay`: re-runs a recorded code-mode run and says whether it did the same
 * (docs/replay.md). `codemode replay RUN --scope JSON` asks the orchestrator
 * (Control.ReplayRun); `--export RUN --scope JSON` prints the run's record, to move it to
 * another machine, a bug report or a regression suite; `--from FILE` replays such a record
 * in this process, with no service running. The report is printed as JSON on stdout, its
 * one-sentence summary on stderr. Exit 0 for "same", 1 for "diverged" or "incomplete".
 */
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import { createClient } from "../protocol/grpc-client.js";
import { DEFAULT_ORCHESTRATOR_ADDRESS, parseHostPort } from "../shared/address.js";
import { clientSecurity, clientSecurityFlags, SECURITY_USAGE } from "./security-flags.js";
import { UsageError } from "./usage-error.js";

const USAGE = `usage: codemode replay RUN_ID --scope JSON [--orchestrator HOST:PORT]
       codemode replay --export RUN_ID --scope JSON [--orchestrator HOST:PORT] > run.json
       codemode replay --from FILE|-
                       ${SECURITY_USAGE.client}
--scope is the run scope the gateway used: {"agentId","sessionId","sessionKey","agentRunId"}.
RUN_ID is the code mode run id (a waiting result's runId; ToolCallRequested.code_mode_run_id).
Prints the report as JSON; exit 0 when "same", 1 when "diverged" or "incomplete".`;

type ScopeJson = { agentId: string; sessionId: string; sessionKey: string; agentRunId: string };

function scopeOf(text: string | undefined): ScopeJson {
  if (text === undefined) throw new UsageError(`--scope is required with a run id\n${USAGE}`);
  let s: Partial<ScopeJson>;
  try {
    s = JSON.parse(text) as Partial<ScopeJson>;
  } catch (err) {
    throw new UsageError(`--scope is not JSON: ${(err as Error).message}\n${USAGE}`);
  }
  const str = (v: unknown) => (typeof v === "string" ? v : "");
  if (!str(s.agentRunId)) throw new UsageError(`--scope must name its agentRunId\n${USAGE}`);
  return { agentId: str(s.agentId), sessionId: str(s.sessionId), sessionKey: str(s.sessionKey), agentRunId: str(s.agentRunId) };
}

async function readSource(path: string): Promise<string> {
  if (path !== "-") return readFile(path, "utf8");
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function report(verdict: string, summary: string, reportJson: string): number {
  process.stdout.write(`${reportJson}\n`);
  process.stderr.write(`codemode replay: ${summary}\n`);
  return verdict === "same" ? 0 : 1;
}

export async function runReplay(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        export: { type: "string" },
        from: { type: "string" },
        scope: { type: "string" },
        orchestrator: { type: "string", default: DEFAULT_ORCHESTRATOR_ADDRESS },
        ...clientSecurityFlags,
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  const modes = [values.export !== undefined, values.from !== undefined, positionals.length > 0].filter(Boolean).length;
  if (modes !== 1 || positionals.length > 1) throw new UsageError(`give one of RUN_ID, --export RUN_ID or --from FILE\n${USAGE}`);
  if (values.from !== undefined) {
    // Offline: the record runs on a thread of this process; no orchestrator is asked.
    const { parseRunRecord, replayRecord } = await import("../sandbox/replay/replay-runner.js");
    const record = parseRunRecord(await readSource(values.from));
    const r = await replayRecord(record);
    return report(r.verdict, r.summary, JSON.stringify(r));
  }
  parseHostPort(values.orchestrator, "--orchestrator");
  const scope = scopeOf(values.scope);
  const control = createClient(Control, values.orchestrator, {}, clientSecurity(values));
  try {
    if (values.export !== undefined) {
      const { recordJson } = await control.getReplayRecord({ scope, codeModeRunId: values.export });
      process.stdout.write(`${recordJson}\n`);
      return 0;
    }
    const r = await control.replayRun({ scope, codeModeRunId: positionals[0]! });
    return report(r.verdict, r.summary, r.reportJson);
  } finally {
    control.close();
  }
}
