/**
 * Serves a {@link VirtApiApp} over HTTPS with the certificate virt-api is given. With a requestheader client CA,
 * client certificates are requested (not required: kube-apiserver's webhook calls present none) and verified
 * against it, so the aggregator's identity headers can be trusted. A renewed certificate (the Secret
 * kubevirt-virt-api-certs, mounted as files) is taken with {@link RunningServer.updateCertificate}, without a restart.
 */
import type { ServerResponse } from "node:http";
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
  /**
   * Stops gracefully (SIGTERM). For `delayMs` it keeps serving while it leaves its Service: /healthz answers 503
   * and every response closes its connection, so the API server's pooled connections move to the other replicas
   * instead of finding this one gone (an admission webhook call that gets EOF fails the user's request). Then it
   * stops accepting, lets the requests in flight finish for at most `graceMs`, and closes whatever is left
   * (console and port-forward streams too).
   */
  close(options?: { readonly delayMs?: number; readonly graceMs?: number }): Promise<void>;
}

/** How long requests in flight may finish once the listener is closed (ms). */
const DEFAULT_GRACE_MS = 10_000;

/** Starts listening; resolves once the port is bound. */
export async function startVirtApiServer(app: VirtApiApp, options: VirtApiServerOptions): Promise<RunningServer> {
  const server = createServer({
    cert: options.certPem,
    key: options.keyPem,
    ...(options.clientCaPem ? { ca: options.clientCaPem, requestCert: true, rejectUnauthorized: false } : {}),
  });
  let draining = false;
  const open = new Set<ServerResponse>(); // answers not yet sent: told to close their connection on a drain
  server.on("request", (req, res) => {
    if (draining)
      res.setHeader("Connection", "close"); // the socket ends after this response
    else {
      open.add(res);
      res.once("close", () => open.delete(res));
    }
    void app.handle(req, res);
  });
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
    close: async ({ delayMs = 0, graceMs = DEFAULT_GRACE_MS } = {}) => {
      draining = true;
      for (const res of open) if (!res.headersSent) res.setHeader("Connection", "close");
      open.clear();
      app.drain();
      // Idle keep-alive connections are not closed now: a client may be writing its next request on one (a webhook
      // POST that meets EOF after it was sent is not retried). Each ends after its next answer (Connection: close)
      // or by the keep-alive timeout (5 s); a delay at least that long leaves none for the listener's close.
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const graceOver = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, graceMs);
      });
      app.close(); // long-lived upgraded streams (console, VNC, port-forward) do not hold the stop up
      await Promise.race([closed, graceOver]);
      clearTimeout(timer);
      server.closeAllConnections();
      await closed;
    },
  };
}
