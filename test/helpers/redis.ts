/**
 * Starts a real, throwaway redis-server for tests: on a free 127.0.0.1 port, no
 * persistence, stopped (and waited for) by `stop()`.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { createInterface } from "node:readline";

export type RedisServer = {
  url: string;
  port: number;
  stop(): Promise<void>;
  /** SIGSTOP: the server takes connections and bytes into its sockets but runs nothing until `resume()`. */
  pause(): void;
  resume(): void;
  /** Starts a new, empty redis-server on the same port after `stop()` (a Redis that crashed and came back). */
  restart(): Promise<void>;
};

/** Tries this many ports before giving up (another process may take a port we picked). */
const ATTEMPTS = 5;

export async function startRedis(): Promise<RedisServer> {
  const bin = redisServerPath();
  let lastError: unknown;
  const launch = async (port: number) => {
    const child = spawn(bin, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      await ready(child);
    } catch (err) {
      await stop(child);
      throw err;
    }
    return child;
  };
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const port = await freePort();
    let child: ChildProcess;
    try {
      child = await launch(port);
    } catch (err) {
      lastError = err;
      continue;
    }
    return {
      url: `redis://127.0.0.1:${port}`,
      port,
      stop: () => stop(child),
      pause: () => void child.kill("SIGSTOP"),
      resume: () => void child.kill("SIGCONT"),
      restart: async () => {
        await stop(child);
        child = await launch(port);
      },
    };
  }
  throw new Error(`redis-server did not start after ${ATTEMPTS} attempts`, { cause: lastError });
}

/** A TCP port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  server.close();
  await once(server, "close");
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return address.port;
}

function redisServerPath(): string {
  const found = spawnSync("sh", ["-c", "command -v redis-server"], { encoding: "utf8" }).stdout.trim();
  if (found === "") throw new Error("redis-server not found on PATH: run scripts/ensure-test-deps.sh");
  return found;
}

/** Resolves when the server logs that it accepts connections; rejects if it exits first. */
function ready(child: ChildProcess): Promise<void> {
  const output: string[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server not ready\n${output.join("\n")}`)), 30_000);
    createInterface({ input: child.stderr! }).on("line", (line) => output.push(line));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      output.push(line);
      if (!line.includes("Ready to accept connections")) return;
      clearTimeout(timer);
      resolve();
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited ${code}\n${output.join("\n")}`));
    });
  });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  child.kill("SIGCONT");
  await exited;
}
