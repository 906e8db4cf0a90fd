/**
 * Test support for the extensions: a real HTTPS server with its own CA (webhooks, aggregated APIs), a raw HTTPS
 * client for a started API server, and polling with a deadline.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, request, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { type CertificateAndKey, generateCa, issueCertificate } from "@kvt/virt-api/lib";
import type { ApiServerHandle } from "../../apiserver.ts";

/** A running HTTPS test server. */
export interface HttpsFixture {
  readonly url: string;
  readonly server: Server;
  readonly ca: CertificateAndKey;
  /** The CA PEM, base64 (a caBundle). */
  readonly caBundle: string;
  close(): Promise<void>;
}

/** Starts an HTTPS server for 127.0.0.1 signed by a fresh CA; `clientCa` makes it request client certificates. */
export async function startHttps(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  clientCa?: string,
  dnsNames: readonly string[] = [],
): Promise<HttpsFixture> {
  const ca = await generateCa("test-ca");
  const serving = await issueCertificate(ca, { dnsNames: ["localhost", ...dnsNames], ipAddresses: ["127.0.0.1"] });
  const server = createServer(
    { cert: serving.certPem, key: serving.keyPem, ...(clientCa ? { ca: clientCa, requestCert: true } : {}) },
    handler,
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    server,
    ca,
    caBundle: Buffer.from(ca.certPem).toString("base64"),
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Reads a JSON request body. */
export async function jsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
}

/** An answer from the API server. */
export interface Answer {
  readonly code: number;
  readonly body: Record<string, unknown>;
  readonly text: string;
}

/** One request to the API server as its admin. */
export function call(
  api: ApiServerHandle,
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
  headers: Record<string, string | string[]> = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, api.url);
    const req = request(
      url,
      {
        method,
        ca: api.caCert,
        headers: {
          authorization: `Bearer ${api.token}`,
          "content-type": contentType,
          accept: "application/json",
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: Record<string, unknown> = {};
          try {
            parsed = JSON.parse(text) as Record<string, unknown>;
          } catch {
            // Not JSON (logs): the text is the answer.
          }
          resolve({ code: res.statusCode ?? 0, body: parsed, text });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** Polls `fn` until it returns a value other than undefined, or fails after `ms`. */
export async function eventually<T>(what: string, fn: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`, { cause: last });
    await new Promise((r) => setTimeout(r, 50));
  }
}
