// Percentiles, sample collection and the table printer of bench/exec-latency.bench.mjs.

/** Nearest-rank percentile of `xs` (p in 0..100); NaN for no samples. */
export function pct(xs, p) {
  if (xs.length === 0) return NaN;
  const s = xs.slice().sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/** Samples of one cell plus its failures (a failed sample is not timed). */
export class Cell {
  constructor(name) {
    this.name = name;
    this.samples = [];
    this.errors = 0;
    this.firstError = undefined;
  }
  fail(err) {
    this.errors++;
    this.firstError ??= err instanceof Error ? err.message : String(err);
  }
  get p50() {
    return pct(this.samples, 50);
  }
  get p99() {
    return pct(this.samples, 99);
  }
}

/**
 * Runs `n` rounds; each round runs every entry of `fns` once, in an order that alternates
 * between rounds, so drift and noise on this shared machine land on every side alike.
 * Each fn returns the elapsed milliseconds of its sample (it times itself, so it can stop
 * the clock at the Result event rather than at stream end). `warmup` untimed rounds first.
 */
export async function interleave(fns, n, warmup) {
  const cells = fns.map(([name]) => new Cell(name));
  for (let round = -warmup; round < n; round++) {
    const order = round % 2 === 0 ? fns.map((_, i) => i) : fns.map((_, i) => fns.length - 1 - i);
    for (const i of order) {
      try {
        const ms = await fns[i][1]();
        if (round >= 0) cells[i].samples.push(ms);
      } catch (err) {
        cells[i].fail(err);
      }
    }
  }
  return cells;
}

export const ms = (x) => (Number.isFinite(x) ? `${x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2)} ms` : "n/a");
export const perS = (x) => (Number.isFinite(x) ? `${x.toFixed(0)} runs/s` : "n/a");
export const bytes = (x) => (Number.isFinite(x) ? `${Math.round(x).toLocaleString("en-US")} B` : "n/a");

/** Prints rows (arrays of strings) as a Markdown table with padded columns. */
export function printTable(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i] ?? "").length)));
  const line = (cols) => `| ${cols.map((c, i) => String(c ?? "").padEnd(widths[i])).join(" | ")} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
  for (const r of rows) console.log(line(r));
}
