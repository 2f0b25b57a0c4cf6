/**
 * The seed's `exec` input rules: one of `code`/`command` non-empty (both present must
 * match), `language` a flat "javascript" | "typescript" defaulting to javascript, and
 * the run's `languages` respected. Violations are `invalid_input` results.
 */
import type { Language } from "../../shared/config.js";

/** Largest program accepted, in UTF-8 bytes (the gRPC message limit is 4 MiB). */
export const MAX_CODE_BYTES = 1_048_576;

export type ExecInput = { code?: string | undefined; command?: string | undefined; language?: string | undefined };
export type CheckedInput = { ok: true; code: string; language: Language } | { ok: false; error: string };

export function checkExecInput(input: ExecInput, languages: readonly Language[]): CheckedInput {
  const code = input.code ?? "";
  const command = input.command ?? "";
  if (code.trim() === "" && command.trim() === "") {
    return { ok: false, error: "exec requires a non-empty `code` string." };
  }
  if (code !== "" && command !== "" && code !== command) {
    return { ok: false, error: "exec `code` and `command` must match when both are provided." };
  }
  const source = code !== "" ? code : command;
  if (Buffer.byteLength(source, "utf8") > MAX_CODE_BYTES) {
    return { ok: false, error: `exec code is larger than ${MAX_CODE_BYTES} bytes.` };
  }
  const raw = input.language === undefined || input.language === "" ? "javascript" : input.language;
  if (raw !== "javascript" && raw !== "typescript") {
    return { ok: false, error: `exec language must be "javascript" or "typescript", got ${JSON.stringify(raw)}.` };
  }
  if (!languages.includes(raw)) {
    return { ok: false, error: `exec language "${raw}" is disabled for this run (enabled: ${languages.join(", ")}).` };
  }
  return { ok: true, code: source, language: raw };
}
