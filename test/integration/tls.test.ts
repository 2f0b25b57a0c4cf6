/**
 * Transport security through real processes, with certificates made here by Debian's
 * openssl in a temporary directory (never committed): an orchestrator whose Control port
 * takes TLS and a gateway bearer token and whose link port takes mutual TLS and its own
 * link token; a sidecar whose Sandbox port takes mutual TLS and the gateway token. Checked:
 * `codemode exec` with a nested call works end to end over TLS; plaintext clients, a
 * client without a certificate on an mTLS port, and calls without (or with the wrong)
 * bearer token are refused; SidecarLink is not served on the Control port nor Control on
 * the link port, and each port's credentials do not open the other; sidecars with wrong
 * link credentials never become ready, and say why in their logs.
 */
import * as grpc from "@grpc/grpc-js";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { SidecarLink } from "../../src/gen/codemode/orchestrator/v1/link_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import type { ClientSecurity } from "../../src/protocol/credentials.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { toWireTool } from "../../src/shared/tool-wire.js";
import type { ServiceError } from "../../src/protocol/service-error.js";
import { healthClient } from "../helpers/health-client.js";
import { BIN, collectStream, logged, scope as newScope, SHARED_SNAPSHOT_KEY, spawnCodemode, type Proc } from "../helpers/harness.js";
import { until } from "../helpers/until.js";

const GATEWAY_TOKEN = "gateway-token-0123456789abcdef";
const LINK_TOKEN = "link-token-fedcba9876543210";

let dir: string;
const file = (name: string) => join(dir, name);
const pem = (name: string) => readFileSync(file(name));

function openssl(args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
}

/** A CA, and certificates it signs for 127.0.0.1/localhost (server and client use). */
function makeCa(name: string): void {
  openssl([
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.crt`,
    "-days",
    "1",
    "-subj",
    `/CN=${name}`,
  ]);
}
function makeCert(name: string, ca: string): void {
  writeFileSync(file(`${name}.ext`), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n");
  openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`]);
  openssl([
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    `${ca}.crt`,
    "-CAkey",
    `${ca}.key`,
    "-CAcreateserial",
    "-out",
    `${name}.crt`,
    "-days",
    "1",
    "-extfile",
    `${name}.ext`,
  ]);
}

let orch: Proc;
let side: Proc;
let controlAt: string;
let linkAt: string;
let sandboxAt: string;

/** The gateway's credentials: the CA, a client certificate (the sidecar port is mTLS) and its token. */
const gateway = (): ClientSecurity => ({ tls: { ca: pem("ca.crt"), cert: pem("gateway.crt"), key: pem("gateway.key") }, token: GATEWAY_TOKEN });
/** A sidecar's link credentials. */
const sidecarLink = (): ClientSecurity => ({ tls: { ca: pem("ca.crt"), cert: pem("sidecar.crt"), key: pem("sidecar.key") }, token: LINK_TOKEN });

const linkClientArgs = (cert = "sidecar") => [
  "--link-tls-ca",
  file("ca.crt"),
  "--link-tls-client-cert",
  file(`${cert}.crt`),
  "--link-tls-client-key",
  file(`${cert}.key`),
];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "codemode-tls-"));
  makeCa("ca");
  makeCa("other-ca");
  for (const name of ["server", "gateway", "sidecar"]) makeCert(name, "ca");
  makeCert("stranger", "other-ca");
  writeFileSync(file("gateway.token"), `${GATEWAY_TOKEN}\n`);

  orch = await spawnCodemode(
    [
      "orchestrator",
      "--orchestrator-address",
      "127.0.0.1:0",
      "--link-address",
      "127.0.0.1:0",
      "--metrics-address",
      "127.0.0.1:0",
      // Control: TLS and the gateway token.
      "--tls-cert",
      file("server.crt"),
      "--tls-key",
      file("server.key"),
      "--auth-token-file",
      file("gateway.token"),
      // SidecarLink: mutual TLS and the link token.
      "--link-tls-cert",
      file("server.crt"),
      "--link-tls-key",
      file("server.key"),
      "--link-tls-client-ca",
      file("ca.crt"),
    ],
    { CODEMODE_LINK_TOKEN: LINK_TOKEN },
  );
  controlAt = orch.ready.orchestrator!;
  linkAt = orch.ready.link!;
  side = await spawnCodemode(
    [
      "sandbox",
      "--sandbox-address",
      "127.0.0.1:0",
      "--orchestrator-address",
      linkAt,
      "--threads",
      "1",
      ...linkClientArgs(),
      // Sandbox: mutual TLS and the gateway token (from the environment).
      "--tls-cert",
      file("server.crt"),
      "--tls-key",
      file("server.key"),
      "--tls-client-ca",
      file("ca.crt"),
    ],
    { CODEMODE_LINK_TOKEN: LINK_TOKEN, CODEMODE_AUTH_TOKEN: GATEWAY_TOKEN, CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY },
  );
  sandboxAt = side.ready.sandbox!;
  await logged(side, /"msg":"orchestrator link up"/, 20_000);
});

