// The programs of bench/exec-latency.bench.mjs, their expected values, and the answers the
// bench's "gateway" gives to nested tool calls (the same answers on the service and the floor).

export const W1 = "return 1 + 1";
export const W2 = "let s = 0; for (let i = 0; i < 10; i++) s += (await tools.echo({ i })).i; return s";
export const W3 = "const r = await Promise.all(Array.from({ length: 16 }, (_, i) => tools.echo({ i }))); return r.reduce((a, x) => a + x.i, 0)";
export const W4 = "let s = 0; for (let i = 0; i < 1e6; i++) s += i; return s";
export const W5 = "const rows = await tools.rows({ limit: 5000 }); let s = 0; for (const r of rows) s += r.amountCents; return s";
export const TS = "const a: number = 1 + 1; return a;";
export const SUSPEND = "await yield_control(); return 1";

/** 5,000 order rows, as a gateway would pass a tool's result: JSON text, built once on first use. */
const REGIONS = ["eu-west", "us-east", "ap-south", "sa-east"];
const STATUSES = ["paid", "pending", "refunded"];
let rows;
export function rowsFixture() {
  if (!rows) {
    const list = Array.from({ length: 5000 }, (_, i) => ({
      id: `ord_${String(100000 + i)}`,
      customer: `customer ${i % 731}`,
      region: REGIONS[i % REGIONS.length],
      status: STATUSES[i % STATUSES.length],
      amountCents: (i * 7919) % 100000,
      createdAt: new Date(Date.UTC(2025, 0, 1) + i * 60_000).toISOString(),
    }));
    rows = { json: JSON.stringify(list), sum: list.reduce((a, r) => a + r.amountCents, 0) };
  }
  return rows;
}

export const EXPECT = {
  W1: 2,
  W2: 45,
  W3: 120,
  W4: 499999500000,
  get W5() {
    return rowsFixture().sum;
  },
  TS: 2,
  SUSPEND: 1,
};

/** The gateway's answer (JSON text) to a nested call of tool `name` with input `inputJson`. */
export function answer(name, inputJson) {
  if (name === "rows") return rowsFixture().json;
  return inputJson; // echo
}

/** The two tools of the small catalog (and the first two of the 2,000-tool one). */
export const TWO_TOOLS = [
  {
    name: "echo",
    label: "Echo",
    description: "Returns its input unchanged. Useful to test the tool bridge.",
    parametersJson: JSON.stringify({ type: "object", additionalProperties: true }),
    source: 1, // TOOL_SOURCE_OPENCLAW
    sourceName: "core",
    origin: 1, // TOOL_ORIGIN_CORE
  },
  {
    name: "rows",
    label: "List orders",
    description: "Lists recent orders with their customer, region, status, amount in cents and creation time.",
    parametersJson: JSON.stringify({
      type: "object",
      properties: { limit: { type: "integer", minimum: 1, maximum: 10000, description: "Most rows to return" } },
    }),
    source: 1,
    sourceName: "core",
    origin: 1,
  },
];
