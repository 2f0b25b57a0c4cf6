// Builds bench/fixtures/mcp-catalog.json, the real-world catalog behind the tool-search
// quality benchmark: installs public MCP server packages from the npm registry into a
// scratch prefix (never into this repo), starts each over stdio with the MCP SDK client
// and dummy credentials, lists its tools, and keeps name, description, inputSchema and
// annotations (long texts capped so the fixture stays small). Servers that fail to
// install, start or list within the timeout are skipped and reported.
// Usage: node scripts/build-search-fixture.mjs [--prefix /tmp/mcp-fixture] [--only a,b]
//   [--cached: only servers already listed] [--refresh: list again] [--stderr: show servers' stderr]
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { z } from "zod";

const { values } = parseArgs({
  options: {
    prefix: { type: "string", default: "/tmp/mcp-fixture" },
    only: { type: "string" },
    concurrency: { type: "string", default: "6" },
    timeout: { type: "string", default: "45000" },
    out: { type: "string" },
    stderr: { type: "boolean", default: false },
    refresh: { type: "boolean", default: false },
    cached: { type: "boolean", default: false },
  },
});
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = values.out ?? join(ROOT, "bench/fixtures/mcp-catalog.json");
const PREFIX = values.prefix;
const TIMEOUT_MS = Number(values.timeout);
/** A server with more tools than this would crowd out the rest of a 2,000-tool catalog. */
const MAX_TOOLS_PER_SERVER = 200;
const WORK = join(PREFIX, "work");
mkdirSync(WORK, { recursive: true });
writeFileSync(join(WORK, "notes.md"), "# notes\n\nA scratch file.\n");
// Dummy OAuth client and token files for servers that refuse to start without them.
const OAUTH_KEYS = join(WORK, "gcp-oauth.keys.json");
writeFileSync(
  OAUTH_KEYS,
  JSON.stringify({ installed: { client_id: "x.apps.googleusercontent.com", client_secret: "x", redirect_uris: ["http://localhost"] } }),
);
const TOKEN_FILE = join(WORK, "token.json");
const KUBECONFIG = join(WORK, "kubeconfig.yaml");
writeFileSync(
  KUBECONFIG,
  "apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:9'}}]\nusers: [{name: x, user: {token: x}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\ncurrent-context: x\n",
);
const OAUTH_TOKEN = JSON.stringify({ access_token: "x", refresh_token: "x", scope: "x", token_type: "Bearer", expiry_date: 4102444800000 });
writeFileSync(TOKEN_FILE, OAUTH_TOKEN);