afterAll(async () => {
  expect(await side?.stop()).toBe(0);
  expect(await orch?.stop()).toBe(0);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** `codemode health` against `address` with extra args; its exit status. */
const cliHealth = (address: string, args: string[] = []) =>
  spawnSync(process.execPath, [BIN, "health", "--address", address, "--timeout-ms", "3000", ...args], { encoding: "utf8" });

/** The ServiceError code a promise rejects with ("ok" when it resolves). */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "ok";
  } catch (err) {
    return (err as ServiceError).code ?? String(err);
  }
}

describe("TLS end to end", () => {
  it("codemode exec runs a program with a nested call over TLS, with the CA, a client certificate and the bearer token", () => {
    const r = spawnSync(
      process.execPath,
      [
        BIN,
        "exec",
        "--sandbox",
        sandboxAt,
        "--orchestrator",
        controlAt,
        "--tools",
        "examples/tools.mjs",
        "--tls-ca",
        file("ca.crt"),
        "--tls-client-cert",
        file("gateway.crt"),
        "--tls-client-key",
        file("gateway.key"),
        // The certificate's DNS name (dialling an IP with TLS, Node warns DEP0123 on stderr: grpc-js sends it as SNI).
        "--tls-server-name",
        "localhost",
        "--code",
        'const w = await tools.weather({ city: "Oslo" }); return w.city;',
      ],
      {
        encoding: "utf8",
        timeout: 30_000,
        env: { ...process.env, CODEMODE_AUTH_TOKEN: GATEWAY_TOKEN },
        cwd: fileURLToPath(new URL("../../", import.meta.url)),
      },
    );
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toMatchObject({ status: "completed", value: "Oslo" });
  });

  it("the typed client gets a nested call and answers it over mutual TLS", async () => {
    const control = createClient(Control, controlAt, {}, gateway());
    const sandbox = createClient(Sandbox, sandboxAt, {}, gateway());
    try {
      const scope = newScope("tls");
      await control.openRun({ scope, catalog: { case: "tools", value: { tools: [toWireTool({ name: "double", description: "Doubles n" })] } } });
      const out = await collectStream(sandbox.exec({ scope, execCallId: "c1", code: "return await tools.double({ n: 21 })" }), (call) => {
        void sandbox.bridgeCallback({
          scope,
          callId: call.callId,
          outcome: { case: "resultJson", value: String((JSON.parse(call.inputJson) as { n: number }).n * 2) },
        });
      });
      expect(out.model).toMatchObject({ status: "completed", value: 42 });
    } finally {
      control.close();
      sandbox.close();
    }
  });

  it("health and the metrics port answer over TLS, without a token", async () => {
    expect(cliHealth(controlAt, ["--tls-ca", file("ca.crt")]).status).toBe(0);
    // The sidecar port is mTLS: health needs a client certificate there too.
    expect(cliHealth(sandboxAt, ["--tls-ca", file("ca.crt"), "--tls-client-cert", file("gateway.crt"), "--tls-client-key", file("gateway.key")]).status).toBe(
      0,
    );
    const sandboxNoCert = cliHealth(sandboxAt, ["--tls-ca", file("ca.crt")]);
    expect(sandboxNoCert.status).toBe(1);
    const plain = cliHealth(controlAt);
    expect(plain.status).toBe(1);
    expect(plain.stderr).toMatch(/cannot check/);
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const req = request(`https://${orch.ready.metrics}/metrics`, { ca: pem("ca.crt") }, (res) => {
        res.resume();
        resolve(res.statusCode);
      });
      req.on("error", reject);
      req.end();
    });
    expect(status).toBe(200);
  });
});

