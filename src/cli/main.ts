/**
 * The `codemode` command: only reads argv, dispatches, and maps failures to exit codes
 * (2 for usage errors, 1 for anything else). Each subcommand lives in its own module,
 * imported only when it runs: a server's start path must never load the clients' or the
 * MCP front's dependencies (the MCP SDK, zod for tool modules).
 */
import { UsageError } from "./usage-error.js";

const HELP = `codemode: a code-mode runtime for AI agents

  codemode start          orchestrator + sandbox on localhost (in-memory state)
  codemode sandbox        a sandbox sidecar (--sandbox-address, --orchestrator-address: the orchestrator's link port)
  codemode orchestrator   the orchestrator (--orchestrator-address for Control, --link-address for sidecars)
                          TLS, mTLS and bearer tokens on every port: --tls-cert/--tls-key/--tls-client-ca,
                          --auth-token-file, --link-tls-*, --link-token-file (docs/operations.md, "Transport security")
                          tenants with their own tokens, state and quotas: --tenants-file FILE (docs/configuration.md)
  codemode exec           run a program: --code STRING | FILE | - [--mode code|tool_search_code]
  codemode replay         re-run a recorded code-mode run: RUN_ID --scope JSON | --export RUN_ID --scope JSON | --from FILE
  codemode surface        print the model-visible tools and their bytes: --mode code|tool_search_code|tool_search|direct [--tools FILE.mjs]
                          (computed in-process; --orchestrator HOST:PORT asks a running service; --help for more)
  codemode mcp            an MCP server with one tool, codemode.run, over the MCP servers of --config FILE (stdio; --http HOST:PORT)
  codemode health         gRPC health check: [--address HOST:PORT] [--service NAME]; exit 0 when SERVING
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "start":
      await (await import("./serve.js")).runStart(rest);
      return -1;
    case "sandbox":
      await (await import("./serve.js")).runSandbox(rest);
      return -1;
    case "orchestrator":
      await (await import("./serve.js")).runOrchestrator(rest);
      return -1;
    case "exec":
      return (await import("./exec.js")).runExec(rest);
    case "health":
      return (await import("./health.js")).runHealth(rest);
    case "replay":
      return (await import("./replay.js")).runReplay(rest);
    case "surface":
      return (await import("./surface.js")).runSurface(rest);
    case "mcp":
      await (await import("./mcp.js")).runMcp(rest);
      return -1;
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(HELP);
      return 0;
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command)}\n${HELP}`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    const usage = err instanceof UsageError || (err as { code?: string })?.code?.startsWith("ERR_PARSE_ARGS");
    process.stderr.write(`codemode: ${(err as Error)?.message ?? String(err)}\n`);
    process.exitCode = usage ? 2 : 1;
    // A server that failed to start (e.g. its sandbox pool) may leave others it opened
    // listening (`start`'s orchestrator): exit now instead of hanging without a ready line.
    if (["start", "sandbox", "orchestrator", "mcp"].includes(process.argv[2] ?? "")) process.exit();
  },
);
