/**
 * The docs check's rules, as functions of text: no file system, no processes, so a unit test
 * (test/unit/docs-check.test.ts) can prove each rule fails when it should. The command that
 * reads the repository and reports is ./check-docs.mjs.
 *
 * What is checked, in README.md and docs/**.md:
 * - a repository path in a code span or a fenced block (`src/...`, `test/...`, `bench/...`,
 *   `scripts/...`, `clients/...`, `deploy/...`, `proto/...`, `examples/...`, `docs/...`,
 *   `bin/...`), or a file path in prose, names a file or a directory; `*`, `**`, `{a,b}` and
 *   `<placeholder>` match, `...` ends the check;
 * - a pointer `path:name` names something declared in that file (a function, class, method,
 *   const, type, or exported name), `path:Outer.inner` something declared inside `Outer`'s
 *   body (a class's method, a handler in the object a function returns), `path:120` a line
 *   the file has;
 * - a relative link resolves to a file or a directory, and its `#anchor` to a heading of
 *   the page it names (GitHub's slugs).
 * In a module's leading comment (src/, not src/gen): the same paths and pointers, `./x.ts` and
 * `../y/z.ts` resolved from the module's folder, a docs section named as `docs/x.md#anchor` or
 * `docs/x.md "Heading"`, and a name placed in a file in prose (`Class.method in ./x.ts` must be
 * declared there; `` `word` from ./x.ts `` must occur in it).
 */

/** The folders a repository path may start with. */
export const PATH_ROOTS = ["src", "test", "bench", "scripts", "clients", "deploy", "proto", "examples", "docs", "bin"];

const IDENT = "[A-Za-z_$][\\w$]*";
const MODIFIERS = "(?:(?:export|default|public|private|protected|static|async|override|readonly|declare|abstract|get|set|accessor)\\s+)*";
/** A path token: a root folder, then path characters, `{a,b}` groups and `<placeholders>`. */
const PATH_BODY = "(?:\\{[^}\\s`]*\\}|<[\\w-]+>|[^\\s`'\"()\\[\\]{}<>,;|])+";
const ROOTED = new RegExp(`(?<![\\w@./$-])(?:${PATH_ROOTS.join("|")})/${PATH_BODY}|(?<![\\w@./$-])(?:${PATH_ROOTS.join("|")})/`, "g");
const RELATIVE = new RegExp(`(?<![\\w@./$-])\\.{1,2}/${PATH_BODY}`, "g");

/** A problem found: where, and what is wrong. */
function problem(file, line, message) {
  return { file, line, message };
}

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The 1-based line of `offset` in `text`. */
function lineAt(text, offset) {
  let line = 1;
  for (let i = text.indexOf("\n"); i !== -1 && i < offset; i = text.indexOf("\n", i + 1)) line++;
  return line;
}

/** POSIX path normalisation: `a/./b/../c` → `a/c`; undefined when it climbs above the root. */
export function normalizePath(path) {
  const out = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (out.length === 0) return undefined;
      out.pop();
    } else out.push(part);
  }
  return out.join("/");
}

const dirname = (path) => (path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "");

/** `a{b,c{d,e}}` → `ab`, `acd`, `ace`. */
export function expandBraces(pattern) {
  const open = pattern.indexOf("{");
  if (open === -1) return [pattern];
  let depth = 0;
  const commas = [];
  for (let i = open; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "{") depth++;
    else if (c === "}" && --depth === 0) {
      const inner = pattern.slice(open + 1, i);
      const parts = [];
      let from = 0;
      for (const comma of commas) {
        parts.push(inner.slice(from, comma - open - 1));
        from = comma - open;
      }
      parts.push(inner.slice(from));
      const head = pattern.slice(0, open);
      const tails = expandBraces(pattern.slice(i + 1));
      return parts.flatMap((p) => expandBraces(head + p).flatMap((h) => tails.map((t) => h + t)));
    } else if (c === "," && depth === 1) commas.push(i);
  }
  return [pattern];
}

/** A glob (`*`, `**`, `<placeholder>`) as a regular expression over repository paths. */
function globRegExp(glob) {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "*" && glob[i + 1] === "*") {
      re += glob[i + 2] === "/" ? "(?:.*/)?" : ".*";
      i += glob[i + 2] === "/" ? 2 : 1;
    } else if (c === "*") re += "[^/]*";
    else if (c === "<") {
      const end = glob.indexOf(">", i);
      re += "[^/]+(?:/[^/]+)*";
      i = end === -1 ? glob.length : end;
    } else re += escapeRe(c);
  }
  return new RegExp(`^${re}/?$`);
}