/** Dummy credentials: enough for most servers to start and list tools; none is real. */
const DUMMY_ENV = {
  GITHUB_PERSONAL_ACCESS_TOKEN: "x",
  GITHUB_TOKEN: "x",
  GITLAB_PERSONAL_ACCESS_TOKEN: "x",
  GITLAB_API_URL: "https://gitlab.invalid/api/v4",
  SLACK_BOT_TOKEN: "xoxb-x",
  SLACK_TEAM_ID: "T0",
  GOOGLE_MAPS_API_KEY: "x",
  BRAVE_API_KEY: "x",
  EVERART_API_KEY: "x",
  NOTION_TOKEN: "x",
  OPENAPI_MCP_HEADERS: "{}",
  FIRECRAWL_API_KEY: "fc-x",
  TAVILY_API_KEY: "tvly-x",
  EXA_API_KEY: "x",
  SUPABASE_ACCESS_TOKEN: "x",
  STRIPE_SECRET_KEY: "sk_test_x",
  SENTRY_ACCESS_TOKEN: "x",
  SENTRY_AUTH_TOKEN: "x",
  PRIVATE_APP_ACCESS_TOKEN: "x",
  HEROKU_API_KEY: "x",
  BROWSERBASE_API_KEY: "x",
  BROWSERBASE_PROJECT_ID: "x",
  ES_URL: "http://127.0.0.1:9",
  ES_API_KEY: "x",
  AIRTABLE_API_KEY: "x",
  LINEAR_API_KEY: "x",
  LINEAR_ACCESS_TOKEN: "x",
  LINEAR_API_TOKEN: "x",
  CIRCLECI_TOKEN: "x",
  DATADOG_API_KEY: "x",
  DATADOG_APP_KEY: "x",
  PERPLEXITY_API_KEY: "x",
  SHORTCUT_API_TOKEN: "x",
  APIFY_TOKEN: "x",
  LAUNCHDARKLY_API_KEY: "x",
  FIGMA_API_KEY: "x",
  MAPBOX_ACCESS_TOKEN: "pk.x",
  POSTMAN_API_KEY: "x",
  ASANA_ACCESS_TOKEN: "x",
  TODOIST_API_TOKEN: "x",
  TODOIST_API_KEY: "x",
  REPLICATE_API_TOKEN: "x",
  TRELLO_API_KEY: "x",
  TRELLO_TOKEN: "x",
  TRELLO_BOARD_ID: "x",
  ATLASSIAN_SITE_NAME: "x",
  ATLASSIAN_USER_EMAIL: "x@example.com",
  ATLASSIAN_API_TOKEN: "x",
  GRAFANA_URL: "http://127.0.0.1:9",
  GRAFANA_API_KEY: "x",
  GRAFANA_SERVICE_ACCOUNT_TOKEN: "x",
  SEARXNG_URL: "http://127.0.0.1:9",
  CHANNEL_ACCESS_TOKEN: "x",
  DESTINATION_USER_ID: "x",
  PINECONE_API_KEY: "x",
  MONGODB_URI: "mongodb://127.0.0.1:9",
  DISCOURSE_URL: "http://127.0.0.1:9",
  DIGITALOCEAN_API_TOKEN: "x",
  NETLIFY_PERSONAL_ACCESS_TOKEN: "x",
  AZURE_DEVOPS_ORG: "x",
  ARGOCD_BASE_URL: "http://127.0.0.1:9",
  ARGOCD_API_TOKEN: "x",
  OBSIDIAN_API_KEY: "x",
  RESEND_API_KEY: "re_x",
  TWILIO_ACCOUNT_SID: "ACx",
  TWILIO_API_KEY: "SKx",
  TWILIO_API_SECRET: "x",
  COINGECKO_PRO_API_KEY: "x",
  CLOUDINARY_URL: "cloudinary://x:y@z",
  DATAFORSEO_USERNAME: "x",
  DATAFORSEO_PASSWORD: "x",
  BROWSERSTACK_USERNAME: "x",
  BROWSERSTACK_ACCESS_KEY: "x",
  CODACY_ACCOUNT_TOKEN: "x",
  HOSTINGER_API_TOKEN: "x",
  DT_ENVIRONMENT: "https://x.invalid",
  N8N_API_URL: "http://127.0.0.1:9",
  N8N_API_KEY: "x",
  JIRA_URL: "https://x.invalid",
  JIRA_API_TOKEN: "x",
  JIRA_EMAIL: "x@example.com",
  MS365_MCP_CLIENT_ID: "x",
  TELNYX_API_KEY: "x",
  MYSQL_HOST: "127.0.0.1",
  MYSQL_PORT: "9",
  MYSQL_USER: "x",
  MYSQL_PASS: "x",
  MYSQL_DB: "x",
  PLANE_API_KEY: "x",
  PLANE_WORKSPACE_SLUG: "x",
  SERVICE_ACCOUNT_PATH: "/nonexistent.json",
  GOOGLE_CLOUD_PROJECT: "x",
  AWS_REGION: "us-east-1",
  AWS_ACCESS_KEY_ID: "x",
  AWS_SECRET_ACCESS_KEY: "x",
};

