/**
 * The docs check (scripts/check-docs-core.mjs) on small made-up repositories: a pointer that
 * names what exists passes, and a missing file, a renamed function or method, a line past the
 * end, a broken link and a heading anchor that is not there each fail with their line. No
 * file system: the repository is a map of texts.
 */
import { describe, expect, it } from "vitest";
import { anchorsOf, checkDocs, expandBraces, githubSlug, hasDeclaration, splitPointer } from "../../scripts/check-docs-core.mjs";

const SOURCE = `/** A module. */
export function startThing(options: Options): Thing {
  return new Thing(options);
}

export class Thing {
  constructor(private readonly options: Options) {}

  async run(task: Task): Promise<void> {
    start();
  }

  readonly interrupt = () => false;
}

export function createService(deps: Deps) {
  const helper = async () => undefined;
  return {
    async exec(req, stream) {
      await helper();
    },
  };
}

export const LIMIT = 3;
`;

/** A repository of a few files; `pages` and `modules` are checked. */
function check(pages: Record<string, string>, extra: Record<string, string> = {}, modules: string[] = [], historical: string[] = []) {
  const texts: Record<string, string> = { "src/a/thing.ts": SOURCE, "src/a/other.ts": "export {};\n", "test/unit/x.test.ts": "", ...pages, ...extra };
  return checkDocs({
    files: Object.keys(texts),
    read: (path) => texts[path],
    docs: Object.keys(pages),
    modules,
    historical,
  });
}

const messages = (problems: ReturnType<typeof check>) => problems.map((p) => `${p.file}:${p.line}: ${p.message}`);

describe("pointers and paths in docs", () => {
  it("passes pointers to what the file declares, folders and globs", () => {
    const page = [
      "# Walk",
      "",
      "1. `src/a/thing.ts:startThing` starts it.",
      "2. `src/a/thing.ts:Thing.run` runs it; `src/a/thing.ts:Thing.interrupt` stops it.",
      "3. `src/a/thing.ts:createService.exec` and `src/a/thing.ts:createService.helper`, `src/a/thing.ts:LIMIT`.",
      "4. `src/a/thing.ts:9`, `src/a/`, `src/a/*.ts`, `src/{a,a/thing.ts}`, `test/unit/*.test.ts`, `src/...`.",
    ].join("\n");
    expect(messages(check({ "docs/walk.md": page }))).toEqual([]);
  });

  it("fails a path that names nothing, with its line", () => {
    const page = "# Walk\n\nThe pool is `src/a/pool.ts` and `test/unit/*.bench.ts`.\n";
    expect(messages(check({ "docs/walk.md": page }))).toEqual([
      "docs/walk.md:3: `src/a/pool.ts`: no such file or directory src/a/pool.ts",
      "docs/walk.md:3: `test/unit/*.bench.ts`: no such file or directory test/unit/*.bench.ts",
    ]);
  });

  it("fails a pointer to a renamed function, a renamed method, or a line past the end", () => {
    const page = [
      "# Walk",
      "`src/a/thing.ts:start` then `src/a/thing.ts:Thing.runAll`,",
      "then `src/a/thing.ts:createService.wait` and `src/a/thing.ts:400`.",
    ].join("\n");
    expect(messages(check({ "docs/walk.md": page }))).toEqual([
      "docs/walk.md:2: `src/a/thing.ts:start`: src/a/thing.ts declares no start",
      "docs/walk.md:2: `src/a/thing.ts:Thing.runAll`: src/a/thing.ts declares no Thing.runAll",
      "docs/walk.md:3: `src/a/thing.ts:createService.wait`: src/a/thing.ts declares no createService.wait",
      "docs/walk.md:3: `src/a/thing.ts:400`: src/a/thing.ts has no line 400",
    ]);
  });

  it("finds a method only inside its class, and does not take a call for a declaration", () => {
    expect(hasDeclaration(SOURCE, "Thing.run")).toBe(true);
    expect(hasDeclaration(SOURCE, "createService.run")).toBe(false);
    expect(hasDeclaration(SOURCE, "start")).toBe(false);
    expect(hasDeclaration(SOURCE, "Thing.exec")).toBe(false);
  });

  it("checks a file named in prose or a heading, not a folder word", () => {
    const page = "# Notes\n\n## src/a/thing.ts\n\n## src/a/gone.ts\n\nThe src/ and test/ folders; see docs/x.md#<anchor>.\n";
    expect(messages(check({ "docs/notes.md": page }, { "docs/x.md": "# X\n" }))).toEqual([
      "docs/notes.md:5: `src/a/gone.ts`: no such file or directory src/a/gone.ts",
    ]);
  });

  it("checks paths in fenced blocks too, but not those of a historical page", () => {
    const page = "# Run\n\n```bash\nnode bench/gone.bench.mjs\n```\n";
    expect(messages(check({ "docs/run.md": page }))).toEqual(["docs/run.md:4: `bench/gone.bench.mjs`: no such file or directory bench/gone.bench.mjs"]);
    expect(messages(check({ "docs/history.md": page }, {}, [], ["docs/history.md"]))).toEqual([]);
  });
});

