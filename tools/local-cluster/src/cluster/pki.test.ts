import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateCa } from "@kvt/certs";
import { afterEach, describe, expect, it } from "vitest";
import { componentTlsFiles } from "./component-volumes.ts";
import { type ClusterLayout, clusterComponents, nodeNames } from "./components.ts";
import { ensureCa, ensureKubeletCerts, ensureLeaf, KUBELET_CLIENT_CN } from "./pki.ts";

let dir = "";
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const subjectOf = (file: string): string => new X509Certificate(readFileSync(file)).subject;
const mode = (file: string): number => statSync(file).mode & 0o777;

describe("local cluster PKI", () => {
  it("issues the kubelets' certificates once, keys 0600 in a 0700 directory", async () => {
    dir = join(mkdtempSync(join(tmpdir(), "kvt-pki-")), "pki");
    const kubelet = await ensureKubeletCerts(dir, ["node01", "node02"]);
    expect(subjectOf(kubelet.client.cert)).toContain(`CN=${KUBELET_CLIENT_CN}`);
    expect(subjectOf(kubelet.serving.node02?.cert ?? "")).toBe("CN=system:node:node02");
    const kubeletCa = new X509Certificate(readFileSync(kubelet.ca));
    for (const f of [kubelet.client.cert, kubelet.serving.node01?.cert ?? ""])
      expect(new X509Certificate(readFileSync(f)).verify(kubeletCa.publicKey)).toBe(true);
    expect(mode(dir)).toBe(0o700);
    for (const f of [kubelet.client.key, kubelet.serving.node01?.key ?? "", join(dir, "kubelet-ca.key")])
      expect(mode(f)).toBe(0o600);
    const again = await ensureKubeletCerts(dir, ["node01", "node02"]);
    expect(readFileSync(again.client.cert, "utf8")).toBe(readFileSync(kubelet.client.cert, "utf8"));
  });

  it("reissues a leaf left by another CA (an older data directory)", async () => {
    dir = join(mkdtempSync(join(tmpdir(), "kvt-pki-")), "pki");
    const ca = await ensureCa(dir, "front-proxy-ca");
    const first = await ensureLeaf(dir, "front-proxy-client", ca, {
      commonName: "front-proxy-client",
      usage: "client",
    });
    const stale = readFileSync(first.cert, "utf8");
    const otherCa = await generateCa("front-proxy-ca");
    writeFileSync(join(dir, "front-proxy-ca.crt"), otherCa.certPem);
    writeFileSync(join(dir, "front-proxy-ca.key"), otherCa.keyPem);
    const second = await ensureLeaf(dir, "front-proxy-client", await ensureCa(dir, "front-proxy-ca"), {
      commonName: "front-proxy-client",
      usage: "client",
    });
    expect(readFileSync(second.cert, "utf8")).not.toBe(stale);
    expect(new X509Certificate(readFileSync(second.cert)).verify(new X509Certificate(otherCa.certPem).publicKey)).toBe(
      true,
    );
  });

  it("wires virt-handler, virt-api, the kubelets and the API server with their certificates", async () => {
    dir = join(mkdtempSync(join(tmpdir(), "kvt-pki-")), "pki");
    const componentTls = componentTlsFiles("/data");
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
      componentTls,
      kubeletTls,
    };
    const all = clusterComponents(layout);
    const handler = all.find((c) => c.name === "virt-handler/node01")!.argv;
    const flag = (argv: string[], name: string): string | undefined => argv[argv.indexOf(name) + 1];
    expect(flag(handler, "--host")).toBe("127.0.0.1");
    // KubeVirt's Secrets as the components read them (component-volumes.ts), not files of pki/.
    expect(flag(handler, "--tls-cert")).toBe("/data/volumes/secret/kubevirt-virt-handler-server-certs/tls.crt");
    // No CA file: the CA bundle is ConfigMap kubevirt-ca, which virt-handler and virt-api watch.
    expect(handler).not.toContain("--client-ca");
    const api = all.find((c) => c.name === "virt-api")!.argv;
    expect(flag(api, "--host")).toBe("127.0.0.1");
    expect(flag(api, "--handler-url")).toBe("node01=https://127.0.0.1:8186");
    expect(flag(api, "--handler-client-cert")).toBe("/data/volumes/secret/kubevirt-virt-handler-certs/tls.crt");
    expect(api).not.toContain("--handler-ca");
    expect(flag(api, "--tls-cert")).toBe("/data/volumes/secret/kubevirt-virt-api-certs/tls.crt");
    const kubelet = all.find((c) => c.name === "kubelet/node01")!.argv;
    expect(flag(kubelet, "--client-ca-file")).toBe(kubeletTls.ca);
    expect(flag(kubelet, "--tls-cert-file")).toBe(kubeletTls.serving.node01?.cert);
    const apiserver = all.find((c) => c.name === "apiserver")!.argv;
    expect(flag(apiserver, "--kubelet-client-certificate")).toBe(kubeletTls.client.cert);
    expect(flag(apiserver, "--kubelet-certificate-authority")).toBe(kubeletTls.ca);
  });
});