/** name: the server's id in the catalog; pkg: npm package; args: after the bin; bin: which bin when several. */
const CANDIDATES = [
  { name: "everything", pkg: "@modelcontextprotocol/server-everything", args: ["stdio"] },
  { name: "filesystem", pkg: "@modelcontextprotocol/server-filesystem", args: [WORK] },
  { name: "github", pkg: "@modelcontextprotocol/server-github" },
  { name: "gitlab", pkg: "@modelcontextprotocol/server-gitlab" },
  { name: "slack", pkg: "@modelcontextprotocol/server-slack" },
  { name: "google-maps", pkg: "@modelcontextprotocol/server-google-maps" },
  { name: "brave-search", pkg: "@modelcontextprotocol/server-brave-search" },
  { name: "memory", pkg: "@modelcontextprotocol/server-memory" },
  { name: "sequential-thinking", pkg: "@modelcontextprotocol/server-sequential-thinking" },
  { name: "puppeteer", pkg: "@modelcontextprotocol/server-puppeteer" },
  { name: "postgres", pkg: "@modelcontextprotocol/server-postgres", args: ["postgresql://127.0.0.1:9/x"] },
  { name: "redis", pkg: "@modelcontextprotocol/server-redis", args: ["redis://127.0.0.1:9"] },
  { name: "gdrive", pkg: "@modelcontextprotocol/server-gdrive", env: { GDRIVE_CREDENTIALS_PATH: TOKEN_FILE, GDRIVE_OAUTH_PATH: OAUTH_KEYS } },
  { name: "aws-kb-retrieval", pkg: "@modelcontextprotocol/server-aws-kb-retrieval" },
  { name: "everart", pkg: "@modelcontextprotocol/server-everart" },
  { name: "playwright", pkg: "@playwright/mcp" },
  { name: "notion", pkg: "@notionhq/notion-mcp-server" },
  { name: "kubernetes", pkg: "mcp-server-kubernetes", env: { KUBECONFIG } },
  { name: "context7", pkg: "@upstash/context7-mcp" },
  { name: "firecrawl", pkg: "firecrawl-mcp" },
  { name: "tavily", pkg: "tavily-mcp" },
  { name: "exa", pkg: "exa-mcp-server" },
  { name: "supabase", pkg: "@supabase/mcp-server-supabase", args: ["--access-token", "x"] },
  { name: "stripe", pkg: "@stripe/mcp", args: ["--tools=all", "--api-key=sk_test_x"] },
  { name: "sentry", pkg: "@sentry/mcp-server", args: ["--access-token=x"] },
  { name: "mongodb", pkg: "mongodb-mcp-server" },
  { name: "hubspot", pkg: "@hubspot/mcp-server" },
  { name: "heroku", pkg: "@heroku/mcp-server" },
  { name: "desktop-commander", pkg: "@wonderwhy-er/desktop-commander" },
  { name: "browserbase", pkg: "@browserbasehq/mcp-server-browserbase" },
  { name: "azure", pkg: "@azure/mcp", args: ["server", "start"] },
  { name: "cloudflare", pkg: "@cloudflare/mcp-server-cloudflare", args: ["run", "0"] },
  { name: "elasticsearch", pkg: "@elastic/mcp-server-elasticsearch" },
  { name: "neon", pkg: "@neondatabase/mcp-server-neon", args: ["start", "x"] },
  { name: "airtable", pkg: "airtable-mcp-server" },
  { name: "youtube-transcript", pkg: "@kimtaeyoon83/mcp-server-youtube-transcript" },
  { name: "linear", pkg: "mcp-server-linear" },
  { name: "chrome-devtools", pkg: "chrome-devtools-mcp" },
  { name: "azure-devops", pkg: "@azure-devops/mcp", args: ["x"] },
  { name: "circleci", pkg: "@circleci/mcp-server-circleci" },
  { name: "gmail", pkg: "@gongrzhe/server-gmail-autoauth-mcp", files: { ".gmail-mcp/gcp-oauth.keys.json": "keys", ".gmail-mcp/credentials.json": "token" } },
  { name: "google-calendar", pkg: "@cocal/google-calendar-mcp", env: { GOOGLE_OAUTH_CREDENTIALS: OAUTH_KEYS } },
  { name: "datadog", pkg: "@winor30/mcp-server-datadog" },
  { name: "chart", pkg: "@antv/mcp-server-chart" },
  { name: "perplexity", pkg: "@perplexity-ai/mcp-server" },
  { name: "shortcut", pkg: "@shortcut/mcp" },
  { name: "apify", pkg: "@apify/actors-mcp-server" },
  { name: "drawio", pkg: "@drawio/mcp" },
  { name: "mobile", pkg: "@mobilenext/mobile-mcp" },
  { name: "launchdarkly", pkg: "@launchdarkly/mcp-server", args: ["start", "--api-key", "x"] },
  { name: "figma", pkg: "figma-developer-mcp", args: ["--figma-api-key=x", "--stdio"] },
  { name: "eslint", pkg: "@eslint/mcp" },
  { name: "mysql", pkg: "@benborla29/mcp-server-mysql" },
  { name: "ms365", pkg: "@softeria/ms-365-mcp-server" },
  { name: "google-docs", pkg: "@a-bonus/google-docs-mcp" },
  { name: "monday", pkg: "@mondaydotcomorg/monday-api-mcp", args: ["-t", "x"] },
  { name: "mapbox", pkg: "@mapbox/mcp-server" },
  { name: "argocd", pkg: "argocd-mcp", args: ["stdio"] },
  { name: "mermaid", pkg: "mcp-mermaid" },
  { name: "airbnb", pkg: "@openbnb/mcp-server-airbnb" },
  { name: "git", pkg: "@cyanheads/git-mcp-server" },
  { name: "pinecone", pkg: "@pinecone-database/mcp" },
  { name: "postman", pkg: "@postman/postman-mcp-server" },
  { name: "asana", pkg: "@roychri/mcp-server-asana" },
  { name: "todoist", pkg: "@doist/todoist-mcp", bin: "todoist-mcp" },
  { name: "netlify", pkg: "@netlify/mcp" },
  { name: "replicate", pkg: "replicate-mcp" },
  { name: "reddit", pkg: "reddit-mcp-buddy" },
  { name: "trello", pkg: "@delorenj/mcp-server-trello" },
  { name: "jira", pkg: "@aashari/mcp-server-atlassian-jira" },
  { name: "bitbucket", pkg: "@aashari/mcp-server-atlassian-bitbucket" },
  { name: "confluence", pkg: "@atlassian-dc-mcp/confluence" },
  { name: "obsidian", pkg: "mcp-obsidian", args: [WORK] },
  { name: "grafana", pkg: "@leval/mcp-grafana" },
  { name: "time", pkg: "time-mcp" },
  { name: "fetch", pkg: "mcp-fetch-server", bin: "mcp-fetch-server" },
  { name: "pdf-reader", pkg: "@sylphx/pdf-reader-mcp" },
  { name: "searxng", pkg: "mcp-searxng" },
  { name: "line", pkg: "@line/line-bot-mcp-server" },
  { name: "shadcn", pkg: "@jpisnice/shadcn-ui-mcp-server" },
  { name: "weather", pkg: "@dangahagan/weather-mcp" },
  { name: "pubmed", pkg: "@cyanheads/pubmed-mcp-server" },
  { name: "google-map-tools", pkg: "@cablate/mcp-google-map" },
  { name: "email", pkg: "@codefuturist/email-mcp" },
  { name: "teams", pkg: "@floriscornel/teams-mcp" },
  { name: "calc", pkg: "@coo-quack/calc-mcp" },
  { name: "bigquery", pkg: "@ergut/mcp-bigquery-server", args: ["--project-id", "x"] },
  { name: "database", pkg: "@executeautomation/database-server", args: [join(WORK, "db.sqlite")] },
  { name: "shopify-dev", pkg: "@shopify/dev-mcp" },
  { name: "browser-tools", pkg: "@agentdeskai/browser-tools-mcp" },
  { name: "lighthouse", pkg: "@danielsogl/lighthouse-mcp" },
  { name: "deepwiki", pkg: "mcp-deepwiki" },
  { name: "cloud-run", pkg: "@google-cloud/cloud-run-mcp" },
  { name: "gcs", pkg: "@google-cloud/storage-mcp" },
  { name: "gcloud", pkg: "@google-cloud/gcloud-mcp" },
  { name: "gcp-observability", pkg: "@google-cloud/observability-mcp" },
  { name: "notebooklm", pkg: "notebooklm-mcp" },
  { name: "ios-simulator", pkg: "ios-simulator-mcp" },
  { name: "instantdb", pkg: "@instantdb/mcp" },
  { name: "mui", pkg: "@mui/mcp" },
  { name: "currents", pkg: "@currents/mcp" },
  { name: "codacy", pkg: "@codacy/codacy-mcp" },
  { name: "browserstack", pkg: "@browserstack/mcp-server" },
  { name: "nx", pkg: "nx-mcp" },
  { name: "firebase", pkg: "@gannonh/firebase-mcp" },
  { name: "postgres-admin", pkg: "@henkey/postgres-mcp-server" },
  { name: "dynatrace", pkg: "@dynatrace-oss/dynatrace-mcp-server" },
  { name: "flights", pkg: "@variflight-ai/variflight-mcp" },
  { name: "travel-planner", pkg: "@gongrzhe/server-travelplanner-mcp" },
  { name: "coingecko", pkg: "@coingecko/coingecko-mcp" },
  { name: "twilio", pkg: "@twilio-alpha/mcp", args: ["ACx/SKx:x"] },
  { name: "discourse", pkg: "@discourse/mcp" },
  { name: "digitalocean", pkg: "@digitalocean/mcp" },
  { name: "excel", pkg: "@negokaz/excel-mcp-server" },
  { name: "send-email", pkg: "@skanda-yutori/mcp-send-email" },
  { name: "smartbear", pkg: "@smartbear/mcp" },
  { name: "n8n", pkg: "n8n-mcp" },
  { name: "plane", pkg: "@makeplane/plane-mcp-server" },
  { name: "vercel", pkg: "vercel-mcp" },
  { name: "lunchmoney", pkg: "@akutishevsky/lunchmoney-mcp" },
  { name: "google-tasks", pkg: "@alvincrave/gtasks-mcp" },
  { name: "paperless", pkg: "@baruchiro/paperless-mcp" },
  { name: "open-library", pkg: "@geobio/mcp-open-library" },
  { name: "jira-cloud", pkg: "@aaronsb/jira-cloud-mcp" },
  { name: "google-search", pkg: "@adenot/mcp-google-search" },
  { name: "nws-weather", pkg: "@h1deya/mcp-server-weather" },
  { name: "chatwork", pkg: "@chatwork/mcp-server" },
  { name: "mongo", pkg: "mcp-mongo-server" },
  { name: "youtube-transcripts", pkg: "@fabriqa.ai/youtube-transcript-mcp" },
];

