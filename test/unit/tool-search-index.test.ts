/** The tool-search index: tokenizing, stemming, fields, server names, filters, "did you mean", hostile input. */
import { describe, expect, it } from "vitest";
import { editDistance } from "../../src/sandbox/catalog/search/fuzzy.js";
import { descriptionIntent, Intent, queryIntent, toolIntent } from "../../src/sandbox/catalog/search/intent.js";
import { TermDictionary } from "../../src/sandbox/catalog/search/postings.js";
import { properNouns } from "../../src/sandbox/catalog/search/phrases.js";
import { schemaText } from "../../src/sandbox/catalog/search/schema-text.js";
import { ARGUMENT_WEIGHT, CONTENT_WEIGHT, isStopword, joinedPairs, queryWords, splitWords, stem, terms } from "../../src/sandbox/catalog/search/tokenize.js";
import { DEFAULT_TUNING, oneLine, ToolSearchIndex, type SearchDoc, type SearchTuning } from "../../src/sandbox/catalog/search/tool-search-index.js";

function mcp(server: string, name: string, description: string, parameters: unknown = {}, extra: Partial<SearchDoc> = {}): SearchDoc {
  return { id: `mcp:${server}:${name}`, name, description, source: "mcp", sourceName: server, parametersJson: JSON.stringify(parameters), ...extra };
}
function core(name: string, description: string, extra: Partial<SearchDoc> = {}): SearchDoc {
  return { id: `openclaw:core:${name}`, name, description, source: "openclaw", sourceName: "core", parametersJson: "{}", ...extra };
}

const CATALOG: SearchDoc[] = [
  mcp("github", "create_issue", "Create a new issue in a repository", {
    type: "object",
    properties: { owner: { type: "string" }, repo: { type: "string" }, title: { type: "string" } },
  }),
  mcp("github", "create_pull_request", "Open a pull request from a branch"),
  mcp("github", "list_commits", "List commits of a branch"),
  mcp("gitlab", "create_issue", "Create a new issue in a project"),
  mcp("linear", "createIssue", "Create a ticket in a team"),
  mcp("slack", "slack_post_message", "Post a new message to a channel", {
    type: "object",
    properties: { channel_id: { type: "string", description: "The ID of the channel" } },
  }),
  mcp("postgres", "query", "Run a read-only SQL query", { type: "object", properties: { sql: { type: "string" } } }),
  mcp("kubernetes", "kubectl_get", "Get resources", {
    type: "object",
    properties: {
      resourceType: { type: "string", enum: ["pods", "deployments", "services"] },
      opts: { type: "object", properties: { selector: { type: "string", description: "Label selector for filtering" } } },
    },
  }),
  core("cron_add", "Schedule a recurring job", { label: "Schedule job" }),
  core("weather_get", "Current conditions for a place"),
  core("tts", "Convert text to audio", { aliases: ["speak", "say out loud"] }),
  core("message", "Send to chat channels", { keywords: ["whatsapp", "telegram"] }),
];
const index = new ToolSearchIndex(CATALOG);
/** Unrelated tools, so that word rarity (idf) in a small test catalog is as in a real one. */
const FILLER = [
  "weather",
  "stock",
  "music",
  "recipe",
  "news",
  "photo",
  "package",
  "invoice",
  "ticket",
  "sprint",
  "commit",
  "bucket",
  "dashboard",
  "alert",
  "metric",
  "pipeline",
  "secret",
  "domain",
].flatMap((w, i) => [
  mcp(`filler${i}`, `get_${w}`, `Get a ${w} by id`),
  mcp(`filler${i}`, `list_${w}s`, `List ${w}s`),
  mcp(`filler${i}`, `delete_${w}`, `Delete a ${w}`),
]);
/** The first hit for `query` over `docs` (and the filler), with the default tuning changed by `over` (to show a rule off). */
const first = (docs: SearchDoc[], query: string, over: Partial<SearchTuning> = {}): string | undefined =>
  new ToolSearchIndex([...FILLER, ...docs], { ...DEFAULT_TUNING, ...over }).search(query, 1)[0];

