/**
 * Gives the JavaScript sucrase makes of a TypeScript cell the columns of the model's own
 * source, so that every position QuickJS reports (runtime errors, syntax errors, the
 * literal-null fallback of ../worker/guest-errors.ts) is already a position in the
 * TypeScript the model wrote, with no mapping step after the run.
 *
 * sucrase keeps lines but removes type syntax, so code after an annotation moves left.
 * Its source map records, for each token it kept, where the token was. This pass walks
 * the output's tokens (acorn's tokenizer) and puts spaces before a token that now stands
 * left of its original column. Only whitespace is added, only between tokens and never
 * inside template text, so the program means exactly the same. Where sucrase inserted
 * code (an `enum`, parameter properties), a token cannot move back left: the rest of that
 * line keeps sucrase's columns.
 */
import { tokenizer, tokTypes, type Token } from "acorn";

type Segment = { gen: number; src: number };

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

function vlqValues(segment: string): number[] {
  const out: number[] = [];
  let value = 0;
  let scale = 1;
  for (const ch of segment) {
    const digit = B64.indexOf(ch);
    if (digit < 0) throw new Error("bad source map");
    value += (digit & 31) * scale;
    if (digit & 32) {
      scale *= 32;
      continue;
    }
    out.push(value % 2 === 1 ? -Math.floor(value / 2) : Math.floor(value / 2));
    value = 0;
    scale = 1;
  }
  return out;
}

/** Per generated line, the [generated column, source column] pairs that stay on the same line (0-based). */
export function decodeMappings(mappings: string): Segment[][] {
  const lines: Segment[][] = [];
  let srcLine = 0;
  let srcCol = 0;
  const groups = mappings.split(";");
  for (let line = 0; line < groups.length; line++) {
    const segs: Segment[] = [];
    let genCol = 0;
    for (const text of groups[line]!.split(",")) {
      if (text === "") continue;
      const v = vlqValues(text);
      genCol += v[0] ?? 0;
      if (v.length < 4) continue;
      srcLine += v[2]!;
      srcCol += v[3]!;
      if (srcLine === line) segs.push({ gen: genCol, src: srcCol });
    }
    lines.push(segs);
  }
  return lines;
}

/** Where the token at `genCol` of this output line stood in the source line, or -1 if that is not certain. */
function sourceColumn(genCol: number, tokenText: string, segs: Segment[], outLine: string, srcLine: string): number {
  let i = -1;
  while (i + 1 < segs.length && segs[i + 1]!.gen <= genCol) i++;
  const at = segs[i];
  // The token is mapped and is the same text there (a removed token mapped to the same
  // output position would have other text).
  if (at && at.gen === genCol && srcLine.startsWith(tokenText, at.src)) return at.src;
  // The text from the token to the next mapped token was copied verbatim.
  const next = segs[i + 1];
  if (next) {
    const start = next.src - (next.gen - genCol);
    if (start >= 0 && outLine.slice(genCol, next.gen) === srcLine.slice(start, next.src)) return start;
  }
  // The text from the previous mapped token to this one was copied verbatim.
  if (at) {
    const start = at.src + (genCol - at.gen);
    if (outLine.slice(at.gen, genCol + tokenText.length) === srcLine.slice(at.src, start + tokenText.length)) return start;
  }
  return -1;
}

/** Template text (and the `${` and closing backquote that end it) must not get spaces before it. */
function paddable(tok: Token, prev: Token | undefined): boolean {
  if (tok.type === tokTypes.template || tok.type === tokTypes.invalidTemplate || tok.type === tokTypes.dollarBraceL) return false;
  if (tok.type === tokTypes.backQuote && prev !== undefined && (prev.type === tokTypes.template || prev.type === tokTypes.invalidTemplate)) return false;
  return true;
}

/**
 * The output with each token moved right to its column in `source` where it moved left.
 * `source` and `output` must have the same lines (sucrase keeps them); any doubt returns
 * the output unchanged.
 */
export function restoreColumns(source: string, output: string, mappings: string): string {
  const srcLines = source.split("\n");
  const outLines = output.split("\n");
  if (srcLines.length !== outLines.length) return output;
  const segments = decodeMappings(mappings);
  const lineStarts = [0];
  for (let i = 0; i < output.length; i++) if (output.charCodeAt(i) === 10) lineStarts.push(i + 1);
  let tokens: Token[];
  try {
    tokens = [...tokenizer(output, { ecmaVersion: "latest", allowReturnOutsideFunction: true, allowAwaitOutsideFunction: true, locations: true })];
  } catch {
    return output;
  }
  const parts: string[] = [];
  let cursor = 0;
  let column = 0; // column in the result where output[cursor] lands
  let prev: Token | undefined;
  for (const tok of tokens) {
    const chunk = output.slice(cursor, tok.start);
    parts.push(chunk);
    const nl = chunk.lastIndexOf("\n");
    column = nl >= 0 ? chunk.length - nl - 1 : column + chunk.length;
    cursor = tok.start;
    const line = (tok.loc?.start.line ?? 1) - 1;
    if (paddable(tok, prev) && line < outLines.length) {
      const genCol = tok.start - lineStarts[line]!;
      const outLine = outLines[line]!;
      const text = outLine.slice(genCol, genCol + (tok.end - tok.start));
      const target = sourceColumn(genCol, text, segments[line] ?? [], outLine, srcLines[line]!);
      if (target > column) {
        parts.push(" ".repeat(target - column));
        column = target;
      }
    }
    prev = tok;
  }
  parts.push(output.slice(cursor));
  return parts.join("");
}
