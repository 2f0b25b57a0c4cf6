/**
 * This sidecar's snapshot build: the engine fingerprint its snapshots carry. The
 * orchestrator asks for it (BuildQuery) when a wait elsewhere needs a sidecar that can
 * restore a run of a given build (./wait-relay.ts). Learned once per process on a thread of
 * its own (./own-build-worker.ts), since the answer boots a VM; never on the exec path.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { Worker } from "node:worker_threads";

let build: Promise<Uint8Array> | undefined;

export function ownSnapshotBuild(): Promise<Uint8Array> {
  build ??= learn().catch((err: unknown) => {
    build = undefined;
    throw err;
  });
  return build;
}

async function learn(): Promise<Uint8Array> {
  const bytes = await readFile(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm")));
  const workerData = { wasmModule: await WebAssembly.compile(bytes), wasmDigest: createHash("sha256").update(bytes).digest("hex") };
  const worker = new Worker(new URL("./own-build-worker.js", import.meta.url), { workerData });
  try {
    return await new Promise<Uint8Array>((resolve, reject) => {
      worker.once("message", (m: { build?: Uint8Array; error?: string }) => (m.build ? resolve(m.build) : reject(new Error(m.error ?? "no build"))));
      worker.once("error", reject);
      worker.once("exit", (code) => reject(new Error(`the build's thread exited (${code}) before it answered`)));
    });
  } finally {
    void worker.terminate();
  }
}
