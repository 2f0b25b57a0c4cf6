/** Types of ./check-docs-core.mjs, for its unit test (test/unit/docs-check.test.ts). */

export type Problem = { file: string; line: number; message: string; missing?: string };
export type Context = { repo: RepoIndex; read(path: string): string | undefined };
export type RepoIndex = { has(path: string): boolean; isFile(path: string): boolean; files: Set<string> };

export const PATH_ROOTS: readonly string[];
export function normalizePath(path: string): string | undefined;
export function expandBraces(pattern: string): string[];
export function repoIndex(files: Iterable<string>): RepoIndex;
export function githubSlug(heading: string): string;
export function anchorsOf(markdown: string): Set<string>;
export function markdownRefs(markdown: string): {
  code: Array<{ text: string; line: number }>;
  links: Array<{ target: string; line: number }>;
  prose: Array<{ text: string; line: number }>;
};
export function splitPointer(token: string): { path: string; pointer: string | undefined; anchor: string | undefined };
export function hasDeclaration(source: string, name: string): boolean;
export function leadingComment(source: string): { text: string; line: number } | undefined;
export function checkHeader(file: string, source: string, ctx: Context): Problem[];
export function checkMarkdown(file: string, markdown: string, ctx: Context, options?: { paths?: boolean }): Problem[];
export function checkDocs(input: {
  files: Iterable<string>;
  read(path: string): string | undefined;
  docs: readonly string[];
  modules: readonly string[];
  historical?: readonly string[];
}): Problem[];