/**
 * What the repository holds: its files, and every folder above them. `has(path)` is true for
 * a file or a folder (a trailing slash allowed), or a glob that matches one.
 */
export function repoIndex(files) {
  const all = new Set();
  const dirs = new Set();
  for (const f of files) {
    all.add(f);
    for (let d = dirname(f); d !== ""; d = dirname(d)) dirs.add(d);
  }
  const has = (path) => {
    const p = path.replace(/\/+$/, "");
    if (/[*<]/.test(p)) {
      const re = globRegExp(p);
      for (const f of all) if (re.test(f)) return true;
      for (const d of dirs) if (re.test(d)) return true;
      return false;
    }
    return all.has(p) || dirs.has(p);
  };
  return { has, isFile: (path) => all.has(path), files: all };
}

/**
 * GitHub's anchor for a heading: its text as rendered (code, links and emphasis reduced to
 * their words), lower-cased, punctuation dropped, each space a hyphen.
 */
export function githubSlug(heading) {
  const text = heading
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .replace(/`+/g, "")
    .replace(/\*+/g, "")
    .replace(/(^|[^\p{L}\p{N}_])_+([^_]+?)_+(?=[^\p{L}\p{N}_]|$)/gu, "$1$2");
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** The ranges of fenced code blocks, as [first line, last line] (0-based, inclusive). */
function fences(lines) {
  const out = [];
  let open;
  lines.forEach((line, i) => {
    const m = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (!m) return;
    if (!open) open = { char: m[1][0], length: m[1].length, from: i };
    else if (m[1][0] === open.char && m[1].length >= open.length && line.trim() === m[1]) {
      out.push([open.from, i]);
      open = undefined;
    }
  });
  if (open) out.push([open.from, lines.length - 1]);
  return out;
}

/** Every anchor a page has: its headings' slugs (numbered when repeated, as GitHub does) and `<a id|name>` targets. */
export function anchorsOf(markdown) {
  const lines = markdown.split("\n");
  const fenced = new Set();
  for (const [a, b] of fences(lines)) for (let i = a; i <= b; i++) fenced.add(i);
  const anchors = new Set();
  const seen = new Map();
  const add = (text) => {
    const base = githubSlug(text);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  };
  lines.forEach((line, i) => {
    if (fenced.has(i)) return;
    const atx = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line);
    if (atx) add(atx[1]);
    else if (/^ {0,3}(=+|-+)\s*$/.test(line) && i > 0 && !fenced.has(i - 1)) {
      const prev = lines[i - 1];
      if (prev.trim() !== "" && !/^\s*([-*+>#|]|\d+[.)])/.test(prev)) add(prev.trim());
    }
    for (const m of line.matchAll(/<a\s+(?:[^>]*\s)?(?:id|name)=["']([^"']+)["']/g)) anchors.add(m[1]);
  });
  return anchors;
}

/** Replaces the ranges with spaces, keeping newlines (so offsets and line numbers stay). */
function blank(text, ranges) {
  const chars = [...text];
  for (const [from, to] of ranges) for (let i = from; i < to; i++) if (chars[i] !== "\n") chars[i] = " ";
  return chars.join("");
}

/**
 * The references of a Markdown page, each with its line: the text of code spans and fenced
 * blocks (`code`), link targets outside code (`links`), and the rest, headings included
 * (`prose`).
 */
export function markdownRefs(markdown) {
  const lines = markdown.split("\n");
  const starts = [];
  let at = 0;
  for (const line of lines) {
    starts.push(at);
    at += line.length + 1;
  }
  const code = [];
  const fencedRanges = [];
  for (const [a, b] of fences(lines)) {
    fencedRanges.push([starts[a], starts[b] + lines[b].length]);
    for (let i = a + 1; i < b || (i === b && !/^ {0,3}(`{3,}|~{3,})\s*$/.test(lines[b])); i++) code.push({ text: lines[i], line: i + 1 });
  }
  const prose = blank(markdown, fencedRanges);
  const spans = [];
  for (const m of prose.matchAll(/(`+)([\s\S]*?[^`])\1(?!`)/g)) {
    spans.push([m.index, m.index + m[0].length]);
    // A span may wrap: each of its lines is read with its own number.
    const first = lineAt(markdown, m.index);
    for (const [k, part] of m[2].split("\n").entries()) code.push({ text: part, line: first + k });
  }
  const outside = blank(prose, spans);
  const links = [];
  const targets = [];
  for (const m of outside.matchAll(/!?\[(?:[^[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g)) {
    links.push({ target: m[1].replace(/^<|>$/g, ""), line: lineAt(markdown, m.index) });
    targets.push([m.index + m[0].indexOf("]("), m.index + m[0].length]);
  }
  for (const m of outside.matchAll(/^ {0,3}\[[^\]]+\]:\s*(\S+)/gm)) {
    links.push({ target: m[1].replace(/^<|>$/g, ""), line: lineAt(markdown, m.index) });
    targets.push([m.index, m.index + m[0].length]);
  }
  // Prose (headings included), without code and link targets, line by line.
  const plain = blank(outside, targets)
    .split("\n")
    .map((text, i) => ({ text, line: i + 1 }));
  return { code, links, prose: plain };
}

/** A path token split into its path and what follows: `src/a.ts:fn` → path, pointer `fn`; `docs/x.md#y` → anchor `y`. */
export function splitPointer(token) {
  let t = token.replace(/[.:]+$/, "");
  let anchor;
  const hash = t.indexOf("#");
  if (hash !== -1) {
    anchor = t.slice(hash + 1);
    t = t.slice(0, hash);
  }
  const m = new RegExp(`^(.*?\\.[\\w]+):(\\d+(?:-\\d+)?|${IDENT}(?:\\.${IDENT})*)(?:\\(\\))?$`).exec(t);
  if (m) return { path: m[1], pointer: m[2], anchor };
  return { path: t, pointer: undefined, anchor };
}

/**
 * The lines of the body of the declaration on line `at`: those indented deeper than it, up to
 * the first line back at its indentation (a wrapped signature's `}): T {` continues it).
 */
function bodyOf(lines, at) {
  const indent = /^\s*/.exec(lines[at])[0].length;
  for (let j = at + 1; j < lines.length; j++) {
    const line = lines[j];
    if (line.trim() === "") continue;
    const ind = /^\s*/.exec(line)[0].length;
    if (ind > indent) continue;
    // At its own indentation, only the rest of a wrapped signature continues it (`}): T {`, `) => {`).
    if (ind === indent && /^[)}\]]/.test(line.trim()) && /(?:\{|=>)$/.test(line.trim())) continue;
    return { from: at + 1, to: j };
  }
  return { from: at + 1, to: lines.length };
}

