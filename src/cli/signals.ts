/** SIGTERM/SIGINT: drain (the process serves what is in flight), close, exit 0. A second signal forces exit 1. */
import type { Logger } from "../shared/logger.js";

export function onShutdown(log: Logger, close: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) {
      log.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, "shutting down");
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => handler("SIGTERM"));
  process.on("SIGINT", () => handler("SIGINT"));
}
