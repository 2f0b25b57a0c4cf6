/**
 * Runs a one-file CommonJS bundle from dist/bundle/ (scripts/bundle.mjs) through
 * `vm.Script` with its V8 code cache: one read instead of hundreds of ES modules resolved,
 * read and compiled, and functions deserialized as a training start (which ran real execs)
 * compiled them instead of parsed and compiled again.
 *
 * A bundle is used only when it is at least as new as the compiled module it was built
 * from, and not with CODEMODE_BUNDLE=0; callers then load the modules, which behave the
 * same, only slower to start. A cache from another build must never be offered: V8 checks
 * the source only by length, so each cache file is named by its bundle's build id. V8
 * refuses a cache made under other V8 flags (Node options such as `--max-old-space-size`
 * are V8 flags), so a process started with options looks first for a cache named by them
 * too (its "flavour"), and one whose cache was refused or missing can write one for its
 * own flavour once it has run a while (`refresh`), where dist/bundle/ is writable.
 */
import { createHash } from "node:crypto";
import { readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Script } from "node:vm";

/** dist/bundle/, next to dist/shared/ where this module is compiled to. */
export const BUNDLE_DIR = fileURLToPath(new URL("../bundle/", import.meta.url));
/** A bundle's last line: `// codemode-build <id>` (scripts/bundle.mjs). */
export const BUILD_MARK = "\n// codemode-build ";

export const bundleFile = (name: string) => `${BUNDLE_DIR}${name}.cjs`;
/** The code cache of bundle `name` built as `id`, for V8 flags `flavour` ("": the build's own). */
export const cacheFile = (name: string, id: string, flavour = "") => `${BUNDLE_DIR}${name}.${id}${flavour ? `.${flavour}` : ""}.v8cache`;
/** Where a training start writes a cache; scripts/bundle.mjs renames it once the start ended well. */
export const trainingFile = (name: string, id: string) => `${cacheFile(name, id)}.partial`;

/**
 * The flavour of a process started with Node options: a digest of its `execArgv` and
 * NODE_OPTIONS ("" without either). A worker thread has neither of its own (its
 * environment is empty): the pool passes the main thread's flavour.
 */
export function codeCacheFlavour(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ""): string {
  const options = [...execArgv, nodeOptions.trim()].filter((o) => o !== "");
  return options.length === 0 ? "" : createHash("sha256").update(options.join("\0")).digest("hex").slice(0, 16);
}

export type CodeCacheState = "used" | "rejected" | "absent";
export type Bundle = {
  exports: Record<string, unknown>;
  codeCache: CodeCacheState;
  /** Writes the training cache of what V8 compiled so far (scripts/bundle.mjs). */
  writeCache(): void;
  /** Writes, for this process's flavour, the cache of what V8 compiled so far: its path, or why it could not. */
  refresh(): { wrote: string } | { failed: string };
};

function mtime(path: string): number | undefined {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

function read(path: string): Buffer | undefined {
  try {
    return readFileSync(path);
  } catch {
    return undefined;
  }
}

/** Writes `data` to `path` through a file of its own, so a reader never sees half of it. */
function writeWhole(path: string, data: Buffer): void {
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  writeFileSync(tmp, data);
  renameSync(tmp, path);
}

/**
 * Runs bundle `name` and returns its exports, or why it did not: "absent" (not built) or
 * "stale" (older than `source`, the compiled module it bundles).
 */
export function runBundle(name: string, source: string | URL, flavour = codeCacheFlavour()): Bundle | "absent" | "stale" {
  const file = bundleFile(name);
  const built = mtime(file);
  if (built === undefined) return "absent";
  if (built < (mtime(source instanceof URL ? fileURLToPath(source) : source) ?? 0)) return "stale";
  const code = readFileSync(file, "utf8");
  const mark = code.lastIndexOf(BUILD_MARK);
  const id = mark < 0 ? "" : code.slice(mark + BUILD_MARK.length).trim();
  const known = /^[0-9a-f]{16,}$/.test(id);
  const cachedData = known ? ((flavour ? read(cacheFile(name, id, flavour)) : undefined) ?? read(cacheFile(name, id))) : undefined;
  // `import()` in code run by vm.Script needs a flag or an experimental loader option, so
  // scripts/bundle.mjs turns each one in our modules into a call of `__cmImport`, this
  // module's own import(): packages left outside the bundle, and files the CLI is given.
  const script = new Script(`(function (exports, require, module, __filename, __dirname, __cmImport) {${code}\n})`, {
    filename: file,
    ...(cachedData ? { cachedData } : {}),
  });
  const module = { exports: {} as Record<string, unknown> };
  const load = (specifier: string) => import(specifier);
  (script.runInThisContext() as (...args: unknown[]) => void)(module.exports, createRequire(file), module, file, dirname(file), load);
  return {
    exports: module.exports,
    codeCache: !cachedData ? "absent" : script.cachedDataRejected ? "rejected" : "used",
    writeCache: () => writeWhole(trainingFile(name, id), script.createCachedData()),
    refresh() {
      if (!known) return { failed: "the bundle has no build id" };
      const path = cacheFile(name, id, flavour);
      try {
        writeWhole(path, script.createCachedData());
        return { wrote: path };
      } catch (err) {
        return { failed: (err as Error).message };
      }
    },
  };
}