describe("tokenize", () => {
  it("splits identifiers: snake, camel, acronyms, dots, dashes, colons, slashes", () => {
    expect(splitWords("create_pull_request")).toEqual(["create", "pull", "request"]);
    expect(splitWords("listPRsForRepo")).toEqual(["list", "prs", "for", "repo"]);
    expect(splitWords("getHTTPServer")).toEqual(["get", "http", "server"]);
    expect(splitWords("openclaw:core:web.fetch-page/v2")).toEqual(["openclaw", "core", "web", "fetch", "page", "v2"]);
    expect(splitWords("Crème brûlée 東京")).toEqual(["crème", "brûlée", "東京"]);
  });
  it("drops stopwords and one-letter words, keeps digits", () => {
    expect(isStopword("the")).toBe(true);
    expect(isStopword("issue")).toBe(false);
    expect(terms("can you please open a new issue on it")).toEqual(["open", "issu"]);
    expect(terms("a to in of")).toEqual([]);
    expect(terms("x 2 s3")).toEqual(["2", "s3"]);
  });
  it("stems plurals, -ing and -ed to one form, deterministically", () => {
    const same = (...ws: string[]): void => expect(new Set(ws.map(stem)).size, ws.join(",")).toBe(1);
    same("create", "creates", "creating", "created");
    same("issue", "issues");
    same("query", "queries", "queried");
    same("search", "searches", "searching", "searched");
    same("run", "running");
    same("stop", "stopped", "stopping");
    same("database", "databases");
    same("process", "processes");
    same("schedule", "scheduled", "scheduling");
    same("use", "used", "uses");
    same("react", "reaction", "reactions");
    same("delete", "deletion");
    same("select", "selection");
    expect(stem("status")).toBe("status");
    expect(stem("analysis")).toBe("analysis");
    expect(stem("string")).toBe("string");
    expect(stem("pull")).toBe("pull");
    expect(stem("add")).toBe("add");
    expect(stem("adding")).toBe("add");
    expect(stem("s3")).toBe("s3");
  });
  it("splits non-ASCII text the same way as ASCII", () => {
    expect(splitWords("listÉvénementsByDate")).toEqual(["list", "événements", "by", "date"]);
    expect(splitWords("getHTTPServer")).toEqual(splitWords("getHTTPServer\u00a0"));
    expect(splitWords("naïveCafé — ÀBCDéf’s")).toEqual(["naïve", "café", "àbc", "déf", "s"]);
    expect(splitWords("💡 TIP: listÉvénements 𝕏")).toEqual(["tip", "list", "événements", "𝕏"]);
  });
  it("meets British and American spellings in one stem", () => {
    const same = (a: string, b: string): void => expect(stem(a), `${a} ${b}`).toBe(stem(b));
    same("summarise", "summarize");
    same("analysing", "analyzing");
    same("colours", "color");
    same("centre", "center");
    same("cancelled", "cancel");
    expect(stem("spelled")).toBe(stem("spell"));
    expect(stem("tours")).toBe("tour");
  });
  it("weighs argument-like query words down: times, numbers, quoted text, emails, #channels, file names", () => {
    const weights = (q: string): Record<string, number> => Object.fromEntries(queryWords(q).map((w) => [w.surface, w.weight]));
    const w = weights('post "deploy finished" to #ops tomorrow at 8am about config.yaml for jane@example.com');
    expect(w.post).toBe(1);
    for (const arg of ["deploy", "finished", "ops", "tomorrow", "8am", "config", "yaml", "jane", "example", "com"]) expect(w[arg], arg).toBe(ARGUMENT_WEIGHT);
    // Curly quotes too (typed by phones and word processors).
    const curly = weights("send \u201chello world\u201d to bob");
    expect([curly.send, curly.hello, curly.world, curly.bob]).toEqual([1, ARGUMENT_WEIGHT, ARGUMENT_WEIGHT, 1]);
  });
  it("keeps an abbreviation and its expansion as one query word", () => {
    expect(queryWords("open a PR")).toEqual([
      { term: "open", surface: "open", weight: 1 },
      { term: "pr", surface: "pr", weight: 1, expansion: ["pull", "request"] },
    ]);
  });
  it("offers adjacent words joined, but never two stopwords", () => {
    expect(joinedPairs("argo cd app").map((j) => j.term)).toEqual(["argocd", "cdapp"]);
    expect(joinedPairs("summarize this for me").map((j) => j.term)).toEqual(["summarizethis"]);
    // Two stopwords only into a word some tool's name writes that way ("to do" → todo).
    expect(joinedPairs("microsoft to do").map((j) => j.term)).toEqual(["microsoftto"]);
    expect(joinedPairs("microsoft to do", (w) => w === "todo").map((j) => j.term)).toEqual(["microsoftto", "todo"]);
    expect(joinedPairs("summarize this for me", (w) => w === "todo").map((j) => j.term)).toEqual(["summarizethis"]);
  });
  it("reads capitalised words after the first as names, never acronyms or 'I'", () => {
    expect([...properNouns("Find flights from Shanghai to New York, as I said")]).toEqual(["shanghai", "new", "york"]);
    expect([...properNouns("run an SEO audit for QR codes")]).toEqual([]);
    expect([...properNouns("Weather")]).toEqual([]);
  });
  it("expands common abbreviations on request", () => {
    expect(terms("open a pr", true)).toEqual(["open", "pr", "pull", "request"]);
    expect(terms("k8s pods", true)).toEqual(["k8s", "kubernet", "pod"]);
    expect(terms("app", true)).toEqual(["app", "application"].map(stem));
  });
  it("offers synonyms of common verbs, and keeps a stopword that has some ('done')", () => {
    const syn = (q: string): Record<string, readonly string[] | undefined> => Object.fromEntries(queryWords(q).map((w) => [w.surface, w.synonyms]));
    expect(syn("add a card").add).toEqual([stem("create")]);
    expect(syn("find flights").find).toEqual([stem("search")]);
    expect(syn("cancel the meeting").cancel).toContain(stem("delete"));
    expect(syn("mark the tasks done").done).toEqual([stem("complete")]);
    expect(syn("who is in the workspace").who).toEqual([stem("user"), stem("member")]);
    expect(syn("text mom").text).toEqual([stem("message"), stem("sms")]);
    for (const w of ["many", "much", "use", "used", "every"]) expect(isStopword(w), w).toBe(true);
  });
  it("weighs down what a task is about ('called', 'about', 'for', 'saying') up to the next preposition", () => {
    const weights = (q: string): Record<string, number> => Object.fromEntries(queryWords(q).map((w) => [w.surface, w.weight]));
    const w = weights("create a linear issue for the flaky checkout test in the web project");
    expect([w.create, w.linear, w.issue, w.web, w.project]).toEqual([1, 1, 1, 1, 1]);
    expect([w.flaky, w.checkout, w.test]).toEqual([CONTENT_WEIGHT, CONTENT_WEIGHT, CONTENT_WEIGHT]);
    expect(weights("reply in the thread about the outage").outage).toBe(CONTENT_WEIGHT);
    expect(weights("make a branch called release on github").github).toBe(1);
    expect(weights("text John that I'm running late").late).toBe(CONTENT_WEIGHT);
    expect(weights("list files that changed").changed).toBe(1);
    // "for" right after a verb introduces the object.
    expect(weights("search for flights").flights).toBe(1);
  });
  it("reads weekdays in a time as arguments, and 'every monday' or 'daily' as a recurring job", () => {
    const ws = queryWords("every monday at 8am summarize my inbox");
    expect(ws.find((w) => w.surface === "monday")!.weight).toBe(ARGUMENT_WEIGHT);
    expect(ws.find((w) => w.surface === "recurring")).toMatchObject({ weight: 1, synonyms: expect.arrayContaining([stem("schedule")]) });
    expect(queryWords("post a daily digest").some((w) => w.surface === "recurring")).toBe(true);
    expect(queryWords("create an item on the monday board").find((w) => w.surface === "monday")!.weight).toBe(1);
    expect(queryWords("list every channel").some((w) => w.surface === "recurring")).toBe(false);
  });
});

