/**
 * Reading a process's Prometheus /metrics in tests: the scrape, and the sum of one
 * metric's samples by labels.
 */
import { expect } from "vitest";

/** The sum of the samples of `name` whose labels include `labels` (0 when none). */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[3]);
  }
  return sum;
}

export async function scrape(address: string): Promise<string> {
  const res = await fetch(`http://${address}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/plain");
  return res.text();
}
