/**
 * The searchable words of a tool's JSON Schema: parameter names, and separately their
 * descriptions, titles and enum values, from nested properties, items and
 * anyOf/oneOf/allOf a few levels deep. Bounded in depth, node count and text, and
 * forgiving: a schema that is too big or fails to parse contributes nothing.
 */

export type SchemaText = { names: string; details: string };

const MAX_JSON_CHARS = 256 * 1024;
const MAX_DEPTH = 4;
const MAX_NODES = 400;
const MAX_TEXT = 8_000;
const MAX_ENUM = 50;

export function schemaText(parametersJson: string): SchemaText {
  if (!parametersJson || parametersJson.length > MAX_JSON_CHARS) return { names: "", details: "" };
  let schema: unknown;
  try {
    schema = JSON.parse(parametersJson);
  } catch {
    return { names: "", details: "" };
  }
  const names: string[] = [];
  const details: string[] = [];
  let nodes = 0;
  let namesLen = 0;
  let detailsLen = 0;
  const addName = (s: string): void => {
    if (namesLen >= MAX_TEXT) return;
    names.push(s.slice(0, 200));
    namesLen += Math.min(s.length, 200) + 1;
  };
  const addDetail = (s: unknown): void => {
    if (typeof s !== "string" || detailsLen >= MAX_TEXT) return;
    const t = s.slice(0, 1_000);
    details.push(t);
    detailsLen += t.length + 1;
  };

  const walk = (node: unknown, depth: number): void => {
    if (!node || typeof node !== "object" || Array.isArray(node) || depth > MAX_DEPTH || ++nodes > MAX_NODES) return;
    const n = node as Record<string, unknown>;
    if (depth > 0) {
      addDetail(n.description);
      addDetail(n.title);
    }
    const en = n.enum;
    if (Array.isArray(en)) for (const v of en.slice(0, MAX_ENUM)) if (typeof v === "string") addDetail(v);
    if (typeof n.const === "string") addDetail(n.const);
    const props = n.properties;
    if (props && typeof props === "object" && !Array.isArray(props)) {
      for (const [key, child] of Object.entries(props as Record<string, unknown>)) {
        if (nodes > MAX_NODES) break;
        addName(key);
        walk(child, depth + 1);
      }
    }
    const items = n.items;
    if (Array.isArray(items)) for (const it of items.slice(0, 8)) walk(it, depth + 1);
    else walk(items, depth + 1);
    for (const k of ["anyOf", "oneOf", "allOf"]) {
      const alts = n[k];
      if (Array.isArray(alts)) for (const a of alts.slice(0, 8)) walk(a, depth + 1);
    }
  };
  walk(schema, 0);
  return { names: names.join(" "), details: details.join(" ") };
}
