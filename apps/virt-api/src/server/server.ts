/**
 * Serves a {@link VirtApiApp} over HTTPS with the certificate virt-api is given. With a requestheader client CA,
 * client certificates are requested (not required: kube-apiserver's webhook calls present none) and verified
 * against it, so the aggregator's identity headers can be trusted. A renewed certificate (the Secret
 * kubevirt-virt-api-certs, mounted as files) is taken with {@link RunningServer.updateCertificate}, without a restart.
 */
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { CertificateError, keyMatchesCertificate } from "@kvt/certs";
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
  /**
   * Serves `certPem`/`keyPem` to every connection made from now on (open ones keep theirs). Throws when the pair
   * cannot be used (a key that is not the certificate's); the certificate in use stays.
   */
  updateCertificate(certPem: string, keyPem: string): void;
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
    updateCertificate: (cert, key) => {
      // Checked here: Deno's setSecureContext takes a mismatched pair without a word and then fails handshakes.
      if (!keyMatchesCertificate(cert, key)) {
        throw new CertificateError("The key is not the private key of the serving certificate");
      }
      server.setSecureContext({ cert, key, ...(options.clientCaPem ? { ca: options.clientCaPem } : {}) });
    },
    close: async () => {
      app.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