describe("intent", () => {
  it("reads what a query asks for and what a tool does from their verbs", () => {
    expect(queryIntent("show my trello boards")).toBe(Intent.Read);
    expect(queryIntent("what scheduled jobs do I have")).toBe(Intent.Read);
    expect(queryIntent("remove the label and add a comment")).toBe(Intent.Delete | Intent.Create);
    expect(queryIntent("the weather")).toBe(Intent.None);
    expect(toolIntent("list_boards")).toBe(Intent.Read);
    expect(toolIntent("API-patch-page")).toBe(Intent.Change);
    expect(toolIntent("hubspot-batch-create-objects")).toBe(Intent.Create);
    expect(toolIntent("cron_run")).toBe(Intent.Run);
    expect(toolIntent("weather")).toBe(Intent.None);
  });
  it("reads a verb-less tool's verb from the first word of its description, never a question word", () => {
    expect(descriptionIntent("Get logs from Kubernetes resources")).toBe(Intent.Read);
    expect(descriptionIntent("Retrieves a page")).toBe(Intent.Read);
    expect(descriptionIntent("Deletes the file")).toBe(Intent.Delete);
    expect(descriptionIntent("When to use: linking boards")).toBe(Intent.None);
  });
  it("prefers the sibling whose verb matches", () => {
    const idx = new ToolSearchIndex([mcp("trello", "create_board", "Create a board"), mcp("trello", "list_boards", "Boards of the user")]);
    expect(idx.search("show my trello boards", 2)[0]).toBe("mcp:trello:list_boards");
    expect(idx.search("make a trello board", 2)[0]).toBe("mcp:trello:create_board");
  });
});

