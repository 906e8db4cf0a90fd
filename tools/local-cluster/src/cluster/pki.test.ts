import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateCa } from "@kvt/certs";
import { afterEach, describe, expect, it } from "vitest";
import { type ClusterLayout, clusterComponents, nodeNames } from "./components.ts";
import {
  ensureHandlerCerts,
  ensureKubeletCerts,
  ensureVirtApiCerts,
  HANDLER_CLIENT_CN,
  HANDLER_SERVER_CN,
  KUBELET_CLIENT_CN,
} from "./pki.ts";

let dir = "";
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const subjectOf = (file: string): string => new X509Certificate(readFileSync(file)).subject;
const mode = (file: string): number => statSync(file).mode & 0o777;

describe("local cluster PKI", () => {
  it("issues virt-api's, the handlers' and the kubelets' certificates once, keys 0600 in a 0700 directory", async () => {
    dir = join(mkdtempSync(join(tmpdir(), "kvt-pki-")), "pki");
    const handler = await ensureHandlerCerts(dir);
    const kubelet = await ensureKubeletCerts(dir, ["node01", "node02"]);
    const virtApi = await ensureVirtApiCerts(dir);
    expect(subjectOf(handler.server.cert)).toBe(`CN=${HANDLER_SERVER_CN}`);
    expect(subjectOf(handler.client.cert)).toBe(`CN=${HANDLER_CLIENT_CN}`);
    expect(subjectOf(kubelet.client.cert)).toContain(`CN=${KUBELET_CLIENT_CN}`);
    expect(subjectOf(kubelet.serving.node02?.cert ?? "")).toBe("CN=system:node:node02");
    const kubevirtCa = new X509Certificate(readFileSync(handler.ca));
    for (const f of [handler.server.cert, handler.client.cert, virtApi.cert])
      expect(new X509Certificate(readFileSync(f)).verify(kubevirtCa.publicKey)).toBe(true);
    expect(virtApi.ca).toBe(handler.ca);
    expect(mode(dir)).toBe(0o700);
    for (const f of [handler.server.key, handler.client.key, kubelet.client.key, join(dir, "kubevirt-ca.key")])
      expect(mode(f)).toBe(0o600);
    const again = await ensureHandlerCerts(dir);
    expect(readFileSync(again.server.cert, "utf8")).toBe(readFileSync(handler.server.cert, "utf8"));
  });

  it("reissues a leaf left by another CA (an older data directory)", async () => {
    dir = join(mkdtempSync(join(tmpdir(), "kvt-pki-")), "pki");
    const first = await ensureVirtApiCerts(dir);
    const stale = readFileSync(first.cert, "utf8");
    const otherCa = await generateCa("kubevirt-ca");
    writeFileSync(join(dir, "kubevirt-ca.crt"), otherCa.certPem);
    writeFileSync(join(dir, "kubevirt-ca.key"), otherCa.keyPem);
    const second = await ensureVirtApiCerts(dir);
    expect(readFileSync(second.cert, "utf8")).not.toBe(stale);
    const ca = new X509Certificate(otherCa.certPem);
    expect(new X509Certificate(readFileSync(second.cert)).verify(ca.publicKey)).toBe(true);
  });

  it("wires virt-handler, virt-api, the kubelets and the API server with their certificates", async () => {
    dir = join(mkdtempSync(join(tmpdir(), "kvt-pki-")), "pki");
    const handlerTls = await ensureHandlerCerts(dir);
    const kubeletTls = await ensureKubeletCerts(dir, ["node01"]);
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
      tls: { cert: "/c", key: "/k", ca: "/ca" },
      handlerTls,
      kubeletTls,
    };
    const all = clusterComponents(layout);
    const handler = all.find((c) => c.name === "virt-handler/node01")!.argv;
    const flag = (argv: string[], name: string): string | undefined => argv[argv.indexOf(name) + 1];
    expect(flag(handler, "--host")).toBe("127.0.0.1");
    expect(flag(handler, "--tls-cert")).toBe(handlerTls.server.cert);
    expect(flag(handler, "--client-ca")).toBe(handlerTls.ca);
    const api = all.find((c) => c.name === "virt-api")!.argv;
    expect(flag(api, "--host")).toBe("127.0.0.1");
    expect(flag(api, "--handler-url")).toBe("node01=https://127.0.0.1:8186");
    expect(flag(api, "--handler-client-cert")).toBe(handlerTls.client.cert);
    const kubelet = all.find((c) => c.name === "kubelet/node01")!.argv;
    expect(flag(kubelet, "--client-ca-file")).toBe(kubeletTls.ca);
    expect(flag(kubelet, "--tls-cert-file")).toBe(kubeletTls.serving.node01?.cert);
    const apiserver = all.find((c) => c.name === "apiserver")!.argv;
    expect(flag(apiserver, "--kubelet-client-certificate")).toBe(kubeletTls.client.cert);
    expect(flag(apiserver, "--kubelet-certificate-authority")).toBe(kubeletTls.ca);
  });
});
