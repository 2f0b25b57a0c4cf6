/**
 * The tenants file (src/shared/tenants.ts): what it accepts, in JSON and in YAML, and each
 * refusal naming the entry and the key; and a tenant's scope key (src/shared/scope.ts): the
 * default tenant keys a scope as a process without tenants does, any other tenant is in it.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_TENANT, scopeKeyOf, tenantOfScopeKey, withTenant } from "../../src/shared/scope.js";
import { loadTenantsFile, parseTenants, Tenants } from "../../src/shared/tenants.js";

const HASH_A = createHash("sha256").update("token-a").digest("hex");
const HASH_B = createHash("sha256").update("token-b").digest("hex");

const file = (name: string, text: string) => {
  const path = join(mkdtempSync(join(tmpdir(), "cm-tenants-unit-")), name);
  writeFileSync(path, text);
  return path;
};

describe("the tenants file", () => {
  it("reads JSON and YAML alike, with quotas", async () => {
    const doc = {
      tenants: [
        { name: "acme", tokenSha256: HASH_A.toUpperCase(), quotas: { maxConcurrentExecs: 4, weight: 2.5, execsPerSecond: 0.5 } },
        { name: "globex", tokenSha256: HASH_B },
      ],
    };
    const fromJson = await loadTenantsFile(file("t.json", JSON.stringify(doc)));
    const yaml = `tenants:\n  - name: acme\n    tokenSha256: ${HASH_A}\n    quotas:\n      maxConcurrentExecs: 4\n      weight: 2.5\n      execsPerSecond: 0.5\n  - name: globex\n    tokenSha256: ${HASH_B}\n`;
    const fromYaml = await loadTenantsFile(file("t.yaml", yaml));
    for (const t of [fromJson, fromYaml]) {
      expect(t.configured).toBe(true);
      expect(t.names).toEqual(["acme", "globex"]);
      expect(t.byTokenDigest(HASH_A)).toBe("acme");
      expect(t.byTokenDigest(HASH_B)).toBe("globex");
      expect(t.quotas("acme")).toEqual({ maxConcurrentExecs: 4, weight: 2.5, execsPerSecond: 0.5 });
      expect(t.quotas("globex")).toEqual({});
      expect(t.has("default")).toBe(false);
    }
  });

  it("without a file there is one default tenant, unlimited", () => {
    expect(Tenants.NONE.configured).toBe(false);
    expect(Tenants.NONE.names).toEqual([DEFAULT_TENANT]);
    expect(Tenants.NONE.has(DEFAULT_TENANT)).toBe(true);
    expect(Tenants.NONE.quotas(DEFAULT_TENANT)).toEqual({});
  });

  it("refuses a bad file, naming the entry and the key", async () => {
    const cases: Array<[unknown, RegExp]> = [
      [[], /expected \{"tenants": \[ \.\.\. \]\}/],
      [{ tenants: [] }, /tenants is empty/],
      [{ tenants: [], extra: 1 }, /unknown key "extra"/],
      [{ tenants: [{ name: "a b", tokenSha256: HASH_A }] }, /tenants\[0\]\.name must be/],
      [{ tenants: [{ name: "acme", tokenSha256: "abc" }] }, /tenants\[0\]\.tokenSha256 must be the hex SHA-256/],
      [
        {
          tenants: [
            { name: "acme", tokenSha256: HASH_A },
            { name: "acme", tokenSha256: HASH_B },
          ],
        },
        /tenants\[1\]\.name "acme" is given twice/,
      ],
      [
        {
          tenants: [
            { name: "acme", tokenSha256: HASH_A },
            { name: "globex", tokenSha256: HASH_A },
          ],
        },
        /tenants\[1\]\.tokenSha256 is another tenant's too/,
      ],
      [{ tenants: [{ name: "acme", tokenSha256: HASH_A, token: "x" }] }, /tenants\[0\] has an unknown key "token"/],
      [{ tenants: [{ name: "acme", tokenSha256: HASH_A, quotas: { maxExecs: 1 } }] }, /tenants\[0\]\.quotas has an unknown quota "maxExecs"/],
      [{ tenants: [{ name: "acme", tokenSha256: HASH_A, quotas: { maxSuspendedRuns: -1 } }] }, /tenants\[0\]\.quotas\.maxSuspendedRuns must be a whole number/],
      [{ tenants: [{ name: "acme", tokenSha256: HASH_A, quotas: { maxStoreBytes: 1.5 } }] }, /tenants\[0\]\.quotas\.maxStoreBytes must be a whole number/],
      [{ tenants: [{ name: "acme", tokenSha256: HASH_A, quotas: { execsPerSecond: 0 } }] }, /tenants\[0\]\.quotas\.execsPerSecond must be a number above 0/],
      [{ tenants: [{ name: "acme", tokenSha256: HASH_A, quotas: { weight: 5000 } }] }, /tenants\[0\]\.quotas\.weight must be at most/],
    ];
    for (const [doc, message] of cases) expect(() => parseTenants(doc, "test"), JSON.stringify(doc)).toThrow(message);
    await expect(loadTenantsFile(file("bad.json", "{"))).rejects.toThrow(/not valid JSON/);
    await expect(loadTenantsFile("/nonexistent/tenants.json")).rejects.toThrow(/cannot read the file/);
  });
});

describe("a tenant's scope key", () => {
  const scope = { agentId: "a", sessionId: "s", sessionKey: "k", agentRunId: "r" };

  it("is the scope's key for the default tenant, and names any other tenant", () => {
    expect(scopeKeyOf(withTenant(scope, DEFAULT_TENANT))).toBe(scopeKeyOf(scope));
    expect(withTenant(scope, DEFAULT_TENANT)).toBe(scope);
    const acme = withTenant(scope, "acme");
    expect(scopeKeyOf(acme)).not.toBe(scopeKeyOf(scope));
    expect(scopeKeyOf(acme)).not.toBe(scopeKeyOf(withTenant(scope, "globex")));
    expect(tenantOfScopeKey(scopeKeyOf(acme))).toBe("acme");
    expect(tenantOfScopeKey(scopeKeyOf(scope))).toBe(DEFAULT_TENANT);
    expect(withTenant(acme, DEFAULT_TENANT)).toEqual(scope);
  });
});
