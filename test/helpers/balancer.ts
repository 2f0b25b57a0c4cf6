/**
 * A TCP balancer for tests, standing in for a Kubernetes Service in front of several
 * orchestrators: each new connection goes to the next backend that accepts it, so a
 * client whose backend died reconnects through the same address to a live one.
 */
import { once } from "node:events";
import { createConnection, createServer, type Server, type Socket } from "node:net";

export type Balancer = {
  address: string;
  /**
   * Stops carrying bytes on every connection open now, both ways, and keeps the sockets
   * open: to both ends, a network path that went silent. New connections are carried.
   */
  freeze(): void;
  /** Closes the frozen connections (both ends see them end). */
  cutFrozen(): void;
  close(): Promise<void>;
};

export async function startBalancer(backends: string[]): Promise<Balancer> {
  let next = 0;
  const sockets = new Set<Socket>();
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  const frozen = new Set<{ client: Socket; upstream: Socket }>();
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
        const pair = { client, upstream };
        pairs.add(pair);
        client.on("close", () => pairs.delete(pair));
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
    freeze: () => {
      for (const p of pairs) {
        p.client.unpipe(p.upstream);
        p.upstream.unpipe(p.client);
        p.client.pause();
        p.upstream.pause();
        frozen.add(p);
      }
      pairs.clear();
    },
    cutFrozen: () => {
      for (const p of frozen) {
        p.client.destroy();
        p.upstream.destroy();
      }
      frozen.clear();
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
