/**
 * The guest preludes' bytecode compiled at build time, so a worker thread need not compile
 * the preludes it needs as it starts, on the way to the ready line. scripts/bundle.mjs
 * compiles them once into dist/bundle/preludes.json, under a key over quickjs.wasm's sha256
 * and each prelude's source, file name and compile flags; a worker takes them when the key
 * matches its own (the pool passes the wasm digest in workerData), else it compiles them
 * itself. Either way the bytes must be those this QuickJS build compiles from this source
 * (test/integration/bundle.test.ts compares them), so the base image, whose digest every
 * snapshot carries, is the same.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { isMainThread, workerData } from "node:worker_threads";
import { PRELUDES, type PreludeName } from "../surfaces/preludes.js";

export const PRECOMPILED_FILE = fileURLToPath(new URL("../../bundle/preludes.json", import.meta.url));

/** The shape of PRECOMPILED_FILE. */
export type PrecompiledFile = { key: string; bytecode: Record<PreludeName, string> };

/** What precompiled bytecode must have been compiled for: this quickjs.wasm (its sha256, hex) and these preludes. */
export function preludeKey(wasmDigest: string): string {
  const h = createHash("sha256").update(wasmDigest);
  for (const [name, p] of Object.entries(PRELUDES)) h.update(`\0${name}\0${p.filename}\0${p.flags}\0${p.source}`);
  return h.digest("hex");
}

let loaded: Partial<Record<PreludeName, Uint8Array>> | undefined;

/** The build's bytecode of prelude `name` when it matches this worker's quickjs.wasm and sources, else undefined. */
export function precompiled(name: PreludeName): Uint8Array | undefined {
  loaded ??= load();
  return loaded[name];
}

function load(): Partial<Record<PreludeName, Uint8Array>> {
  const digest = isMainThread ? undefined : (workerData as { wasmDigest?: unknown } | null)?.wasmDigest;
  if (typeof digest !== "string") return {};
  let file: PrecompiledFile;
  try {
    file = JSON.parse(readFileSync(PRECOMPILED_FILE, "utf8")) as PrecompiledFile;
  } catch {
    return {}; // not built (tsc only): compiled here
  }
  if (file.key !== preludeKey(digest)) return {};
  const out: Partial<Record<PreludeName, Uint8Array>> = {};
  for (const name of Object.keys(PRELUDES) as PreludeName[])
    if (typeof file.bytecode?.[name] === "string") out[name] = new Uint8Array(Buffer.from(file.bytecode[name], "base64"));
  return out;
}