describe("refusals", () => {
  it("a plaintext client is refused on every TLS port", async () => {
    const control = createClient(Control, controlAt, {}, { token: GATEWAY_TOKEN });
    expect(await outcome(control.closeRun({ scope: newScope("plain") }, { deadlineMs: 3_000 }))).toBe("unavailable");
    control.close();
    const sandbox = createClient(Sandbox, sandboxAt, {}, { token: GATEWAY_TOKEN });
    expect(
      await outcome(sandbox.bridgeCallback({ scope: newScope("plain"), callId: "x", outcome: { case: "resultJson", value: "1" } }, { deadlineMs: 3_000 })),
    ).toBe("unavailable");
    sandbox.close();
    const link = createClient(SidecarLink, linkAt, {}, { token: LINK_TOKEN });
    expect(await outcome(link.resolveRun({}, { deadlineMs: 3_000 }))).toBe("unavailable");
    link.close();
  });

  it("mutual TLS refuses a client without a certificate, and one whose certificate another CA signed", async () => {
    for (const tls of [{ ca: pem("ca.crt") }, { ca: pem("ca.crt"), cert: pem("stranger.crt"), key: pem("stranger.key") }]) {
      const sandbox = createClient(Sandbox, sandboxAt, {}, { tls, token: GATEWAY_TOKEN });
      const err = await outcome(collectStream(sandbox.exec({ scope: newScope("nocert"), code: "return 1" })));
      expect(err).toBe("unavailable");
      sandbox.close();
    }
  });

  it("a missing or wrong bearer token is UNAUTHENTICATED on Control and on Sandbox; the right one works", async () => {
    const { token: _, ...noToken } = gateway();
    const variants: Array<[string, ClientSecurity]> = [
      ["missing", noToken],
      ["wrong", { ...noToken, token: "not-the-token" }],
      ["the link's", { ...noToken, token: LINK_TOKEN }],
    ];
    for (const [what, security] of variants) {
      const control = createClient(Control, controlAt, {}, security);
      const sandbox = createClient(Sandbox, sandboxAt, {}, security);
      expect(await outcome(control.openRun({ scope: newScope("tok"), catalog: { case: "tools", value: { tools: [] } } })), what).toBe("unauthenticated");
      expect(await outcome(collectStream(sandbox.exec({ scope: newScope("tok"), code: "return 1" }))), what).toBe("unauthenticated");
      expect(await outcome(sandbox.bridgeCallback({ scope: newScope("tok"), callId: "x", outcome: { case: "resultJson", value: "1" } })), what).toBe(
        "unauthenticated",
      );
      control.close();
      sandbox.close();
    }
    // The refusal names no token, and is logged on the server.
    const raw = new grpc.Client(controlAt, grpc.credentials.createSsl(pem("ca.crt")));
    const details = await new Promise<string>((resolve) => {
      raw.makeUnaryRequest(
        "/codemode.orchestrator.v1.Control/CloseRun",
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.alloc(0),
        new grpc.Metadata(),
        (err) => resolve(`${grpc.status[err!.code]}: ${err!.details}`),
      );
    });
    raw.close();
    expect(details).toMatch(/^UNAUTHENTICATED: .*authorization: Bearer <token>/);
    expect(orch.stderr.some((l) => l.includes('"msg":"refused an unauthenticated call"') && l.includes("codemode.orchestrator.v1.Control/OpenRun"))).toBe(true);
    // The right token works.
    const control = createClient(Control, controlAt, {}, gateway());
    expect(await outcome(control.openRun({ scope: newScope("tok"), catalog: { case: "tools", value: { tools: [] } } }))).toBe("ok");
    control.close();
  });
});