describe("links between pages", () => {
  const target = ["# Guide", "", "## Suspend and resume (`wait`)", "", "## Notes", "", "## Notes", "", "Setext title", "---"].join("\n");

  it("resolves files, folders and heading anchors (GitHub's slugs)", () => {
    const page = [
      "# Index",
      "[resume](guide.md#suspend-and-resume-wait), [second notes](guide.md#notes-1), [setext](guide.md#setext-title),",
      "[here](#index), [code](../src/a/thing.ts), [folder](../src/a/), [web](https://example.com/x.md#nope).",
    ].join("\n");
    expect(messages(check({ "docs/index.md": page, "docs/guide.md": target }))).toEqual([]);
  });

  it("fails a link to a missing page or a missing heading, even on a historical page", () => {
    const page = "# Index\n\nSee [gone](gone.md), [wrong](guide.md#resume) and [self](#nowhere).\n";
    const expected = [
      "docs/index.md:3: link (gone.md): no such file or directory docs/gone.md",
      "docs/index.md:3: link (guide.md#resume): docs/guide.md has no heading with the anchor #resume",
      "docs/index.md:3: link (#nowhere): docs/index.md has no heading with the anchor #nowhere",
    ];
    expect(messages(check({ "docs/index.md": page, "docs/guide.md": target }))).toEqual(expected);
    expect(messages(check({ "docs/index.md": page, "docs/guide.md": target }, {}, [], ["docs/index.md"]))).toEqual(expected);
  });

  it("fails a code-span anchor to a heading that is not there", () => {
    const page = "# Index\n\n`docs/guide.md#notes` is fine, `docs/guide.md#design` is not.\n";
    expect(messages(check({ "docs/index.md": page, "docs/guide.md": target }))).toEqual([
      "docs/index.md:3: `docs/guide.md#design`: docs/guide.md has no heading with the anchor #design",
    ]);
  });

  it("slugs as GitHub does", () => {
    expect(githubSlug("Suspend and resume (`wait`)")).toBe("suspend-and-resume-wait");
    expect(githubSlug("Life of an exec: `src/...` per step")).toBe("life-of-an-exec-src-per-step");
    expect(githubSlug("**Bold** and _em_ and snake_case")).toBe("bold-and-em-and-snake_case");
    expect([...anchorsOf("# A\n```\n# not a heading\n```\n# A\n")]).toEqual(["a", "a-1"]);
  });
});

describe("module headers", () => {
  it("resolves ./ and ../ from the module's folder, .js as its .ts, and docs sections by heading", () => {
    const header = [
      "/**",
      ' * Runs things (./thing.ts, ./other.js, ../a/thing.ts:Thing.run); why: docs/guide.md "Notes",',
      " * and docs/guide.md#notes. Thing.run in ./thing.ts runs it; ./thing.ts `startThing` starts it, with `options` from ./thing.ts.",
      " */",
      "export {};",
    ].join("\n");
    expect(messages(check({}, { "src/a/mod.ts": header, "docs/guide.md": "# Guide\n## Notes\n" }, ["src/a/mod.ts"]))).toEqual([]);
  });

  it("fails a header that points at a moved file, a missing function, a missing section or a method that is not there", () => {
    const header = [
      "/**",
      " * The leash lives in ../pool-task.ts, the kill in ./thing.ts:killThread.",
      ' * Why: docs/guide.md "Design". The probe is Thing.probe in ./thing.ts, the op `probe_now` from ./thing.ts.',
      " */",
      "// ./not-a-header.ts is code, not the header",
    ].join("\n");
    expect(messages(check({}, { "src/a/mod.ts": header, "docs/guide.md": "# Guide\n" }, ["src/a/mod.ts"]))).toEqual([
      "src/a/mod.ts:2: `../pool-task.ts`: no such file or directory src/pool-task.ts",
      "src/a/mod.ts:2: `./thing.ts:killThread`: src/a/thing.ts declares no killThread",
      'src/a/mod.ts:3: docs/guide.md has no heading "Design"',
      "src/a/mod.ts:3: Thing.probe (named with ./thing.ts): src/a/thing.ts declares no Thing.probe",
      "src/a/mod.ts:3: probe_now (named with ./thing.ts): src/a/thing.ts has no probe_now",
    ]);
  });
});

describe("parsing", () => {
  it("splits pointers and expands braces", () => {
    expect(splitPointer("src/a.ts:Thing.run")).toEqual({ path: "src/a.ts", pointer: "Thing.run", anchor: undefined });
    expect(splitPointer("src/a.ts:run()")).toEqual({ path: "src/a.ts", pointer: "run", anchor: undefined });
    expect(splitPointer("docs/x.md#y")).toEqual({ path: "docs/x.md", pointer: undefined, anchor: "y" });
    expect(expandBraces("src/{a,b/{c,d}}.ts")).toEqual(["src/a.ts", "src/b/c.ts", "src/b/d.ts"]);
  });
});
