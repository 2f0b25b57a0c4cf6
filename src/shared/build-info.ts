/**
 * Which build this process is: the package's version and the quickjs-wasi engine's, read
 * once from their package.json files. A replay record names the build that made it, and a
 * replay's report says when it ran on another.
 */
import { readFileSync } from "node:fs";

function versionAt(url: URL): string {
  try {
    return (JSON.parse(readFileSync(url, "utf8")) as { version?: string }).version ?? "unknown";
  } catch {
    return "unknown";
  }
}

export const BUILD = {
  version: versionAt(new URL("../../package.json", import.meta.url)),
  quickjs: versionAt(new URL("../package.json", import.meta.resolve("quickjs-wasi"))),
} as const;