describe("schema text", () => {
  it("walks nested properties, items and anyOf, with descriptions and enum values", () => {
    const s = schemaText(
      JSON.stringify({
        type: "object",
        properties: {
          filter: { type: "object", properties: { state: { enum: ["open", "closed"] } } },
          labels: { type: "array", items: { type: "object", properties: { colour: { type: "string", description: "Hex colour" } } } },
          target: { anyOf: [{ type: "object", properties: { branchName: { type: "string" } } }] },
        },
      }),
    );
    expect(s.names.split(" ")).toEqual(["filter", "state", "labels", "colour", "target", "branchName"]);
    expect(s.details).toContain("open closed");
    expect(s.details).toContain("Hex colour");
  });
  it("splits and stems each distinct text once per build, with the same ids", () => {
    const dict = new TermDictionary();
    const a = dict.addText("List open issues of a repo");
    const b = dict.addText("List open issues of a repo");
    expect(a).toBe(b);
    expect(dict.tokens.slice(0, a)).toEqual(dict.tokens.slice(a));
    expect(dict.tokens.slice(0, a).map((id) => dict.terms[id])).toEqual(terms("List open issues of a repo", true));
    const skip = new Set([dict.id("slack")]);
    expect(dict.addText("slack_post_message", skip)).toBe(2);
    expect(dict.skipped).toBe(1);
  });
  it("ignores a schema that fails to parse or is too big, and bounds deep nesting", () => {
    expect(schemaText("{not json")).toEqual({ names: "", details: "" });
    expect(schemaText(`{"properties":{"a":"${"x".repeat(300_000)}"}}`)).toEqual({ names: "", details: "" });
    let deep: unknown = { type: "string" };
    for (let i = 0; i < 50; i++) deep = { type: "object", properties: { [`level${i}`]: deep } };
    expect(schemaText(JSON.stringify(deep)).names.split(" ").length).toBeLessThanOrEqual(5);
  });
});