function sh(cmd, args, opts = {}) {
  return new Promise((resolveP) => {
    const p = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], ...opts });
    let out = "";
    let err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    const t = setTimeout(() => p.kill("SIGKILL"), opts.timeoutMs ?? 600_000);
    p.on("close", (code) => {
      clearTimeout(t);
      resolveP({ code, out, err });
    });
  });
}

const slug = (pkg) => pkg.replace(/[@/]/g, "_");

async function install(c) {
  const dir = join(PREFIX, "pkgs", slug(c.pkg));
  const pj = join(dir, "node_modules", c.pkg, "package.json");
  if (existsSync(pj)) return { dir, pj };
  mkdirSync(dir, { recursive: true });
  // --ignore-scripts: no postinstall may download a browser or binary (there is no network for that).
  const r = await sh("npm", ["install", "--prefix", dir, "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error", c.pkg], { timeoutMs: 300_000 });
  if (r.code !== 0 || !existsSync(pj)) throw new Error(`npm install failed: ${r.err.split("\n").slice(0, 3).join(" ")}`);
  return { dir, pj };
}

function binOf(c, pjPath) {
  const pj = JSON.parse(readFileSync(pjPath, "utf8"));
  let rel;
  if (typeof pj.bin === "string") rel = pj.bin;
  else if (pj.bin && typeof pj.bin === "object") rel = (c.bin && pj.bin[c.bin]) || Object.values(pj.bin)[0];
  if (!rel) throw new Error("no bin");
  return { bin: join(dirname(pjPath), rel), version: pj.version, description: pj.description ?? "" };
}

