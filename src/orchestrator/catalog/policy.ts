/**
 * Allow/deny patterns over catalog ids and tool names (`*` matches any run of
 * characters). A denied tool is absent from every view, so it cannot be found, described
 * or called, not even by a guessed id.
 */
export type PolicyRules = { allow: readonly string[]; deny: readonly string[]; allowNone: boolean };

const cache = new Map<string, RegExp>();

function matcher(pattern: string): RegExp {
  let re = cache.get(pattern);
  if (!re) {
    re = new RegExp(
      `^${pattern
        .split("*")
        .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
        .join(".*")}$`,
    );
    cache.set(pattern, re);
  }
  return re;
}

function matchesAny(patterns: readonly string[], id: string, name: string): boolean {
  return patterns.some((p) => {
    const re = matcher(p);
    return re.test(id) || re.test(name);
  });
}

export function isVisible(rules: PolicyRules, id: string, name: string): boolean {
  if (rules.allowNone) return false;
  if (matchesAny(rules.deny, id, name)) return false;
  return rules.allow.length === 0 || matchesAny(rules.allow, id, name);
}

/** A stable digest of the rules, part of a catalog view's version. */
export function policyDigest(rules: PolicyRules): string {
  return JSON.stringify([rules.allowNone, [...rules.allow].sort(), [...rules.deny].sort()]);
}