describe("ToolSearchIndex.search", () => {
  it("ranks by the words of a task, and returns [] for an empty or stopword-only query", () => {
    expect(index.size).toBe(CATALOG.length);
    expect(index.search("open a pull request", 3)[0]).toBe("mcp:github:create_pull_request");
    expect(index.search("", 5)).toEqual([]);
    expect(index.search("   ", 5)).toEqual([]);
    expect(index.search("what is the", 5)).toEqual([]);
  });
  it("matches the server a query names", () => {
    expect(index.search("create an issue on github", 3)[0]).toBe("mcp:github:create_issue");
    expect(index.search("create an issue in gitlab", 3)[0]).toBe("mcp:gitlab:create_issue");
    expect(index.search("linear issue", 3)[0]).toBe("mcp:linear:createIssue");
  });
  it("indexes parameter descriptions, nested parameters and enum values", () => {
    expect(index.search("deployments", 3)[0]).toBe("mcp:kubernetes:kubectl_get");
    expect(index.search("label selector", 3)[0]).toBe("mcp:kubernetes:kubectl_get");
    expect(index.search("sql", 3)[0]).toBe("mcp:postgres:query");
  });
  it("indexes labels, aliases and keywords", () => {
    expect(index.search("schedule a job", 3)[0]).toBe("openclaw:core:cron_add");
    expect(index.search("say it out loud", 3)[0]).toBe("openclaw:core:tts");
    expect(index.search("tell them on whatsapp", 3)[0]).toBe("openclaw:core:message");
  });
  it("indexes server titles, aliases and descriptions sent by the gateway", () => {
    const idx = new ToolSearchIndex([
      mcp("srv1", "list_items", "List items"),
      mcp(
        "srv2",
        "list_items",
        "List items",
        {},
        { serverTitle: "Acme Inventory", serverAliases: ["warehouse"], serverDescription: "Stock levels of the shop" },
      ),
    ]);
    expect(idx.search("acme items", 2)[0]).toBe("mcp:srv2:list_items");
    expect(idx.search("warehouse items", 2)[0]).toBe("mcp:srv2:list_items");
    expect(idx.search("list stock levels", 2)[0]).toBe("mcp:srv2:list_items");
  });
  it("joins adjacent words the catalog knows as one ('argo cd' → argocd)", () => {
    const idx = new ToolSearchIndex([
      mcp("argocd", "get_application", "Application by name"),
      mcp("other", "get_app", "Get an app from the cd pipeline of argo"),
    ]);
    expect(idx.search("argo cd application", 2)[0]).toBe("mcp:argocd:get_application");
  });
  it("matches a query's verb through its synonyms, never above the word itself", () => {
    const trello = [
      mcp("trello", "add_checklist_item", "Add a new item to a checklist"),
      mcp("trello", "create_checklist", "Create a new checklist on a card"),
      mcp("trello", "add_label", "Add a label to a card"),
    ];
    expect(first(trello, "add a checklist to the card")).toBe("mcp:trello:create_checklist");
    expect(first(trello, "add a checklist to the card", { synonym: 0 })).toBe("mcp:trello:add_checklist_item");
    // "create" offers the rarer "add": create_checklist still comes first.
    expect(first(trello, "create a checklist")).toBe("mcp:trello:create_checklist");
  });
  it("prefers the tool whose name the query covers, less its server's name", () => {
    const yt = [
      mcp("yt", "get-transcript-languages", "List all available transcript languages for a YouTube video."),
      mcp("yt", "get-transcript", "Retrieve the transcript of a YouTube video. Accepts various YouTube URL formats and returns the full transcript"),
    ];
    expect(first(yt, "get the transcript of this youtube video")).toBe("mcp:yt:get-transcript");
    expect(first(yt, "get the transcript of this youtube video", { nameCoverage: 0 })).toBe("mcp:yt:get-transcript-languages");
  });
  it("ranks a tool without a verb a little below one whose verb matches", () => {
    const docs = [mcp("one", "logs", "Old logs, delete or keep them"), mcp("two", "logs", "Delete or keep them, old logs")];
    expect(first(docs, "delete the old logs")).toBe("mcp:two:logs");
    expect(first(docs, "delete the old logs", { intentUnknown: 1 })).toBe("mcp:one:logs");
  });
  it("prefers the tools of a server the query names in full", () => {
    const docs = [mcp("replicate", "delete_deployments", "Delete a deployment"), mcp("kubernetes", "kubectl_delete", "Delete resources by type and name")];
    expect(first(docs, "delete the kubernetes deployment called web")).toBe("mcp:kubernetes:kubectl_delete");
    expect(first(docs, "delete the kubernetes deployment called web", { serverNamed: 0 })).toBe("mcp:replicate:delete_deployments");
  });
  it("leaves a server's own name out of its tools' names", () => {
    const tools = (server: string): SearchDoc[] => [
      mcp(server, "list-calendars", "List all available calendars"),
      mcp(server, "list-events", "List events from one or more calendars. Supports both calendar IDs and calendar names."),
    ];
    // "calendar" names the google-calendar server: it does not pick list-calendars among its tools.
    expect(first(tools("google-calendar"), "what's on my google calendar")).toBe("mcp:google-calendar:list-events");
    expect(first(tools("work"), "what's on my work calendar")).toBe("mcp:work:list-calendars");
  });
  it("counts a capitalised word that no tool or server is named by as an argument", () => {
    const geo = [mcp("geo", "point_lookup", "Elevation of a point"), mcp("geo", "geocode", "Coordinates of a place such as Denver or Boston")];
    expect(first(geo, "elevation of Denver and Boston")).toBe("mcp:geo:point_lookup");
    // Written in lowercase, the same words count in full.
    expect(first(geo, "elevation of denver and boston")).toBe("mcp:geo:geocode");
    // A name a tool's name uses is no argument ("Slack", "Google Calendar").
    const named = [mcp("geo", "point_lookup", "Elevation of a point"), mcp("geo", "boston_denver_geocode", "Coordinates of a place such as Denver or Boston")];
    expect(first(named, "elevation of Denver and Boston")).toBe("mcp:geo:boston_denver_geocode");
  });
  it("matches query words as written in a tool's label too ('groups' in 'List Resource Groups')", () => {
    const azure = [
      mcp("azure", "group_resource_list", "List all resources in a resource group", {}, { label: "List Resources in Resource Group" }),
      mcp("azure", "group_list", "List all resource groups", {}, { label: "List Resource Groups" }),
    ];
    expect(first(azure, "list my azure resource groups")).toBe("mcp:azure:group_list");
    expect(first(azure, "list my azure resource groups", { exactName: 0 })).toBe("mcp:azure:group_resource_list");
  });
  it("joins two stopwords into a word a tool's name has ('microsoft to do' → create-todo-task)", () => {
    const docs = [
      mcp("todoist", "add-tasks", "Add one or more tasks to a project"),
      mcp("ms365", "create-todo-task", "Create a new task in a list of Microsoft's apps"),
    ];
    expect(first(docs, "add a task to microsoft to do")).toBe("mcp:ms365:create-todo-task");
    expect(first(docs, "add a task to microsoft")).toBe("mcp:todoist:add-tasks");
  });
  it("counts two words written together ('sub agent', subagent) once, the better way", () => {
    const docs = [core("subagents_kill", "Stop a running sub-agent"), core("sessions_spawn", "Start a sub-agent run in the background")];
    expect(first(docs, "spin up a sub agent in the background")).toBe("openclaw:core:sessions_spawn");
  });
  it("falls back to a prefix for a word that matches nothing, but does not expand known words", () => {
    expect(index.search("kube", 3)[0]).toBe("mcp:kubernetes:kubectl_get");
    expect(index.search("weath", 3)[0]).toBe("openclaw:core:weather_get");
    // "post" is a term: no prefix expansion into anything else (postgres).
    const post = index.search("post", 10);
    expect(post[0]).toBe("mcp:slack:slack_post_message");
    expect(post).not.toContain("mcp:postgres:query");
  });
  it("applies the filter and the limit", () => {
    const all = index.search("create issue", 10);
    expect(all.length).toBeGreaterThan(2);
    expect(index.search("create issue", 2)).toEqual(all.slice(0, 2));
    expect(index.search("create issue", 0)).toEqual([]);
    const onlyGitlab = index.search("create issue", 10, (id) => id.startsWith("mcp:gitlab:"));
    expect(onlyGitlab).toEqual(["mcp:gitlab:create_issue"]);
    // A filter may itself search the same index.
    const nested = index.search("create issue", 10, (id) => index.search("weather", 1).length === 1 && id.includes("github"));
    expect(nested).toEqual(all.filter((id) => id.includes("github")));
  });
  it("returns the same order from a few first picks as from a full sort, with and without a filter", () => {
    const many = Array.from({ length: 300 }, (_, i) => mcp(`s${i % 7}`, `create_item_${i}`, `Create an item${" in a list".repeat(i % 5)} number ${i}`));
    const idx = new ToolSearchIndex(many);
    const all = idx.search("create an item", 1000);
    expect(all).toHaveLength(300);
    expect(idx.search("create an item", 5)).toEqual(all.slice(0, 5));
    const rare = (id: string): boolean => id.endsWith("7");
    expect(idx.search("create an item", 12, rare)).toEqual(all.filter(rare).slice(0, 12));
  });
  it("is deterministic and breaks ties by catalog order", () => {
    const twins = new ToolSearchIndex([mcp("a", "ping", "Ping"), mcp("b", "ping", "Ping"), mcp("c", "ping", "Ping")]);
    expect(twins.search("ping", 3)).toEqual(["mcp:a:ping", "mcp:b:ping", "mcp:c:ping"]);
    const again = new ToolSearchIndex(CATALOG);
    for (const q of ["create issue", "message channel", "weather"]) expect(again.search(q, 10)).toEqual(index.search(q, 10));
  });
  it("survives hostile input: a 100 KB query, odd characters, huge fields, broken schemas", () => {
    const big = "issue ".repeat(20_000);
    const found = index.search(big, 5);
    expect(found[0]).toMatch(/issue/i);
    // A 100 KB query costs what a short one does: only its head (256 characters) is read,
    // so the head alone finds the same, and nothing past it changes the answer.
    expect(index.search(big.slice(0, 256), 5)).toEqual(found);
    expect(index.search(`${big} weather forecast in Oslo`, 5)).toEqual(found);
    expect(index.search("\u0000\uffff𝕏🙂 ".repeat(1000), 5)).toEqual([]);
    const idx = new ToolSearchIndex([
      { ...mcp("x", "broken", "Broken schema"), parametersJson: "{".repeat(100_000) },
      { ...mcp("x", "huge", "d ".repeat(500_000)), name: "n".repeat(100_000), aliases: Array.from({ length: 10_000 }, () => "alias") },
      mcp("x", "fine", "A fine tool"),
    ]);
    expect(idx.size).toBe(3);
    expect(idx.search("fine", 3)).toEqual(["mcp:x:fine"]);
    expect(idx.search("broken schema", 3)[0]).toBe("mcp:x:broken");
  });
});