const LOOSE_LIST = z.looseObject({ tools: z.array(z.looseObject({ name: z.string() })), nextCursor: z.string().optional() });

async function listTools(c, bin) {
  const home = join(PREFIX, "home", c.name);
  mkdirSync(home, { recursive: true });
  for (const [rel, kind] of Object.entries(c.files ?? {})) {
    mkdirSync(dirname(join(home, rel)), { recursive: true });
    writeFileSync(join(home, rel), kind === "keys" ? readFileSync(OAUTH_KEYS, "utf8") : OAUTH_TOKEN);
  }
  const env = { ...DUMMY_ENV, PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, NODE_NO_WARNINGS: "1", ...(c.env ?? {}) };
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [bin, ...(c.args ?? [])],
    env,
    stderr: values.stderr ? "inherit" : "ignore",
    cwd: WORK,
  });
  const client = new Client({ name: "search-fixture-builder", version: "1.0.0" });
  let timer;
  const timeout = new Promise((_, rej) => (timer = setTimeout(() => rej(new Error("timeout")), TIMEOUT_MS)));
  try {
    return await Promise.race([
      (async () => {
        await client.connect(transport);
        const tools = [];
        let cursor;
        for (let page = 0; page < 20; page++) {
          // A loose result schema: some real servers omit inputSchema.type, which the SDK's strict one rejects.
          const r = await client.request({ method: "tools/list", params: cursor ? { cursor } : {} }, LOOSE_LIST);
          tools.push(...r.tools);
          cursor = r.nextCursor;
          if (!cursor) break;
        }
        return tools;
      })(),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
    await client.close().catch(() => {});
    await transport.close().catch(() => {});
  }
}

/** Caps keep the fixture small while keeping the real words: long texts are cut, not rewritten. */
const cap = (s, n) => (typeof s === "string" ? (s.length > n ? `${s.slice(0, n)}…` : s) : undefined);
const SCHEMA_KEEP = new Set(["type", "description", "properties", "items", "enum", "required", "anyOf", "oneOf", "allOf", "const"]);
/** Stricter and stricter pruning until a tool's schema fits SCHEMA_BUDGET characters. */
const SCHEMA_BUDGET = 450;
const LEVELS = [
  { desc: 100, props: [20, 8, 4, 2], enums: 15 },
  { desc: 60, props: [20, 5, 2, 0], enums: 10 },
  { desc: 40, props: [15, 3, 0, 0], enums: 8 },
  { desc: 25, props: [12, 0, 0, 0], enums: 5 },
  { desc: 0, props: [12, 0, 0, 0], enums: 3 },
];
function pruneSchema(node, depth, lv) {
  if (Array.isArray(node)) return node.slice(0, 4).map((n) => pruneSchema(n, depth, lv));
  if (!node || typeof node !== "object") return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (!SCHEMA_KEEP.has(k)) continue;
    if (k === "description") {
      if (lv.desc > 0) out[k] = cap(v, lv.desc);
    } else if (k === "properties" && v && typeof v === "object") {
      const keep = lv.props[Math.min(depth, 3)];
      if (keep === 0) continue;
      out.properties = {};
      for (const [pk, pv] of Object.entries(v).slice(0, keep)) out.properties[pk] = pruneSchema(pv, depth + 1, lv);
    } else if (k === "enum") out.enum = Array.isArray(v) ? v.slice(0, lv.enums).map((e) => (typeof e === "string" ? cap(e, 30) : e)) : v;
    else if (k === "required") out.required = Array.isArray(v) ? v.slice(0, 20) : v;
    else out[k] = pruneSchema(v, depth, lv);
  }
  return out;
}
function fitSchema(schema) {
  let out;
  for (const lv of LEVELS) {
    out = pruneSchema(schema, 0, lv);
    if (JSON.stringify(out).length <= SCHEMA_BUDGET) break;
  }
  return out;
}