describe("the sidecar link has its own port and credentials", () => {
  it("SidecarLink is not served on the Control port, nor Control on the link port", async () => {
    const linkOnControl = createClient(SidecarLink, controlAt, {}, gateway());
    expect(await outcome(linkOnControl.resolveRun({}, { deadlineMs: 5_000 }))).toBe("unimplemented");
    linkOnControl.close();
    const controlOnLink = createClient(Control, linkAt, {}, sidecarLink());
    expect(await outcome(controlOnLink.openRun({ scope: newScope("x"), catalog: { case: "tools", value: { tools: [] } } }, { deadlineMs: 5_000 }))).toBe(
      "unimplemented",
    );
    controlOnLink.close();
  });

  it("a gateway's credentials do not open the link, and a sidecar's do not open Control", async () => {
    // The gateway's certificate passes the link's mTLS (same CA here), but its token does not.
    const gatewayOnLink = createClient(SidecarLink, linkAt, {}, gateway());
    expect(await outcome(gatewayOnLink.resolveRun({}, { deadlineMs: 5_000 }))).toBe("unauthenticated");
    gatewayOnLink.close();
    const sidecarOnControl = createClient(Control, controlAt, {}, sidecarLink());
    expect(await outcome(sidecarOnControl.closeRun({ scope: newScope("x") }, { deadlineMs: 5_000 }))).toBe("unauthenticated");
    sidecarOnControl.close();
  });

  it("the sidecar with the link's credentials is attached and serving", async () => {
    expect(
      cliHealth(sandboxAt, [
        "--tls-ca",
        file("ca.crt"),
        "--tls-client-cert",
        file("gateway.crt"),
        "--tls-client-key",
        file("gateway.key"),
        "--service",
        "codemode.sandbox.v1.Sandbox",
      ]).status,
    ).toBe(0);
    expect(side.stderr.some((l) => l.includes('"msg":"orchestrator link up"'))).toBe(true);
  });

  it("sidecars with a wrong link token or a certificate from another CA never become ready, and log why", async () => {
    const wrong = [
      { args: linkClientArgs(), env: { CODEMODE_LINK_TOKEN: "wrong-link-token-000000000" }, expect: /refused this sidecar's link token/ },
      { args: linkClientArgs("stranger"), env: { CODEMODE_LINK_TOKEN: LINK_TOKEN }, expect: /orchestrator link down/ },
      { args: ["--link-tls-ca", file("ca.crt")], env: { CODEMODE_LINK_TOKEN: LINK_TOKEN }, expect: /orchestrator link down/ },
      // Pointed at the Control port (as before the link had its own): it says so.
      { args: ["--link-tls-ca", file("ca.crt")], env: { CODEMODE_LINK_TOKEN: LINK_TOKEN }, expect: /does not serve SidecarLink/, at: () => controlAt },
    ];
    const procs: Proc[] = [];
    try {
      for (const w of wrong)
        procs.push(
          await spawnCodemode(
            ["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", w.at?.() ?? linkAt, "--threads", "1", ...w.args],
            w.env,
          ),
        );
      // Each sidecar tried its link, was refused, tried again and was refused again: it is
      // in its retry loop, and not serving.
      for (const [i, p] of procs.entries())
        await until(() => p.stderr.filter((l) => wrong[i]!.expect.test(l)).length >= 2, `sidecar ${i}'s second refused link`, {
          detail: () => p.stderr.join("\n"),
        });
      for (const p of procs) {
        const h = healthClient(p.ready.sandbox!);
        expect(await h.check("")).toBe("NOT_SERVING");
        h.close();
      }
      procs.forEach((p, i) => {
        const log = p.stderr.join("\n");
        expect(log, `sidecar ${i}`).toMatch(wrong[i]!.expect);
        expect(log, `sidecar ${i}`).not.toContain('"link":"up"');
      });
      expect(orch.stderr.some((l) => l.includes("codemode.orchestrator.v1.SidecarLink/Attach") && l.includes("refused an unauthenticated call"))).toBe(true);
    } finally {
      for (const p of procs) expect(await p.stop()).toBe(0);
    }
  });
});

describe("codemode start with TLS and a token", () => {
  it("serves exec over TLS; its embedded link is on its own loopback port with a per-process token", async () => {
    const start = await spawnCodemode(
      [
        "start",
        "--sandbox-address",
        "127.0.0.1:0",
        "--orchestrator-address",
        "127.0.0.1:0",
        "--threads",
        "1",
        "--tls-cert",
        file("server.crt"),
        "--tls-key",
        file("server.key"),
      ],
      { CODEMODE_AUTH_TOKEN: GATEWAY_TOKEN },
    );
    try {
      expect(Object.keys(start.ready).sort()).toEqual(["link", "orchestrator", "sandbox"]);
      expect(start.ready.link).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(start.ready.link).not.toBe(start.ready.orchestrator);
      const client: ClientSecurity = { tls: { ca: pem("ca.crt"), serverName: "localhost" }, token: GATEWAY_TOKEN };
      const control = createClient(Control, start.ready.orchestrator!, {}, client);
      const sandbox = createClient(Sandbox, start.ready.sandbox!, {}, client);
      const scope = newScope("start");
      await control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } } });
      // The embedded link may still be coming up right after the ready line: wait for it.
      await logged(start, /"msg":"orchestrator link up"/, 20_000);
      const out = await collectStream(sandbox.exec({ scope, execCallId: "c0", code: "return 6 * 7" }));
      expect(out.model).toMatchObject({ status: "completed", value: 42 });
      control.close();
      sandbox.close();
      // Nothing but the embedded sidecar holds the link token: the gateway's does not open it.
      const link = createClient(SidecarLink, start.ready.link!, {}, { token: GATEWAY_TOKEN });
      expect(await outcome(link.resolveRun({ scope }, { deadlineMs: 5_000 }))).toBe("unauthenticated");
      link.close();
      // The start-up check (src/cli/start-check.ts) does not run over TLS: no run of it was opened.
      expect(start.stderr.some((l) => l.includes('"agentRunId":"start-check-'))).toBe(false);
      expect(start.stderr.some((l) => l.includes(`"agentRunId":"${scope.agentRunId}"`) && l.includes('"msg":"run opened"'))).toBe(true);
    } finally {
      expect(await start.stop()).toBe(0);
    }
  });
});

