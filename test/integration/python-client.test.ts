/**
 * Runs the Python gateway client's own tests (clients/python/tests, unittest) inside
 * `npm test`: generates the stubs with clients/python/generate.sh, then runs Debian's
 * /usr/bin/python3 against the real service (dist/, built by `npm test` before vitest).
 * Also installs the client as a package (clients/python/pyproject.toml) into a temporary
 * directory, offline, with Debian's pip and setuptools, and imports it from there.
 * Fails with the Python output when they fail, and with a clear message when Python,
 * grpcio, protobuf or the stub generators are missing: it never skips.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

  it("installs as a package with pip, offline, and imports from the install with its stubs", async () => {
    const target = mkdtempSync(join(tmpdir(), "codemode-client-"));
    try {
      // The command clients/python/README.md gives: no index, no build isolation (Debian's
      // setuptools builds it), no dependencies fetched (grpcio and protobuf are Debian's).
      const installed = await run(
        PYTHON,
        ["-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps", "--target", target, "./clients/python"],
        180_000,
      );
      if (installed.code !== 0)
        fail(`pip install ./clients/python failed (it needs Debian's python3-pip, python3-setuptools and python3-wheel); ${FIX}`, installed);
      // -I: neither PYTHONPATH nor the working directory is on sys.path, only the install.
      const probe = [
        "import importlib.metadata as md, json, sys",
        `sys.path.insert(0, ${JSON.stringify(target)})`,
        "import codemode_client",
        "from codemode_client import CodeModeClient",
        "from codemode_client._proto import sandbox_pb2",
        "CodeModeClient(orchestrator='127.0.0.1:1', sandbox='127.0.0.1:1').close()",
        "print(json.dumps({'client': codemode_client.__file__, 'stubs': sandbox_pb2.__file__, 'version': md.version('codemode-client'), 'requires': [r.translate(str.maketrans('', '', ' ()')) for r in md.requires('codemode-client')]}))",
      ].join("\n");
      const imported = await run(PYTHON, ["-I", "-c", probe], 60_000);
      if (imported.code !== 0) fail("the installed codemode_client does not import", imported);
      const seen = JSON.parse(imported.output.trim().split("\n").at(-1)!) as { client: string; stubs: string; version: string; requires: string[] };
      expect(seen.client).toBe(join(target, "codemode_client", "__init__.py"));
      expect(seen.stubs).toBe(join(target, "codemode_client", "_gen", "codemode", "sandbox", "v1", "sandbox_pb2.py"));
      expect(seen.version).toBe("0.1.0");
      expect(seen.requires).toEqual(["grpcio>=1.51", "protobuf>=4.21"]);
    } finally {
      rmSync(target, { recursive: true, force: true });
    }
  }, 240_000);
});