/** Listings are cached under the prefix, so a rerun only starts the servers not yet listed. */
async function listed(c) {
  const cache = join(PREFIX, "listings", `${c.name}.json`);
  if (existsSync(cache) && !values.refresh) return JSON.parse(readFileSync(cache, "utf8"));
  if (values.cached) throw new Error("not listed yet (--cached)");
  const { pj } = await install(c);
  const { bin, version, description } = binOf(c, pj);
  const tools = await listTools(c, bin);
  const out = { version, description, tools };
  mkdirSync(dirname(cache), { recursive: true });
  writeFileSync(cache, JSON.stringify(out));
  return out;
}

async function one(c) {
  const t0 = Date.now();
  const { version, description, tools } = await listed(c);
  if (tools.length === 0) throw new Error("listed no tools");
  if (tools.length > MAX_TOOLS_PER_SERVER) throw new Error(`${tools.length} tools (> ${MAX_TOOLS_PER_SERVER})`);
  return {
    ms: Date.now() - t0,
    server: {
      name: c.name,
      package: c.pkg,
      version,
      description: cap(description, 300),
      tools: tools.map((t) => {
        const out = { name: t.name, description: cap(t.description ?? "", 300), inputSchema: fitSchema(t.inputSchema ?? {}) };
        if (t.annotations && Object.keys(t.annotations).length > 0) out.annotations = t.annotations;
        return out;
      }),
    },
  };
}