describe("configuration errors stop the process at start", () => {
  const run = (args: string[], env: Record<string, string> = {}) =>
    spawnSync(process.execPath, [BIN, "orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0", ...args], {
      encoding: "utf8",
      timeout: 20_000,
      env: { ...process.env, ...env },
    });

  it("names the flag: a certificate without its key, a client CA without a certificate, a key that is not the certificate's, an unreadable file, equal tokens", () => {
    const cases: Array<[string[], Record<string, string>, number, RegExp]> = [
      [["--tls-cert", file("server.crt")], {}, 2, /--tls-cert and --tls-key go together/],
      [["--link-tls-client-ca", file("ca.crt")], {}, 2, /--link-tls-client-ca needs --link-tls-cert/],
      [["--tls-cert", file("server.crt"), "--tls-key", file("gateway.key")], {}, 1, /--tls-cert, --tls-key: .*key values mismatch/],
      [["--tls-cert", file("nope.crt"), "--tls-key", file("server.key")], {}, 1, /--tls-cert .*nope\.crt: cannot read the file \(ENOENT\)/],
      [[], { CODEMODE_TLS_CERT: file("server.crt") }, 2, /--tls-cert and --tls-key go together \(or CODEMODE_TLS_CERT and CODEMODE_TLS_KEY\)/],
      [[], { CODEMODE_AUTH_TOKEN: "same-token-123456", CODEMODE_LINK_TOKEN: "same-token-123456" }, 1, /link token must differ/],
      [[], { CODEMODE_AUTH_TOKEN: "has space" }, 1, /CODEMODE_AUTH_TOKEN: a bearer token must be/],
    ];
    for (const [args, env, status, message] of cases) {
      const r = run(args, env);
      expect(r.stderr, args.join(" ")).toMatch(message);
      expect(r.status, args.join(" ")).toBe(status);
      expect(r.stdout).toBe("");
    }
  });
});
