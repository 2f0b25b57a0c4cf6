/**
 * Loads `codemode exec --tools FILE.mjs`: a module whose default export is an array of
 * tool definitions with handlers. Checked by one zod schema; an error names the entry
 * and the field.
 */
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";
import { z } from "zod";

const toolSchema = z.object({
  name: z.string().min(1),
  label: z.string().optional(),
  description: z.string().default(""),
  parameters: z.record(z.string(), z.unknown()).default({ type: "object" }),
  source: z.enum(["openclaw", "mcp", "client"]).default("openclaw"),
  owner: z.string().optional(),
  origin: z.enum(["core", "bundled_plugin", "external_plugin"]).optional(),
  handler: z.custom<(input: unknown) => unknown>((v) => typeof v === "function", { message: "handler must be a function" }),
});

export type CliTool = z.output<typeof toolSchema> & { owner: string };

export async function loadToolsModule(file: string): Promise<CliTool[]> {
  const mod = (await import(pathToFileURL(resolve(file)).href)) as { default?: unknown };
  const list = mod.default;
  if (!Array.isArray(list)) throw new Error(`${file}: the default export must be an array of tools`);
  return list.map((entry, i) => {
    const parsed = toolSchema.safeParse(entry);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new Error(`${file}: tools[${i}]${issue?.path.length ? "." + issue.path.join(".") : ""}: ${issue?.message}`);
    }
    const t = parsed.data;
    return { ...t, owner: t.owner ?? (t.source === "openclaw" ? "core" : t.source === "client" ? "app" : "server") };
  });
}
