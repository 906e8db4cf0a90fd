/**
 * The API server's CA and serving certificate (for 127.0.0.1 / localhost), made by the one certificate module
 * (@kvt/certs): kubectl (client-go) never sends a bearer token over plain HTTP, so the server speaks TLS and the
 * kubeconfig carries the CA. They are kept in the data directory (keys 0600) so kubeconfigs survive restarts.
 */
import { createPrivateKey } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { generateCa, issueCertificate, needsRenewal, writeCertificate } from "@kvt/certs";

/** PEM material for the TLS server and the kubeconfig. */
export interface ServingCerts {
  readonly caCert: string;
  readonly cert: string;
  readonly key: string;
}

/** Generates a CA and a serving certificate for 127.0.0.1 / localhost (and writes them into `dir` if given). */
export async function generateCerts(dir?: string): Promise<ServingCerts> {
  const ca = await generateCa("kvt-local-ca");
  const serving = await issueCertificate(ca, {
    commonName: "kvt-apiserver",
    ipAddresses: ["127.0.0.1"],
    dnsNames: ["localhost"],
    validityDays: 3650,
  });
  if (dir) {
    writeCertificate(dir, "ca", ca);
    writeCertificate(dir, "apiserver", serving);
  }
  return { caCert: ca.certPem, cert: serving.certPem, key: serving.keyPem };
}

/** Loads the certificates kept in `dir`, generating them on first use or when the serving one is due for renewal. */
export async function loadOrGenerateCerts(dir: string | undefined): Promise<ServingCerts> {
  if (dir) {
    const files = ["ca.crt", "apiserver.crt", "apiserver.key"].map((f) => join(dir, f));
    if (files.every((f) => existsSync(f))) {
      const [caCert, cert, key] = files.map((f) => readFileSync(f, "utf8")) as [string, string, string];
      createPrivateKey(key);
      if (!needsRenewal(cert)) return { caCert, cert, key };
    }
  }
  return await generateCerts(dir);
}
