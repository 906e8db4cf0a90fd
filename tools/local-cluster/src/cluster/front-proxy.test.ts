import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { componentTlsFiles } from "./component-volumes.ts";
import { type ClusterLayout, clusterComponents, nodeNames } from "./components.ts";
import { ensureFrontProxyTls, FRONT_PROXY_CLIENT_NAME } from "./virt-api-wiring.ts";

const layout: ClusterLayout = {
  projectRoot: "/repo",
  dataDir: "/data",
  kubeconfig: "/data/kubeconfig",
  execPath: "/node",
  execArgs: [],
  apiPort: 6443,
  nodeNames: nodeNames(1),
  metricsPorts: {},
  virtApiPort: 8443,
  handlerPorts: { node01: 8186 },
  componentTls: componentTlsFiles("/data"),
  frontProxy: { ca: "/pki/fp-ca.crt", clientCert: "/pki/fp.crt", clientKey: "/pki/fp.key" },
};

describe("front-proxy wiring for API aggregation", () => {
  it("gives the API server the client certificate and virt-api the requestheader CA and allowed name", () => {
    const cs = clusterComponents(layout);
    const api = cs.find((c) => c.name === "apiserver")?.argv ?? [];
    expect(api.slice(-4)).toEqual(["--proxy-client-cert", "/pki/fp.crt", "--proxy-client-key", "/pki/fp.key"]);
    const virtApi = cs.find((c) => c.name === "virt-api")?.argv ?? [];
    expect(virtApi.slice(-4)).toEqual([
      "--requestheader-client-ca",
      "/pki/fp-ca.crt",
      "--requestheader-allowed-names",
      FRONT_PROXY_CLIENT_NAME,
    ]);
  });

  it("ensureFrontProxyTls() makes a CA and a front-proxy-client certificate once, then keeps them", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-fp-"));
    try {
      const files = await ensureFrontProxyTls(dir);
      const ca = new X509Certificate(readFileSync(files.ca));
      const client = new X509Certificate(readFileSync(files.clientCert));
      expect(client.subject).toContain(`CN=${FRONT_PROXY_CLIENT_NAME}`);
      expect(client.verify(ca.publicKey)).toBe(true);
      const again = await ensureFrontProxyTls(dir);
      expect(readFileSync(again.clientCert, "utf8")).toBe(readFileSync(files.clientCert, "utf8"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
