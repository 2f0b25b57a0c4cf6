// Example tools for `codemode exec --tools examples/tools.mjs`: the CLI acts as the
// gateway, so each nested call from the program runs the handler here.
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
    handler: async () => ({ deleted: "everything" }),
  },
  {
    name: "select_file",
    source: "client",
    owner: "desktop",
    description: "Ask the user to pick a file",
    handler: async () => ({ path: "/home/user/report.pdf" }),
  },
];
