/**
 * Host-side checks on JSON text that crossed out of (or into) a guest VM: a size cap
 * before parsing and a nesting cap after, walked iteratively so hostile nesting cannot
 * overflow the worker's stack. Parsing uses the host's JSON, which guest code cannot
 * reach.
 */

/**
 * Largest JSON text accepted across the bridge in one value: below gRPC's default
 * 4 MiB message limit, so a tool input always reaches the gateway.
 */
export const MAX_BRIDGE_BYTES = 3 * 1024 * 1024;
export const MAX_BRIDGE_DEPTH = 128;

export class BridgeValueError extends Error {
  override name = "BridgeValueError";
}

export function nestingDepth(root: unknown): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[root, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== "object") continue;
    if (d > max) max = d;
    if (max > MAX_BRIDGE_DEPTH) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v as object)) {
      if (child !== null && typeof child === "object") stack.push([child, d + 1]);
    }
  }
  return max;
}

/** Parses guest JSON text with the size and depth caps; throws BridgeValueError. */
export function parseBridgeJson(text: string, what: string): unknown {
  if (text.length > MAX_BRIDGE_BYTES) throw new BridgeValueError(`${what} is larger than ${MAX_BRIDGE_BYTES} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new BridgeValueError(`${what} is not valid JSON`);
  }
  if (nestingDepth(value) > MAX_BRIDGE_DEPTH) throw new BridgeValueError(`${what} nests deeper than ${MAX_BRIDGE_DEPTH} levels`);
  return value;
}
