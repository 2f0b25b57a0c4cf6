/**
 * A sidecar of "another build" for upgrade tests: a copy of this package whose code-mode
 * prelude defines one more global (`__oldBuild`), so its snapshots carry another engine
 * fingerprint, started against an orchestrator's link with the shared snapshot key.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { copyPackage, SHARED_SNAPSHOT_KEY, spawnCodemode, type Proc } from "./harness.js";

export type OldBuild = { proc: Proc; sandbox: ReturnType<typeof createClient<typeof Sandbox.method>> };

export async function startOldBuildSidecar(linkAddress: string, prefix = "codemode-old-build-"): Promise<OldBuild> {
  const dir = copyPackage(prefix);
  const prelude = join(dir, "dist", "sandbox", "surfaces", "code-mode", "prelude.js");
  const text = readFileSync(prelude, "utf8");
  expect(text).toContain("const G = globalThis;");
  writeFileSync(prelude, text.replace("const G = globalThis;", 'const G = globalThis; G.__oldBuild = "yes";'));
  const proc = await spawnCodemode(
    ["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", linkAddress, "--threads", "1"],
    { CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY, CODEMODE_BUNDLE: "0" },
    join(dir, "bin", "codemode.js"),
  );
  return { proc, sandbox: createClient(Sandbox, proc.ready.sandbox!) };
}
