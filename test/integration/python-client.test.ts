/**
 * Runs the Python gateway client's own tests (clients/python/tests, unittest) inside
 * `npm test`: generates the stubs with clients/python/generate.sh, then runs Debian's
 * /usr/bin/python3 against the real service (dist/, built by `npm test` before vitest).
 * Fails with the Python output when they fail, and with a clear message when Python,
 * grpcio, protobuf or the stub generators are missing: it never skips.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** Debian's Python: the `python3` first on PATH may be another build that cannot see Debian's packages. */
const PYTHON = "/usr/bin/python3";
const FIX = "run `bash scripts/ensure-test-deps.sh` as root or with sudo (npm test's pretest step does)";

type Ran = { code: number | null; output: string };

/** Runs a command in the repository root; stdout and stderr interleaved, as a terminal shows them. */
function run(command: string, args: string[], timeoutMs: number): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, CODEMODE_NODE: process.execPath }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGTERM");
      output += `\n[killed after ${timeoutMs} ms]`;
    }, timeoutMs);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

function fail(what: string, ran: Ran): never {
  throw new Error(`${what} (exit ${ran.code}):\n${ran.output}`);
}

describe("Python gateway client (clients/python)", () => {
  it("Debian's python3 has grpcio and protobuf, and generate.sh builds the stubs", async () => {
    if (!existsSync(PYTHON))
      throw new Error(`${PYTHON} is missing: the Python client's tests need Debian's python3 with python3-grpcio and python3-protobuf; ${FIX}`);
    const imports = await run(PYTHON, ["-c", "import grpc, google.protobuf"], 30_000);
    if (imports.code !== 0) fail(`${PYTHON} cannot import grpc and google.protobuf (Debian: python3-grpcio, python3-protobuf); ${FIX}`, imports);
    const generated = await run("bash", ["clients/python/generate.sh"], 60_000);
    if (generated.code !== 0)
      fail(
        `clients/python/generate.sh failed (it needs protoc and grpc_python_plugin: Debian's protobuf-compiler and protobuf-compiler-grpc); ${FIX}`,
        generated,
      );
    expect(existsSync(`${ROOT}clients/python/codemode_client/_gen/codemode/sandbox/v1/sandbox_pb2_grpc.py`)).toBe(true);
  }, 120_000);

  it("its unittest suite passes against the real service", async () => {
    const generated = await run("bash", ["clients/python/generate.sh"], 60_000);
    if (generated.code !== 0) fail(`clients/python/generate.sh failed; ${FIX}`, generated);
    const tests = await run(PYTHON, ["-m", "unittest", "discover", "-s", "clients/python/tests", "-v"], 240_000);
    if (tests.code !== 0) fail("the Python client's tests failed", tests);
    const ran = /^Ran (\d+) tests? in /m.exec(tests.output);
    if (!ran || Number(ran[1]) === 0) fail("the Python client's tests ran nothing", tests);
    expect(tests.output).toMatch(/^OK$/m);
  }, 300_000);
});
