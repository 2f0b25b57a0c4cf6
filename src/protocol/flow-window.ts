/**
 * Larger HTTP/2 receive windows for our gRPC servers and clients.
 *
 * HTTP/2 opens every connection and every stream with a small receive window (the
 * protocol's default): a peer with more to send stops when it is full until the
 * receiver's WINDOW_UPDATE comes back, one round trip through both event loops per
 * window, so a large tool answer arrives in many steps. A grpc-js client can raise its own
 * window (`grpc-node.flow_control_window`); a grpc-js server cannot yet
 * (grpc/grpc-node#3058), so each HTTP/2 server grpc-js creates for a bound port is given
 * STREAM_WINDOW_BYTES in its SETTINGS and CONNECTION_WINDOW_BYTES as each session opens.
 * What a peer may have in flight unread is bounded by the connection window.
 */
import * as grpc from "@grpc/grpc-js";
import type { Http2Server, Http2Session } from "node:http2";
import type { Logger } from "../shared/logger.js";

/** Per stream: a 3 MiB bridge answer or a snapshot's first megabytes in one window. */
export const STREAM_WINDOW_BYTES = 4 * 1024 * 1024;
/** Per connection: all streams of one peer together. */
export const CONNECTION_WINDOW_BYTES = 8 * 1024 * 1024;

/** The client channel option for the same windows on the receiving side of a client. */
export const CLIENT_WINDOW_OPTIONS: grpc.ChannelOptions = { "grpc-node.flow_control_window": CONNECTION_WINDOW_BYTES };

type WithHttp2Factory = { createHttp2Server?: (credentials: unknown) => Http2Server };

/**
 * Makes every HTTP/2 server `server` creates from now on (one per bound address) receive
 * with the larger windows. Call before binding. False when this grpc-js build creates its
 * HTTP/2 servers some other way: the windows then stay at 64 KiB (slower for large
 * messages, nothing else changes), and the caller logs it.
 */
export function raiseServerWindows(server: grpc.Server): boolean {
  const target = server as unknown as WithHttp2Factory;
  const create = target.createHttp2Server;
  if (typeof create !== "function") return false;
  target.createHttp2Server = function (this: unknown, credentials: unknown): Http2Server {
    const http2Server = create.call(this, credentials);
    http2Server.updateSettings({ initialWindowSize: STREAM_WINDOW_BYTES });
    http2Server.on("session", (session: Http2Session) => {
      try {
        session.setLocalWindowSize(CONNECTION_WINDOW_BYTES);
      } catch {
        // a session that closed at once: nothing to raise
      }
    });
    return http2Server;
  };
  return true;
}

/** A gRPC server with the larger receive windows (a warning when this grpc-js cannot take them). */
export function windowedServer(options: grpc.ServerOptions, log: Logger): grpc.Server {
  const server = new grpc.Server(options);
  if (!raiseServerWindows(server))
    log.warn("this grpc-js build has no createHttp2Server: the server's HTTP/2 receive windows stay at 64 KiB (large messages arrive more slowly)");
  return server;
}
