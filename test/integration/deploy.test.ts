// The deploy files, checked for real. Kubernetes manifests: each object is validated against
// the Kubernetes OpenAPI schema (kubernetes-models' generated validators: types, required
// fields, enums, formats) and type-checked as a literal of its API type with the TypeScript
// compiler, whose excess-property check refuses unknown fields (what kubeconform -strict
// does); then the files are checked against each other (Services, ports, probes, secrets,
// policies) and against the product: every codemode command line in the manifests and in
// compose.yaml is started as a real process (addresses made local), must print its ready
// line with the metrics port, and must answer the health checks the probes ask.
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import ts from "typescript";
import { parse, parseAllDocuments } from "yaml";
import { BIN, SHARED_SNAPSHOT_KEY, spawnCodemode, type Proc } from "../helpers/harness.js";
import { until } from "../helpers/until.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";
import { typecheck } from "../helpers/typecheck.js";

/** Parsed YAML, read as the manifests are written. */
// biome-ignore lint/suspicious/noExplicitAny: manifests are read as loosely as YAML is written
type Obj = Record<string, any>;
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const K8S = `${ROOT}deploy/k8s/`;
const DRAIN_MS_DEFAULT = 10_000;

const manifests: Array<{ file: string; obj: Obj }> = readdirSync(K8S)
  .filter((f) => f.endsWith(".yaml"))
  .sort()
  .flatMap((file) =>
    parseAllDocuments(readFileSync(K8S + file, "utf8")).map((d) => {
      expect(d.errors, file).toEqual([]);
      expect(d.warnings, file).toEqual([]);
      return { file, obj: d.toJS() as Obj };
    }),
  );
const compose = parse(readFileSync(`${ROOT}deploy/compose.yaml`, "utf8"), { merge: true }) as Obj;