describe("ToolSearchIndex.suggest", () => {
  it("suggests close names and ids for typos", () => {
    expect(index.suggest("github_craete_issue", 3)).toContain("mcp:github:create_issue");
    expect(index.suggest("mcp:github:create_isue", 3)[0]).toBe("mcp:github:create_issue");
    expect(index.suggest("openclaw:core:mesage", 3)[0]).toBe("openclaw:core:message");
    expect(index.suggest("wether_get", 3)[0]).toBe("openclaw:core:weather_get");
  });
  it("falls back to search words when nothing is close, and bounds its input", () => {
    expect(index.suggest("post_to_slack_channel", 3)).toContain("mcp:slack:slack_post_message");
    expect(index.suggest("", 3)).toEqual([]);
    expect(index.suggest("zzzzzzzzzzzz", 3)).toEqual([]);
    expect(Array.isArray(index.suggest("q".repeat(100_000), 3))).toBe(true);
  });
  it("measures edits with adjacent swaps", () => {
    expect(editDistance("craete", "create", 3)).toBe(1);
    expect(editDistance("kitten", "sitting", 5)).toBe(3);
    expect(editDistance("abc", "xyzabc", 2)).toBe(3);
  });
});

describe("oneLine", () => {
  it("keeps the first sentence, bounded", () => {
    expect(oneLine("Create an issue.  Needs a token.\nMore.")).toBe("Create an issue.");
    expect(oneLine("x".repeat(500), 20)).toHaveLength(20);
  });
});