/** Whether `line` declares `name` (`member`: inside a class, interface or object, where fields and methods count). */
function declares(line, name, member) {
  const n = escapeRe(name);
  if (new RegExp(`\\b(?:function\\*?|class|interface|type|enum|namespace)\\s+${n}\\b`).test(line)) return true;
  if (new RegExp(`\\b(?:const|let|var)\\s+${n}\\b`).test(line)) return true;
  if (new RegExp(`^\\s*export\\s*(?:type\\s*)?\\{[^}]*\\b${n}\\b[^}]*\\}`).test(line)) return true;
  const method = new RegExp(`^\\s*${MODIFIERS}\\*?${n}\\s*(?:<[^>]*>)?\\s*\\(`);
  // A call at the start of a line (`start();`) is not a declaration; a signature (`m(): T;`) is.
  if (method.test(line) && !(/;\s*$/.test(line) && !/\)\s*:/.test(line))) return true;
  if (member && new RegExp(`^\\s*${MODIFIERS}${n}\\s*[?!]?\\s*(?::|=(?!=))`).test(line)) return true;
  return false;
}

/**
 * Whether `source` declares the pointer `name` (`Outer.inner`: `inner` within `Outer`'s body),
 * or, for a line number, has that many lines.
 */
export function hasDeclaration(source, name) {
  const lines = source.split("\n");
  if (/^\d/.test(name)) {
    const last = Number(name.split("-").pop());
    return last >= 1 && last <= lines.length;
  }
  let ranges = [{ from: 0, to: lines.length }];
  name.split(".").forEach((part, depth) => {
    const next = [];
    for (const { from, to } of ranges)
      for (let i = from; i < to; i++)
        if (declares(lines[i], part, depth > 0)) next.push(depth === name.split(".").length - 1 ? { from: i, to: i } : bodyOf(lines, i));
    ranges = next;
  });
  return ranges.length > 0;
}