const only = values.only ? new Set(values.only.split(",")) : undefined;
const todo = CANDIDATES.filter((c) => !only || only.has(c.name));
const results = new Map();
const failures = [];
let next = 0;
async function worker() {
  while (next < todo.length) {
    const c = todo[next++];
    try {
      const r = await one(c);
      results.set(c.name, r.server);
      console.log(`ok   ${c.name.padEnd(22)} ${String(r.server.tools.length).padStart(4)} tools  ${c.pkg}@${r.server.version} (${r.ms} ms)`);
    } catch (e) {
      failures.push({ name: c.name, pkg: c.pkg, error: String(e?.message ?? e).slice(0, 200) });
      console.log(`FAIL ${c.name.padEnd(22)} ${c.pkg}: ${String(e?.message ?? e).slice(0, 160)}`);
    }
  }
}
await Promise.all(Array.from({ length: Number(values.concurrency) }, worker));

// Merge with an existing fixture when only some servers were (re)built.
let servers = [...results.values()];
if (only && existsSync(OUT)) {
  const prev = JSON.parse(readFileSync(OUT, "utf8")).servers.filter((s) => !results.has(s.name));
  servers = [...prev, ...servers];
}
servers.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
const total = servers.reduce((n, s) => n + s.tools.length, 0);
const fixture = {
  note: "Real tool lists of public MCP server packages from npm, listed over stdio with the MCP SDK client by scripts/build-search-fixture.mjs. Texts longer than a cap are cut; schemas keep only type/description/properties/items/enum/required/anyOf/oneOf/allOf/const and are pruned level by level (shorter descriptions, fewer nested properties) until each fits 450 characters.",
  servers,
};
mkdirSync(dirname(OUT), { recursive: true });
writeFileSync(OUT, `${JSON.stringify(fixture)}\n`);
console.log(`\n${servers.length} servers, ${total} tools -> ${OUT} (${Math.round(JSON.stringify(fixture).length / 1024)} KB)`);
if (failures.length) console.log(`skipped ${failures.length}: ${failures.map((f) => f.name).join(", ")}`);
process.exit(0);
