// MCP tools are reached through the MCP namespace, with their declarations in the
// virtual API files; an internal namespace (Notes) maps domain verbs to plugin tools.
const files = await API.list("mcp");
const header = await API.read("mcp/tracker.d.ts");
const ticket = await MCP.tracker.createTicket({ title: "Login fails on Safari", priority: "high" });
await Notes.append("triage", `opened ticket ${ticket.structuredContent.id}`);
return {
  files: files.map((f) => f.path),
  declares: header.includes("function createTicket"),
  ticket: ticket.content[0].text,
  triage: await Notes.list("tri"),
  session: Notes.session.startsWith("sess"),
};
