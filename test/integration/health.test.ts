/**
 * gRPC health and server reflection on both ports, through real processes: statuses per
 * service name, the sidecar going NOT_SERVING while its orchestrator is stopped and
 * SERVING again after, reflection listing and describing the public services, and
 * `codemode health` exit codes.
 */
import * as grpc from "@grpc/grpc-js";
import { fromBinary } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { FileDescriptorProtoSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { healthClient } from "../helpers/health-client.js";
import { BIN, spawnCodemode, type Proc } from "../helpers/harness.js";

const SANDBOX = "codemode.sandbox.v1.Sandbox";
const CONTROL = "codemode.orchestrator.v1.Control";
const LINK = "codemode.orchestrator.v1.SidecarLink";

let orch: Proc;
let side: Proc;
let orchAddress: string;
let linkAddress: string;
let sideAddress: string;

beforeAll(async () => {
  orch = await spawnCodemode(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0"]);
  orchAddress = orch.ready.orchestrator!;
  linkAddress = orch.ready.link!;
  side = await spawnCodemode(["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", linkAddress, "--threads", "1"]);
  sideAddress = side.ready.sandbox!;
});

afterAll(async () => {
  expect(await side?.stop()).toBe(0);
  expect(await orch?.stop()).toBe(0);
});

/** `codemode health ARGS`: exit status and output. */
function cliHealth(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [BIN, "health", ...args], { encoding: "utf8", timeout: 30_000, env: { ...process.env, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** One ServerReflectionInfo exchange (grpc.reflection.v1 or v1alpha), encoded by hand: services listed and files for `symbols`. */
async function reflect(address: string, symbols: string[], version = "v1") {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const call = client.makeBidiStreamRequest(
    `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
    (b: Buffer) => b,
    (b: Buffer) => b,
  );
  const services: string[] = [];
  const files: FileDescriptorProto[] = [];
  const errors: string[] = [];
  call.on("data", (buf: Buffer) => {
    const r = new BinaryReader(buf);
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      if (no === 6) {
        // list_services_response { repeated ServiceResponse service = 1 { string name = 1 } }
        const list = new BinaryReader(r.bytes());
        while (list.pos < list.len) {
          list.tag();
          const svc = new BinaryReader(list.bytes());
          svc.tag();
          services.push(svc.string());
        }
      } else if (no === 4) {
        // file_descriptor_response { repeated bytes file_descriptor_proto = 1 }
        const fr = new BinaryReader(r.bytes());
        while (fr.pos < fr.len) {
          fr.tag();
          files.push(fromBinary(FileDescriptorProtoSchema, fr.bytes()));
        }
      } else if (no === 7) {
        // error_response { int32 error_code = 1; string error_message = 2 }
        const er = new BinaryReader(r.bytes());
        while (er.pos < er.len) {
          const [f, w] = er.tag();
          if (f === 2) errors.push(er.string());
          else er.skip(w);
        }
      } else r.skip(wt);
    }
  });
  const ended = new Promise<void>((resolve, reject) => {
    call.on("end", resolve);
    call.on("error", reject);
  });
  call.write(Buffer.from(new BinaryWriter().tag(7, WireType.LengthDelimited).string("*").finish()));
  for (const s of symbols) call.write(Buffer.from(new BinaryWriter().tag(4, WireType.LengthDelimited).string(s).finish()));
  call.end();
  await ended;
  client.close();
  return { services, files, errors };
}

describe("grpc.health.v1.Health", () => {
  it("answers Check per service name on both ports, and NOT_FOUND for names a port does not serve", async () => {
    const s = healthClient(sideAddress);
    const o = healthClient(orchAddress);
    try {
      await s.until("", "SERVING");
      expect(await s.check(SANDBOX)).toBe("SERVING");
      expect(await s.check(CONTROL)).toBe("NOT_FOUND");
      for (const name of ["", CONTROL, LINK]) expect(await o.check(name)).toBe("SERVING");
      expect(await o.check(SANDBOX)).toBe("NOT_FOUND");
      const unknown = s.watch("no.such.Service");
      await unknown.until("SERVICE_UNKNOWN");
      unknown.close();
    } finally {
      s.close();
      o.close();
    }
  });

  it("the sidecar is NOT_SERVING while its orchestrator is stopped and SERVING again after it returns (Watch and Check)", async () => {
    const s = healthClient(sideAddress);
    const o = healthClient(orchAddress);
    const overall = s.watch("");
    const sandbox = s.watch(SANDBOX);
    const control = o.watch(CONTROL);
    try {
      await overall.until("SERVING");
      await sandbox.until("SERVING");
      await control.until("SERVING");
      expect(await orch.stop()).toBe(0);
      // The stopping orchestrator told its watchers before it went.
      expect(control.statuses).toEqual(["SERVING", "NOT_SERVING"]);
      await overall.until("NOT_SERVING");
      await sandbox.until("NOT_SERVING");
      expect(await s.check("")).toBe("NOT_SERVING");
      const down = cliHealth(["--address", sideAddress]);
      expect(down.status).toBe(1);
      expect(down.stderr).toContain(`${sideAddress} "": NOT_SERVING`);

      orch = await spawnCodemode(["orchestrator", "--orchestrator-address", orchAddress, "--link-address", linkAddress]);
      await overall.until("SERVING");
      await sandbox.until("SERVING");
      expect(await s.check(SANDBOX)).toBe("SERVING");
      expect(overall.statuses.filter((x, i) => x !== overall.statuses[i - 1])).toEqual(["SERVING", "NOT_SERVING", "SERVING"]);
    } finally {
      for (const w of [overall, sandbox, control]) w.close();
      s.close();
      o.close();
    }
  });
});

describe("server reflection", () => {
  it("lists and describes the Sandbox service on the sidecar port", async () => {
    const { services, files, errors } = await reflect(sideAddress, [SANDBOX]);
    expect(services).toEqual([SANDBOX]);
    expect(errors).toEqual([]);
    const file = files.find((f) => f.name === "codemode/sandbox/v1/sandbox.proto");
    expect(file?.service.map((svc) => [svc.name, svc.method.map((m) => m.name)])).toEqual([
      ["Sandbox", ["Exec", "Wait", "BridgeCallback", "ToolSearch", "ToolDescribe", "ToolCall", "ExecSession"]],
    ]);
    // Its import comes along, so a client can resolve every message.
    expect(files.map((f) => f.name)).toContain("codemode/common/v1/common.proto");
    // v1alpha, which older grpcurl builds speak, answers the same.
    const alpha = await reflect(sideAddress, [SANDBOX], "v1alpha");
    expect([alpha.services, alpha.errors, alpha.files.map((f) => f.name).sort()]).toEqual([services, errors, files.map((f) => f.name).sort()]);
  });

  it("lists and describes Control on the orchestrator port; SidecarLink stays internal", async () => {
    const { services, files, errors } = await reflect(orchAddress, [CONTROL, LINK]);
    expect(services).toEqual([CONTROL]);
    const control = files.find((f) => f.name === "codemode/orchestrator/v1/control.proto");
    expect(control?.service[0]?.method.map((m) => m.name)).toEqual(
      expect.arrayContaining(["PutCatalog", "OpenRun", "DescribeSurface", "GetTrajectory", "CloseRun"]),
    );
    expect(errors).toEqual([expect.stringMatching(/not found/i)]);
  });
});

describe("codemode health", () => {
  it("exits 0 when SERVING, 1 for an unknown service or an unreachable address, 2 for usage errors", () => {
    const ok = cliHealth(["--address", orchAddress, "--service", CONTROL]);
    expect(ok.status).toBe(0);
    expect(ok.stdout).toContain(`"${CONTROL}": SERVING`);
    expect(cliHealth([], { CODEMODE_HEALTH_ADDRESS: sideAddress }).status).toBe(0);
    const unknown = cliHealth(["--address", sideAddress, "--service", CONTROL]);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toMatch(/no health status for service/);
    const unreachable = cliHealth(["--address", "127.0.0.1:1", "--timeout-ms", "2000"]);
    expect(unreachable.status).toBe(1);
    expect(unreachable.stderr).toMatch(/cannot check 127\.0\.0\.1:1/);
    expect(cliHealth(["--address", "nowhere"]).status).toBe(2);
    expect(cliHealth(["--bogus"]).status).toBe(2);
  });
});
