/**
 * A TCP balancer for tests, standing in for a Kubernetes Service in front of several
 * orchestrators: each new connection goes to the next backend that accepts it, so a
 * client whose backend died reconnects through the same address to a live one.
 */
import { once } from "node:events";
import { createConnection, createServer, type Server, type Socket } from "node:net";

export type Balancer = { address: string; close(): Promise<void> };

export async function startBalancer(backends: string[]): Promise<Balancer> {
  let next = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.pause();
    const tryBackend = (left: number) => {
      if (left === 0) return void client.destroy();
      const [host, port] = backends[next++ % backends.length]!.split(":");
      const upstream = createConnection({ host: host!, port: Number(port) });
      upstream.once("error", () => tryBackend(left - 1));
      upstream.once("connect", () => {
        sockets.add(upstream);
        upstream.removeAllListeners("error");
        upstream.on("close", () => {
          sockets.delete(upstream);
          client.destroy();
        });
        upstream.on("error", () => client.destroy());
        client.on("error", () => upstream.destroy());
        client.on("close", () => upstream.destroy());
        client.pipe(upstream).pipe(client);
        client.resume();
      });
    };
    tryBackend(backends.length);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    address: `127.0.0.1:${(server.address() as { port: number }).port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