/**
 * Checks one path token as found in `file` on `line`: that it exists (relative to `base` when
 * it starts with ./ or ../), that its pointer is declared, its anchor a heading.
 */
function checkToken(token, ctx, file, line, base) {
  const { path: raw, pointer, anchor } = splitPointer(token);
  const out = [];
  if (raw.includes("...")) return out;
  const resolved = /^\.{1,2}\//.test(raw) ? normalizePath(`${base}/${raw}`) : normalizePath(raw);
  if (resolved === undefined) return [problem(file, line, `\`${token}\`: the path climbs above the repository`)];
  const trailing = raw.endsWith("/") ? "/" : "";
  const alternatives = expandBraces(resolved + trailing);
  for (const alt of alternatives) {
    // A module named as it is imported (`.js`) is its `.ts` source.
    const path = !ctx.repo.has(alt) && alt.endsWith(".js") && ctx.repo.has(`${alt.slice(0, -3)}.ts`) ? `${alt.slice(0, -3)}.ts` : alt;
    if (!ctx.repo.has(path)) {
      out.push({ ...problem(file, line, `\`${token}\`: no such file or directory ${path}`), missing: path });
      continue;
    }
    // A pointer on a pattern (`src/<file>.ts:name`) is a placeholder too.
    if (pointer !== undefined && !/[*<]/.test(path)) {
      const source = ctx.repo.isFile(path) ? ctx.read(path) : undefined;
      if (source === undefined) out.push(problem(file, line, `\`${token}\`: ${path} is not a file, so it cannot declare ${pointer}`));
      else if (!hasDeclaration(source, pointer))
        out.push(problem(file, line, /^\d/.test(pointer) ? `\`${token}\`: ${path} has no line ${pointer}` : `\`${token}\`: ${path} declares no ${pointer}`));
    }
    if (anchor !== undefined && anchor !== "" && !/[*<]/.test(anchor)) out.push(...checkAnchor(path, anchor, ctx, file, line, `\`${token}\``));
  }
  return out;
}

/** Checks that `path` (a repository file) has the anchor: a heading of a Markdown page, or `L12` of another file. */
function checkAnchor(path, anchor, ctx, file, line, what) {
  const text = ctx.read(path);
  if (text === undefined) return [];
  if (path.endsWith(".md")) {
    const wanted = decodeURIComponent(anchor).toLowerCase();
    return anchorsOf(text).has(wanted) ? [] : [problem(file, line, `${what}: ${path} has no heading with the anchor #${anchor}`)];
  }
  const l = /^L(\d+)(?:-L(\d+))?$/.exec(anchor);
  if (l && Number(l[2] ?? l[1]) > text.split("\n").length) return [problem(file, line, `${what}: ${path} has no line ${l[2] ?? l[1]}`)];
  return [];
}

/** Checks one link target of a Markdown page. */
function checkLink(target, ctx, file, line) {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) return [];
  const hash = target.indexOf("#");
  const rawPath = decodeURI(hash === -1 ? target : target.slice(0, hash));
  const anchor = hash === -1 ? undefined : target.slice(hash + 1);
  let path = file;
  if (rawPath !== "") {
    const resolved = rawPath.startsWith("/") ? normalizePath(rawPath) : normalizePath(`${dirname(file)}/${rawPath}`);
    if (resolved === undefined || !ctx.repo.has(resolved)) return [problem(file, line, `link (${target}): no such file or directory ${resolved ?? rawPath}`)];
    path = resolved;
  }
  if (anchor === undefined || anchor === "" || !ctx.repo.isFile(path)) return [];
  return checkAnchor(path, anchor, ctx, file, line, `link (${target})`);
}

/** Path tokens in a text (rooted ones; relative ones too when `relative`). */
function tokensIn(text, relative) {
  const found = [...text.matchAll(ROOTED)];
  if (relative) found.push(...text.matchAll(RELATIVE));
  // A sentence's full stop or colon after a path is not part of it.
  return found.map((m) => ({ token: m[0].replace(/[.:]+$/, ""), index: m.index })).sort((a, b) => a.index - b.index);
}

/**
 * A module's leading comment: the block comment (or run of line comments) before any code,
 * with the line it starts on.
 */