const of = (kind: string) => manifests.filter((m) => m.obj.kind === kind).map((m) => m.obj);
const byName = (kind: string, name: string) => of(kind).find((o) => o.metadata.name === name);
const workloads = () => [...of("Deployment"), ...of("StatefulSet")];
const isCodemode = (c: Obj) => String(c.image).startsWith("codemode-sidecar:");
const flag = (args: string[], name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const portOf = (hostPort: string) => Number(hostPort.slice(hostPort.lastIndexOf(":") + 1));
const hostOf = (hostPort: string) => hostPort.slice(0, hostPort.lastIndexOf(":"));
const drainSeconds = (args: string[]) => Number(flag(args, "--drain-timeout-ms") ?? DRAIN_MS_DEFAULT) / 1000;
/** The listen flag of a codemode command (the port its probes and Service name). */
const listenFlag = (args: string[]) => (args[0] === "sandbox" ? "--sandbox-address" : "--orchestrator-address");

describe("Kubernetes manifests: schema", () => {
  it("has the objects an operator needs", () => {
    const kinds = manifests.map((m) => `${m.obj.kind}/${m.obj.metadata.name}`).sort();
    expect(kinds).toEqual(
      expect.arrayContaining([
        "Deployment/agent-gateway",
        "Deployment/codemode-orchestrator",
        "Service/codemode-orchestrator",
        "StatefulSet/codemode-redis",
        "Service/codemode-redis",
        "Secret/codemode-snapshot-key",
        "Secret/codemode-link-token",
      ]),
    );
  });

  it("every object validates against the Kubernetes OpenAPI schema of its kind", async () => {
    for (const { file, obj } of manifests) {
      const mod = (await import(/* @vite-ignore */ `kubernetes-models/${obj.apiVersion}/${obj.kind}`)) as Record<string, new (o: Obj) => { validate(): void }>;
      const Model = mod[obj.kind]!;
      expect(() => new Model(obj).validate(), `${file}: ${obj.kind}/${obj.metadata?.name}`).not.toThrow();
    }
  });

  it("every object type-checks as its API type: no unknown or misspelt field", async () => {
    const source = (docs: Array<{ obj: Obj }>) =>
      docs
        .map(
          ({ obj }, i) =>
            `import type { I${obj.kind} as T${i} } from "kubernetes-models/${obj.apiVersion}/${obj.kind}";\nexport const doc${i}: T${i} = ${JSON.stringify(obj, null, 2)};`,
        )
        .join("\n");
    const options = {
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      module: ts.ModuleKind.ESNext,
      paths: { "kubernetes-models/*": [`${ROOT}node_modules/kubernetes-models/*`] },
    };
    expect(typecheck({ "manifests.ts": source(manifests) }, options)).toEqual([]);
    // The checks are real: an unknown field and a wrong type are refused.
    const deployment = structuredClone(manifests.find((m) => m.obj.kind === "Deployment")!);
    deployment.obj.spec.template.spec.containers[0].readinesProbe = { grpc: { port: 7300 } };
    expect(typecheck({ "bad.ts": source([deployment]) }, options).join("\n")).toMatch(/readinesProbe/);
    delete deployment.obj.spec.template.spec.containers[0].readinesProbe;
    deployment.obj.spec.template.spec.containers[0].ports = [{ containerPort: "7300" }];
    const { Deployment } = await import("kubernetes-models/apps/v1/Deployment");
    expect(() => new Deployment(deployment.obj as ConstructorParameters<typeof Deployment>[0]).validate()).toThrow(/containerPort must be integer/);
  });
});

describe("Kubernetes manifests: consistent with each other and with the product", () => {
  const codemodeContainers = () => workloads().flatMap((w) => (w.spec.template.spec.containers as Obj[]).filter(isCodemode).map((c) => ({ w, c })));

  it("Services select a workload and target ports its containers name", () => {
    for (const svc of of("Service")) {
      const targets = workloads().filter((w) =>
        Object.entries(svc.spec.selector as Record<string, string>).every(([k, v]) => w.spec.template.metadata.labels[k] === v),
      );
      expect(
        targets.map((w) => w.metadata.name),
        svc.metadata.name,
      ).toHaveLength(1);
      const names = (targets[0]!.spec.template.spec.containers as Obj[]).flatMap((c) => (c.ports ?? []).map((p: Obj) => p.name));
      for (const p of svc.spec.ports as Obj[]) expect(names, `${svc.metadata.name}:${p.port}`).toContain(p.targetPort);
    }
  });

  it("codemode containers: ports as listened, gRPC readiness and liveness probes on the health service, resources, drain time", () => {
    expect(
      codemodeContainers()
        .map(({ c }) => c.args[0])
        .sort(),
    ).toEqual(["orchestrator", "sandbox"]);
    for (const { w, c } of codemodeContainers()) {
      const args = c.args as string[];
      const ports = Object.fromEntries((c.ports as Obj[]).map((p) => [p.name, p.containerPort]));
      expect(ports.grpc).toBe(portOf(flag(args, listenFlag(args))!));
      // The orchestrator serves SidecarLink on its own port.
      if (args[0] === "orchestrator") expect(ports.link).toBe(portOf(flag(args, "--link-address")!));
      expect(ports.metrics).toBe(portOf(flag(args, "--metrics-address")!));
      expect(c.readinessProbe.grpc).toEqual({ port: ports.grpc, service: "" });
      expect(c.livenessProbe.grpc).toEqual({ port: ports.grpc, service: "liveness" });
      expect(c.env.find((e: Obj) => e.name === "CODEMODE_HEALTH_ADDRESS")?.value).toBe(`127.0.0.1:${ports.grpc}`);
      expect(w.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(drainSeconds(args) + 7);
      expect(Number(w.spec.template.metadata.annotations["prometheus.io/port"])).toBe(ports.metrics);
    }
    for (const w of workloads()) {
      for (const c of w.spec.template.spec.containers as Obj[]) {
        for (const k of ["requests", "limits"])
          expect(Object.keys(c.resources?.[k] ?? {}).sort(), `${w.metadata.name}/${c.name} ${k}`).toEqual(["cpu", "memory"]);
      }
    }
  });

  it("addresses name real Services, the snapshot key comes from the Secret, and policies admit the clients", () => {
    const servicePort = (hostPort: string) => byName("Service", hostOf(hostPort))?.spec.ports.map((p: Obj) => p.port) ?? [];
    const sandbox = codemodeContainers().find(({ c }) => c.args[0] === "sandbox")!;
    const orchestrator = codemodeContainers().find(({ c }) => c.args[0] === "orchestrator")!;
    // The sidecar dials the orchestrator's link port through the Service.
    const orchAddr = flag(sandbox.c.args, "--orchestrator-address")!;
    expect(servicePort(orchAddr)).toContain(portOf(orchAddr));
    expect(portOf(orchAddr)).toBe(portOf(flag(orchestrator.c.args, "--link-address")!));
    expect(byName("Service", hostOf(orchAddr))!.spec.selector["app.kubernetes.io/name"]).toBe(
      orchestrator.w.spec.template.metadata.labels["app.kubernetes.io/name"],
    );
    const redis = new URL(flag(orchestrator.c.args, "--store")!);
    expect(servicePort(`${redis.hostname}:${redis.port}`)).toContain(Number(redis.port));
    expect(orchestrator.w.spec.replicas).toBeGreaterThanOrEqual(2);
    // The gateway dials the same orchestrator's Control port and its own sidecar on localhost.
    const gateway = (sandbox.w.spec.template.spec.containers as Obj[]).find((c) => !isCodemode(c))!;
    const env = Object.fromEntries((gateway.env as Obj[]).map((e) => [e.name, e.value]));
    expect(env.CODEMODE_ORCHESTRATOR_ADDRESS).toBe(`${hostOf(orchAddr)}:${portOf(flag(orchestrator.c.args, "--orchestrator-address")!)}`);
    expect(servicePort(env.CODEMODE_ORCHESTRATOR_ADDRESS)).toContain(portOf(env.CODEMODE_ORCHESTRATOR_ADDRESS));
    expect(env.CODEMODE_SANDBOX_ADDRESS).toBe(`127.0.0.1:${portOf(flag(sandbox.c.args, "--sandbox-address")!)}`);
    // The key: a Secret with that key, long enough for the sidecar to accept it.
    const ref = (sandbox.c.env as Obj[]).find((e) => e.name === "CODEMODE_SNAPSHOT_KEY")!.valueFrom.secretKeyRef;
    const secret = byName("Secret", ref.name)!;
    expect(String(secret.stringData[ref.key]).length).toBeGreaterThanOrEqual(32);
    // The link token: the same Secret key on both ends of the link.
    const linkRef = (c: Obj) => (c.env as Obj[]).find((e) => e.name === "CODEMODE_LINK_TOKEN")!.valueFrom.secretKeyRef;
    expect(linkRef(sandbox.c)).toEqual(linkRef(orchestrator.c));
    expect(String(byName("Secret", linkRef(sandbox.c).name)!.stringData[linkRef(sandbox.c).key])).toMatch(/^[\x21-\x7e]{32,}$/);
    // Network policies select real pods; the orchestrator's admits the gateway pods.
    for (const np of of("NetworkPolicy")) {
      expect(
        workloads().some((w) =>
          Object.entries(np.spec.podSelector.matchLabels as Record<string, string>).every(([k, v]) => w.spec.template.metadata.labels[k] === v),
        ),
        np.metadata.name,
      ).toBe(true);
    }
    const admit = byName("NetworkPolicy", "codemode-orchestrator")!.spec.ingress[0].from[0].podSelector.matchLabels as Record<string, string>;
    expect(Object.entries(admit).every(([k, v]) => sandbox.w.spec.template.metadata.labels[k] === v)).toBe(true);
    expect(
      byName("NetworkPolicy", "codemode-orchestrator")!
        .spec.ingress[0].ports.map((p: Obj) => p.port)
        .sort(),
    ).toEqual([portOf(flag(orchestrator.c.args, "--orchestrator-address")!), portOf(orchAddr)].sort());
  });
});

describe("compose.yaml", () => {
  const services = compose.services as Record<string, Obj>;
  const role = (r: string) => Object.entries(services).filter(([, s]) => Array.isArray(s.command) && s.command[0] === r);

  it("runs Redis, two orchestrators and two sidecars, wired by name", () => {
    expect(role("orchestrator")).toHaveLength(2);
    expect(role("sandbox")).toHaveLength(2);
    const aliases = role("orchestrator").map(([, s]) => s.networks.default.aliases as string[]);
    for (const [name, s] of role("sandbox")) {
      const target = flag(s.command, "--orchestrator-address")!;
      // Every orchestrator answers to the name the sidecars dial: a link fails over to the other.
      for (const a of aliases) expect(a, name).toContain(hostOf(target));
      // The orchestrators' link port, not Control.
      expect(portOf(target)).toBe(portOf(flag(role("orchestrator")[0]![1].command, "--link-address")!));
      expect(s.environment.CODEMODE_LINK_TOKEN).toBe(role("orchestrator")[0]![1].environment.CODEMODE_LINK_TOKEN);
      expect(s.environment.CODEMODE_SNAPSHOT_KEY).toBe(role("sandbox")[0]![1].environment.CODEMODE_SNAPSHOT_KEY);
      expect(s.environment.CODEMODE_SNAPSHOT_KEY).toMatch(/^\$\{CODEMODE_SNAPSHOT_KEY:\?/);
    }
    for (const [name, s] of role("orchestrator")) {
      const store = new URL(flag(s.command, "--store")!);
      expect(String(services[store.hostname]?.image), name).toMatch(/^redis:/);
    }
    const published: string[] = [];
    for (const [name, s] of [...role("orchestrator"), ...role("sandbox")]) {
      const listen = portOf(flag(s.command, listenFlag(s.command))!);
      expect(s.environment.CODEMODE_HEALTH_ADDRESS, name).toBe(`127.0.0.1:${listen}`);
      const inside = (s.ports as string[]).map((p) => Number(p.split(":").at(-1)));
      expect(inside.sort(), name).toEqual([listen, portOf(flag(s.command, "--metrics-address")!)].sort());
      published.push(...(s.ports as string[]).map((p) => p.split(":").slice(0, -1).join(":")));
      for (const dep of Object.keys(s.depends_on ?? {})) expect(Object.keys(services), name).toContain(dep);
      expect(Number(String(s.stop_grace_period).replace(/s$/, ""))).toBeGreaterThanOrEqual(drainSeconds(s.command) + 7);
    }
    expect(new Set(published).size).toBe(published.length);
  });
});

describe("every codemode command line in deploy/ starts the product", () => {
  let redis: RedisServer;
  let orchestrator: Proc;
  beforeAll(async () => {
    redis = await startRedis();
    orchestrator = await spawnCodemode(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0"]);
  });
  afterAll(async () => {
    await orchestrator?.stop();
    await redis?.stop();
  });

  /** A command with its addresses made local: listen on port 0, dial the test's orchestrator and Redis. */
  const localize = (args: string[]) =>
    args.map((a, i) => {
      const prev = args[i - 1];
      if (prev === "--metrics-address" || prev === "--link-address" || prev === listenFlag(args)) return "127.0.0.1:0";
      if (prev === "--orchestrator-address") return orchestrator.ready.link!;
      if (prev === "--store") return redis.url;
      return a;
    });

  it("orchestrator and sandbox commands, from the manifests and from compose, print their ports and answer the probes' health checks", async () => {
    const lines = [
      ...workloads().flatMap((w) => (w.spec.template.spec.containers as Obj[]).filter(isCodemode).map((c) => c.args as string[])),
      ...Object.values(compose.services as Record<string, Obj>)
        .filter((s) => Array.isArray(s.command) && ["orchestrator", "sandbox"].includes(s.command[0]))
        .map((s) => s.command as string[]),
    ];
    const distinct = [...new Map(lines.map((l) => [JSON.stringify(localize(l)), localize(l)])).values()];
    expect(distinct.length).toBeGreaterThanOrEqual(2);
    for (const args of distinct) {
      const proc = await spawnCodemode(args, { CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY });
      try {
        expect(Object.keys(proc.ready).sort(), args.join(" ")).toEqual([args[0]!, "metrics", ...(args[0] === "orchestrator" ? ["link"] : [])].sort());
        const grpcAt = proc.ready[args[0]!]!;
        const health = (service: string) =>
          spawnSync(process.execPath, [BIN, "health", "--address", grpcAt, "--service", service], { encoding: "utf8" }).status;
        expect(health("liveness")).toBe(0);
        await until(() => health("") === 0, `${args.join(" ")} to become ready`, { everyMs: 100 });
        expect((await fetch(`http://${proc.ready.metrics}/metrics`)).status).toBe(200);
      } finally {
        expect(await proc.stop()).toBe(0);
      }
    }
  });
});
