/**
 * Serves a {@link VirtApiApp} over HTTPS with the certificate virt-api is given. With a requestheader client CA,
 * client certificates are requested (not required: kube-apiserver's webhook calls present none) and verified
 * against it, so the aggregator's identity headers can be trusted.
 */
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import type { VirtApiApp } from "./app.ts";

/** TLS and address for {@link startVirtApiServer}. */
export interface VirtApiServerOptions {
  readonly certPem: string;
  readonly keyPem: string;
  /** CA that signs the aggregator's (front proxy's) client certificate. */
  readonly clientCaPem?: string;
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port: number;
}

/** A running virt-api server. */
export interface RunningServer {
  readonly server: Server;
  readonly port: number;
  close(): Promise<void>;
}

/** Starts listening; resolves once the port is bound. */
export async function startVirtApiServer(app: VirtApiApp, options: VirtApiServerOptions): Promise<RunningServer> {
  const server = createServer({
    cert: options.certPem,
    key: options.keyPem,
    ...(options.clientCaPem ? { ca: options.clientCaPem, requestCert: true, rejectUnauthorized: false } : {}),
  });
  server.on("request", (req, res) => void app.handle(req, res));
  server.on("upgrade", (req, socket, head) => void app.upgrade(req, socket, head));
  server.on("clientError", (_err, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host ?? "0.0.0.0", () => resolve());
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: async () => {
      app.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
