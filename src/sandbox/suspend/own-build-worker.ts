/**
 * The thread ./own-build.ts starts once to learn this build's engine fingerprint: it builds
 * the base image every snapshot is a delta against (../worker/base-image.ts), exactly as a
 * pool worker does, posts the fingerprint and ends. Off the main thread: building the image
 * boots a VM.
 */
import { parentPort, workerData } from "node:worker_threads";
import { baseImage } from "../worker/base-image.js";

const { wasmModule } = workerData as { wasmModule: WebAssembly.Module; wasmDigest: string };
baseImage(wasmModule).then(
  (image) => parentPort!.postMessage({ build: Uint8Array.from(image.fingerprint) }),
  (err: unknown) => parentPort!.postMessage({ error: (err as Error).message }),
);
