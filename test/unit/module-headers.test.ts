/**
 * Module headers (issue 29, item 3): every module under src/ (src/gen aside) opens with a
 * comment of at most MAX_HEADER_LINES lines that says why it exists, with no benchmark figure
 * in it (figures and their history live in docs/performance-history.md, longer reasons in
 * docs/module-notes.md). And every path a comment names, in a header or anywhere else in a
 * module, exists as named: `./x.ts` and `../x.ts` from the module's own folder, `src/...`,
 * `test/...` and the like from the repository's root, `docs/page.md#anchor` down to the
 * heading. Reads files only: no process, no port.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const MAX_HEADER_LINES = 15;

/** Every .ts file under src/, as a repository path, src/gen left out (buf's, never edited). */
function modules(dir = "src"): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir)).sort()) {
    const path = `${dir}/${name}`;
    if (path === "src/gen") continue;
    if (statSync(join(ROOT, path)).isDirectory()) out.push(...modules(path));
    else if (name.endsWith(".ts")) out.push(path);
  }
  return out;
}

/**
 * The comment a module opens with (after a shebang): block comments and runs of line
 * comments, up to the first line that is neither (a doc comment glued to the header with no
 * blank line between reads as one header, and counts as one).
 */
function leadingComment(text: string): string[] {
  const lines = text.split("\n");
  let i = lines[0]?.startsWith("#!") ? 1 : 0;
  const out: string[] = [];
  while (i < lines.length) {
    const line = lines[i]!.trimStart();
    if (line.startsWith("/*")) {
      for (; i < lines.length; i++) {
        out.push(lines[i]!);
        if (lines[i]!.includes("*/")) break;
      }
      i++;
    } else if (line.startsWith("//")) out.push(lines[i++]!);
    else break;
  }
  return out;
}

/**
 * A measured figure: a number with a unit of time, size or ratio ("0.7 MB", "55 ms", "9%",
 * "3.3×"), or a duration in words ("a few milliseconds"). Limits are named by their constant
 * (SHARE, STAGE_MIN), which this does not match; bit widths and counts without a unit are
 * not figures.
 */
const FIGURE = [
  /\b\d+(?:[.,]\d+)*\s?(?:ns|µs|us|ms|s|min|KiB|MiB|GiB|KB|MB|GB|B\/s|%|x|×)(?![\w/])/,
  /(?:^|[^\w])(?:milli|micro|nano)seconds?\b/i,
  /\bhundreds of (?:ms|µs|KB|MB|KiB|MiB)\b/i,
];

/** Phrases that tell a header's history rather than what the module is for. */
const HISTORY = /\b(?:used to|as before|before this|earlier builds?|was tried|we tried|no longer needed)\b/i;

function figuresIn(text: string): string[] {
  const found: string[] = [];
  for (const re of FIGURE) {
    const m = new RegExp(re.source, `${re.flags}g`);
    for (const hit of text.matchAll(m)) found.push(hit[0].trim());
  }
  return found;
}

/** Every comment of a module, with the line it starts on. */
function comments(text: string): { line: number; text: string }[] {
  const file = ts.createSourceFile("m.ts", text, ts.ScriptTarget.Latest, true);
  const seen = new Map<number, { line: number; text: string }>();
  const add = (ranges: ts.CommentRange[] | undefined) => {
    for (const r of ranges ?? [])
      if (!seen.has(r.pos)) seen.set(r.pos, { line: file.getLineAndCharacterOfPosition(r.pos).line + 1, text: text.slice(r.pos, r.end) });
  };
  const visit = (node: ts.Node) => {
    add(ts.getLeadingCommentRanges(text, node.pos));
    add(ts.getTrailingCommentRanges(text, node.end));
    for (const child of node.getChildren(file)) visit(child);
  };
  visit(file);
  return [...seen.values()];
}

/** Folders at the repository's root that a comment may name a path under. */
const ROOTS = "src|test|bench|scripts|docs|proto|clients|deploy|bin|examples";
const POINTER = new RegExp(`(?<![\\w./-])((?:\\.{1,2}/)+[\\w./-]*[\\w-]|(?:${ROOTS})/[\\w./-]*[\\w-](?:#[\\w-]+)?)`, "g");

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");

function anchors(doc: string): Set<string> {
  const text = readFileSync(join(ROOT, doc), "utf8");
  return new Set([...text.matchAll(/^#{1,6} +(.+?) *#*$/gm)].map((m) => slug(m[1]!)));
}

/** Why `pointer`, named in a comment of `module`, does not resolve; undefined when it does. */
function unresolved(module: string, pointer: string): string | undefined {
  const [path, anchor] = pointer.split("#") as [string, string | undefined];
  const repoPath = path.startsWith(".") ? normalize(join(dirname(module), path)) : path;
  if (relative(ROOT, join(ROOT, repoPath)).startsWith("..")) return `${pointer} leaves the repository`;
  const candidates = [repoPath, repoPath.replace(/\.js$/, ".ts")];
  const found = candidates.find((c) => existsSync(join(ROOT, c)));
  if (!found) return `${pointer} (${repoPath}) does not exist`;
  if (anchor !== undefined && found.endsWith(".md") && !anchors(found).has(anchor)) return `${pointer}: ${found} has no heading #${anchor}`;
  return undefined;
}

const all = modules();

describe("module headers", () => {
  it("finds the modules", () => {
    expect(all.length).toBeGreaterThan(100);
    expect(all).toContain("src/sandbox/server.ts");
    expect(all.some((m) => m.startsWith("src/gen/"))).toBe(false);
  });

  it.each(all)("%s opens with a header of at most 15 lines, with no figure and no history", (module) => {
    const header = leadingComment(readFileSync(join(ROOT, module), "utf8"));
    expect(header.length, "a header comment before anything else").toBeGreaterThan(0);
    expect(header.length, "lines of the header").toBeLessThanOrEqual(MAX_HEADER_LINES);
    const text = header.join("\n");
    expect(figuresIn(text), "figures belong in docs/performance-history.md").toEqual([]);
    expect(text.match(HISTORY)?.[0], "history belongs in docs/performance-history.md").toBeUndefined();
  });

  it.each(all)("%s names only paths that exist", (module) => {
    const broken: string[] = [];
    for (const c of comments(readFileSync(join(ROOT, module), "utf8")))
      for (const m of c.text.matchAll(POINTER)) {
        const why = unresolved(module, m[1]!);
        if (why) broken.push(`line ${c.line}: ${why}`);
      }
    expect(broken).toEqual([]);
  });
});

describe("the figure check", () => {
  it("catches measured figures", () => {
    for (const text of ["about 55 ms of start-up", "a 0.7 MB answer", "9% of it", "3.3× the baseline", "30 µs", "for 9 s", "a few milliseconds", "2x faster"])
      expect(figuresIn(text), text).not.toEqual([]);
  });

  it("lets limits named by their constant, bit widths and spec sections through", () => {
    for (const text of [
      "more than SHARE of the pool's thread time",
      "texts of STAGE_MIN bytes or more",
      "128 bits of seed, 53-bit doubles",
      "spec 3.2.1 and 6.1",
      "`200 * attempt` ms",
      "a 0x00 byte",
      "1/HOLD_FRACTION of the run's memory limit",
    ])
      expect(figuresIn(text), text).toEqual([]);
  });
});
