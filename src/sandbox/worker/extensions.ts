/**
 * quickjs-wasi's native extensions a guest VM may load: today only `url` (WHATWG `URL` and
 * `URLSearchParams`, from ada). Loading one adds to every VM's start, so the worker loads
 * it only for programs that name those globals (see `extensionsFor`), and a restored VM
 * gets exactly the extensions its snapshot records. The extension module is compiled once
 * per worker thread, on first use.
 *
 * Node 20's V8 compiles these modules only with extended constant expressions enabled
 * (`--experimental-wasm-extended-const`, on by default from Node 22). `codemode` sets it
 * for the whole process as it starts (../../cli/v8-flags.ts); setting it again here, before
 * the first compile, changes nothing then, and covers a pool started some other way.
 */
import { readFile } from "node:fs/promises";
import v8 from "node:v8";
import type { ExtensionDescriptor } from "quickjs-wasi";

export type ExtensionName = "url";

const FILES: Record<ExtensionName, string> = { url: "quickjs-wasi/url.so" };
const compiled = new Map<ExtensionName, Promise<WebAssembly.Module>>();
let flagSet = false;

function moduleFor(name: ExtensionName): Promise<WebAssembly.Module> {
  let m = compiled.get(name);
  if (!m) {
    if (!flagSet) {
      v8.setFlagsFromString("--experimental-wasm-extended-const");
      flagSet = true;
    }
    m = readFile(new URL(import.meta.resolve(FILES[name]))).then((bytes) => WebAssembly.compile(bytes));
    m.catch(() => compiled.delete(name));
    compiled.set(name, m);
  }
  return m;
}

/** Descriptors for QuickJS.create/restore, in a fixed order. */
export async function extensionDescriptors(names: readonly string[]): Promise<ExtensionDescriptor[]> {
  const out: ExtensionDescriptor[] = [];
  for (const name of ["url"] as const) if (names.includes(name)) out.push({ name, wasm: await moduleFor(name) });
  return out;
}

/** The extensions a program needs: those whose globals its source names. */
export function extensionsFor(source: string): ExtensionName[] {
  return /\bURL(?:SearchParams)?\b/.test(source) ? ["url"] : [];
}
