// Time to the ready line of `codemode start`, for two builds side by side.
//
//   node bench/start-compare.mjs [--n 11] OTHER_DIR [THIS_DIR]
//
// Each DIR is a built package (bin/codemode.js, dist/); THIS_DIR defaults to this one. The two
// are started alternately, N times each, on free ports; each start is timed by its own
// `started` log line (`startupMs`: process start to the ready line) and stopped at once. Prints
// every sample, sorted, and the median and spread of each. A worktree of another commit with
// `node_modules` linked and `npm run build` run in it makes a good OTHER_DIR.
import { spawn } from "node:child_process";
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({ options: { n: { type: "string", default: "11" } }, allowPositionals: true });
const N = Number(values.n);
if (!Number.isInteger(N) || N < 1 || positionals.length < 1) {
  process.stderr.write("usage: node bench/start-compare.mjs [--n 11] OTHER_DIR [THIS_DIR]\n");
  process.exit(2);
}
const dirs = [resolve(positionals[0]), resolve(positionals[1] ?? fileURLToPath(new URL("..", import.meta.url)))];

/** One start: its startupMs, read from the `started` line; the process is stopped right after. */
function startOnce(dir) {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [`${dir}/bin/codemode.js`, "start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let err = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(new Error(`${dir}: no started line in 20 s\n${err}`));
    }, 20_000);
    child.stderr.on("data", (chunk) => {
      err += chunk;
      const m = /"startupMs":(\d+)[^\n]*"msg":"started"/.exec(err);
      if (!m) return;
      clearTimeout(timer);
      child.once("exit", () => done(Number(m[1])));
      child.kill("SIGTERM");
    });
  });
}

const samples = [[], []];
const load0 = loadavg()[0];
for (let i = 0; i < N; i++) for (const k of [0, 1]) samples[k].push(await startOnce(dirs[k]));
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
console.log(
  `# codemode start, process start to ready line (startupMs); ${N} starts each, alternated; load average ${load0.toFixed(2)} -> ${loadavg()[0].toFixed(2)}`,
);
for (const k of [0, 1]) {
  const s = samples[k];
  console.log(
    `${k === 0 ? "other" : "this "} ${dirs[k]}: median ${pct(s, 50)} ms, min ${pct(s, 0)}, max ${pct(s, 100)}; ${[...s].sort((a, b) => a - b).join(" ")}`,
  );
}
