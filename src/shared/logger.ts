/**
 * The process logger: pino, JSON lines on stderr (stdout is reserved for the `ready`
 * line and CLI results). Modules take a logger as a parameter and make child loggers
 * that carry the run or link they are about.
 */
import { pino, type Logger } from "pino";

export type { Logger };

export function createLogger(name: string, level = process.env.CODEMODE_LOG_LEVEL ?? "info"): Logger {
  return pino({ name, level, base: { pid: process.pid } }, pino.destination(2));
}

/** A logger that drops everything, for tools that must stay quiet. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