export function leadingComment(source) {
  const m = /^(?:#![^\n]*\n)?(\s*)(\/\*[\s\S]*?\*\/|(?:[ \t]*\/\/[^\n]*\n?)+)/.exec(source);
  if (!m) return undefined;
  return { text: m[2], line: lineAt(source, m.index + m[0].length - m[2].length) };
}

/** Checks a module's leading comment (the module is `file`, a repository path). */
export function checkHeader(file, source, ctx) {
  const header = leadingComment(source);
  if (!header) return [];
  const out = [];
  for (const { token, index } of tokensIn(header.text, true)) {
    const line = header.line + lineAt(header.text, index) - 1;
    out.push(...checkToken(token, ctx, file, line, dirname(file)));
    // A docs section named by its heading: `docs/x.md "Heading"` (also `, "…"` or `("…")`).
    const after = header.text.slice(index + token.length);
    const quoted = /^[,:]?\s*(?:\*\s*)?\(?\s*["“]([^"”\n]+)["”]/.exec(after);
    const { path } = splitPointer(token);
    if (quoted && path.endsWith(".md") && ctx.repo.isFile(path) && !anchorsOf(ctx.read(path) ?? "").has(githubSlug(quoted[1])))
      out.push(problem(file, line, `${path} has no heading "${quoted[1]}"`));
  }
  // A name placed in a file in prose: `Class.method in ./x.ts` must be declared there; a single
  // `name` (`` `name` in ../y.ts ``, `./x.ts `name``) may be any word the file has (an op, a key).
  const named = new RegExp(
    `(?:\`(${IDENT}(?:\\.${IDENT})*)\`|(${IDENT}(?:\\.${IDENT})+))\\s*\\(?\\s*(?:in|of|from)\\s+((?:\\.{1,2}/|src/)[\\w./-]*\\w)|((?:\\.{1,2}/|src/)[\\w./-]*\\w)\\s*\\(?\`(${IDENT}(?:\\.${IDENT})*)\``,
    "g",
  );
  for (const m of header.text.matchAll(named)) {
    const name = m[1] ?? m[2] ?? m[5];
    const token = m[3] ?? m[4];
    const path = /^\.{1,2}\//.test(token) ? normalizePath(`${dirname(file)}/${token}`) : normalizePath(token);
    const source = path === undefined ? undefined : ctx.read(path.endsWith(".js") && !ctx.repo.isFile(path) ? `${path.slice(0, -3)}.ts` : path);
    const found = name.includes(".") ? hasDeclaration(source ?? "", name) : new RegExp(`(?<![\\w$])${escapeRe(name)}(?![\\w$])`).test(source ?? "");
    if (source !== undefined && !found)
      out.push(
        problem(
          file,
          header.line + lineAt(header.text, m.index) - 1,
          `${name} (named with ${token}): ${path} ${name.includes(".") ? "declares" : "has"} no ${name}`,
        ),
      );
  }
  return out.sort((a, b) => a.line - b.line);
}

/**
 * Checks a Markdown page (`file`, a repository path). `paths: false` skips its paths and
 * pointers (a page that records the tree as it was) but still checks its links.
 */
export function checkMarkdown(file, markdown, ctx, { paths = true } = {}) {
  const { code, links, prose } = markdownRefs(markdown);
  const out = [];
  if (paths) {
    for (const { text, line } of code) for (const { token } of tokensIn(text, false)) out.push(...checkToken(token, ctx, file, line, dirname(file)));
    // In prose, only what is plainly a file (`src/a.ts`, `docs/x.md#y`): a bare folder word may be meant loosely.
    for (const { text, line } of prose)
      for (const { token } of tokensIn(text, false))
        if (/\.\w+$/.test(splitPointer(token).path)) out.push(...checkToken(token, ctx, file, line, dirname(file)));
  }
  for (const { target, line } of links) out.push(...checkLink(target, ctx, file, line));
  return out;
}

/**
 * The whole check. `files`: every repository path (posix, relative); `read(path)`: a file's
 * text, or undefined; `docs`: the Markdown pages to check; `modules`: the source modules whose
 * headers to check; `historical`: pages whose paths are not checked. Returns the problems, each
 * `{file, line, message}` (and `missing`, the path, when a path does not exist).
 */
export function checkDocs({ files, read, docs, modules, historical = [] }) {
  const ctx = { repo: repoIndex(files), read };
  const out = [];
  for (const file of docs) out.push(...checkMarkdown(file, read(file) ?? "", ctx, { paths: !historical.includes(file) }));
  for (const file of modules) out.push(...checkHeader(file, read(file) ?? "", ctx));
  return out;
}
