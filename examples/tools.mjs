// Example tools for `codemode exec --tools examples/tools.mjs`: the CLI acts as the
// gateway, so each nested call from the program runs the handler here. Besides the
// tools, the module exports the metadata of its MCP server ("tracker", whose tools the
// program reaches as MCP.tracker.*) and an internal namespace (`Notes`) backed by the
// "notes" plugin's tools. A tool may also say who can call it: `allowedCallers: "model"`
// (the model directly, never from code), "program" (only from code) or "both" (the default),
// and that a person must approve each call before its handler runs: `needsApproval: true` or
// the reason (the CLI asks on the terminal, or takes --approve / --deny-approvals).
const notes = new Map([["welcome", "Code mode runs your program in a QuickJS sandbox."]]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export default [
  {
    name: "weather",
    description: "Current weather for a city (demo data)",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    handler: async ({ city }) => ({ city, tempC: 10 + (city.length % 15), sky: city.length % 2 ? "cloudy" : "clear" }),
  },
  {
    name: "note_read",
    label: "Read note",
    description: "Read a saved note by its key",
    parameters: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
    handler: async ({ key }) => {
      if (!notes.has(key)) throw new Error(`no note named ${key}`);
      return { key, text: notes.get(key) };
    },
  },
  {
    name: "note_write",
    label: "Write note",
    description: "Save a note under a key",
    parameters: { type: "object", properties: { key: { type: "string" }, text: { type: "string" } }, required: ["key", "text"] },
    handler: async ({ key, text }) => {
      notes.set(key, text);
      return { saved: key };
    },
  },
  {
    name: "slow_square",
    description: "Square a number after a short delay (to show parallel calls)",
    parameters: { type: "object", properties: { n: { type: "number" } }, required: ["n"] },
    handler: async ({ n }) => {
      await sleep(50);
      return n * n;
    },
  },
  {
    name: "build_report",
    description: "Build a report; takes about 1.5 s (longer than a short timeoutMs, to show wait)",
    parameters: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
    handler: async ({ topic }) => {
      await sleep(1500);
      return { topic, pages: 3 };
    },
  },
  {
    name: "delete_everything",
    description: "A dangerous tool: try it with --deny 'delete_*'",
    needsApproval: "it deletes everything",
    handler: async () => ({ deleted: "everything" }),
  },
  {
    name: "note_list",
    owner: "notes",
    origin: "bundled_plugin",
    description: "List the keys of saved notes, optionally those starting with a prefix",
    parameters: { type: "object", properties: { prefix: { type: "string" } } },
    handler: async ({ prefix = "" }) => [...notes.keys()].filter((k) => k.startsWith(prefix)),
  },
  {
    name: "note_append",
    owner: "notes",
    origin: "bundled_plugin",
    description: "Append a line to a note (creates it)",
    parameters: { type: "object", properties: { key: { type: "string" }, line: { type: "string" } }, required: ["key", "line"] },
    handler: async ({ key, line }) => {
      notes.set(key, notes.has(key) ? `${notes.get(key)}\n${line}` : line);
      return { key, lines: notes.get(key).split("\n").length };
    },
  },
  {
    name: "create_ticket",
    source: "mcp",
    owner: "tracker",
    description: "Create a ticket in the issue tracker",
    parameters: {
      type: "object",
      properties: { title: { type: "string", description: "One-line summary" }, priority: { enum: ["low", "normal", "high"] } },
      required: ["title"],
    },
    outputSchema: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
    annotations: { destructiveHint: false, idempotentHint: false },
    handler: async ({ title, priority = "normal" }) => ({ content: [{ type: "text", text: `ticket #7: ${title} (${priority})` }], structuredContent: { id: 7 } }),
  },
  {
    name: "list_tickets",
    source: "mcp",
    owner: "tracker",
    description: "List open tickets",
    annotations: { readOnlyHint: true },
    handler: async () => ({ content: [{ type: "text", text: "#3 login bug, #5 slow search" }] }),
  },
  {
    name: "select_file",
    source: "client",
    owner: "desktop",
    description: "Ask the user to pick a file",
    handler: async () => ({ path: "/home/user/report.pdf" }),
  },
];

export const mcpServers = [{ name: "tracker", title: "Issue tracker", version: "1.0.0", description: "Tickets for the demo project." }];

export const namespaces = [
  {
    pluginId: "notes",
    id: "notes-api",
    globalName: "Notes",
    description: "Notes of the current session.",
    prompt: "Use Notes.list(prefix?) and Notes.append(key, line); Notes.session is the session id.",
    requiredToolNames: ["note_list", "note_append"],
    scope: {
      session: { $context: "sessionId" },
      list: { $tool: "note_list", args: ["prefix"] },
      append: { $tool: "note_append", args: ["key", "line"] },
    },
  },
];
