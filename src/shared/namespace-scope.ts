/**
 * Internal namespaces as a gateway writes them, turned into the wire form the
 * orchestrator checks: a JavaScript scope object whose callable members are markers made
 * by `namespaceTool(...)` becomes plain JSON text. Functions cannot cross gRPC, so a raw
 * function is refused here with its path, as are circular graphs and unsafe keys; values
 * JSON cannot carry become JSON-safe stand-ins. The orchestrator re-checks the JSON
 * (`src/orchestrator/namespaces/namespace-rules.ts`): this module only gives gateways
 * written in TypeScript the early, precise error.
 */

/** Run context a scope may reference with `namespaceContext(name)`. */
export const CONTEXT_NAMES = ["agentId", "sessionId", "sessionKey", "runId", "config"] as const;
export type ContextName = (typeof CONTEXT_NAMES)[number];

/** Keys that can never be a scope path segment. */
export const UNSAFE_KEYS = new Set(["__proto__", "constructor", "prototype"]);
/** Separates path segments of a callable member (`repo.issues.list`). */
export const PATH_SEPARATOR = ".";

export type ToolMarker = { $tool: string; args?: string[] };
export type ContextMarker = { $context: ContextName };

/**
 * Marks a scope member as callable: a guest call runs the plugin's tool `toolName`. With
 * `args`, guest argument i becomes input field args[i]; without, the input is the first
 * argument, or {} when there is none.
 */
export function namespaceTool(toolName: string, args?: readonly string[]): ToolMarker {
  return args ? { $tool: toolName, args: [...args] } : { $tool: toolName };
}

/** A value replaced by the run's context when the namespace is installed in a run. */
export function namespaceContext(name: ContextName): ContextMarker {
  return { $context: name };
}

export class NamespaceScopeError extends Error {
  override name = "NamespaceScopeError";
}

function pathOf(path: readonly string[]): string {
  return path.length === 0 ? "scope" : `scope.${path.join(PATH_SEPARATOR)}`;
}

/** The JSON text of a scope, or a NamespaceScopeError naming the first offending path. */
export function serializeNamespaceScope(scope: unknown): string {
  const onPath = new Set<object>();
  const walk = (value: unknown, path: string[]): unknown => {
    switch (typeof value) {
      case "function":
        throw new NamespaceScopeError(`${pathOf(path)} is a function; callable members must be namespaceTool(...) markers that name a catalog tool`);
      case "string":
      case "boolean":
        return value;
      case "number":
        return Number.isFinite(value) ? value : String(value);
      case "bigint":
      case "symbol":
        return String(value);
      case "undefined":
        return null;
    }
    if (value === null) return null;
    const obj = value as object;
    if (onPath.has(obj)) throw new NamespaceScopeError(`${pathOf(path)} is circular (it contains itself)`);
    if (obj instanceof Date) return Number.isFinite(obj.getTime()) ? obj.toISOString() : null;
    if (ArrayBuffer.isView(obj) || obj instanceof ArrayBuffer) throw new NamespaceScopeError(`${pathOf(path)} is binary data; keep it behind a catalog tool`);
    onPath.add(obj);
    try {
      if (Array.isArray(obj)) return obj.map((v, i) => walk(v, [...path, String(i)]));
      if (obj instanceof Map) return [...obj.entries()].map(([k, v], i) => [walk(k, [...path, String(i), "0"]), walk(v, [...path, String(i), "1"])]);
      if (obj instanceof Set) return [...obj.values()].map((v, i) => walk(v, [...path, String(i)]));
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(obj)) {
        if (key === "" || UNSAFE_KEYS.has(key) || key.includes(PATH_SEPARATOR)) {
          throw new NamespaceScopeError(
            `${pathOf(path)} has an unsafe key ${JSON.stringify(key)} (empty, __proto__, constructor, prototype, or containing "${PATH_SEPARATOR}")`,
          );
        }
        const v = (obj as Record<string, unknown>)[key];
        if (v === undefined) continue;
        Object.defineProperty(out, key, { value: walk(v, [...path, key]), enumerable: true, writable: true, configurable: true });
      }
      return out;
    } finally {
      onPath.delete(obj);
    }
  };
  const plain = walk(scope, []);
  if (plain === null || typeof plain !== "object" || Array.isArray(plain)) throw new NamespaceScopeError("scope must be a plain object");
  return JSON.stringify(plain);
}
