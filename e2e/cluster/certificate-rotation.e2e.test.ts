/**
 * Certificates renewed live (issue 19), on the running cluster: the KubeVirt CR asks for a new CA duration (so the
 * CA is replaced) and 40 s component certificates renewed 30 s ahead (so they are replaced every 10 s). Without a
 * restart, virt-api and virt-handler serve each renewed certificate, chained to the new CA; the bundle keeps the old
 * CA beside the new one; the webhooks' and APIServices' caBundle follow, so `kubectl create` of a VM still passes
 * through the webhooks and the aggregated API still answers. The CR is then put back and the 24 h certificates
 * return.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { connect } from "node:tls";
import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { getJson, kubectl, kubectlOk } from "../lib/cli.ts";
import { testGuestVm } from "../lib/manifests.ts";

const kubeconfig = inject("kubeconfig");
const state = JSON.parse(readFileSync(join(dirname(kubeconfig), "cluster.json"), "utf8")) as {
  virtApiPort: number;
  handlerPorts: Record<string, number>;
};
const NAME = "e2e-cert-rotation";
const ROTATION = { ca: { duration: "100h" }, server: { duration: "40s", renewBefore: "30s" } };
const WAIT = { timeoutMs: 30_000, intervalMs: 500 } as const;

interface Served {
  readonly cert: X509Certificate;
  /** When it was seen (ms). */
  readonly at: number;
}

/** The CA bundle every component trusts (ConfigMap kubevirt-ca). */
async function caBundle(): Promise<string> {
  const cm = await getJson<{ data: Record<string, string> }>(kubeconfig, "configmap", "kubevirt-ca", "kubevirt");
  return cm.data["ca-bundle"] ?? "";
}

/** The certificates of a PEM bundle. */
function certificates(bundle: string): X509Certificate[] {
  return (bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
    (pem) => new X509Certificate(pem),
  );
}

async function secretPair(name: string): Promise<{ cert: string; key: string }> {
  const s = await getJson<{ data: Record<string, string> }>(kubeconfig, "secret", name, "kubevirt");
  const text = (k: string): string => Buffer.from(s.data[k] ?? "", "base64").toString("utf8");
  return { cert: text("tls.crt"), key: text("tls.key") };
}

/**
 * The certificate served on 127.0.0.1:`port`, verified against the bundle (`servername` checked as a client of that
 * Service would; virt-handler's by CN, as virt-api checks it), presenting `client` when given.
 */
async function served(
  port: number,
  verify: { servername: string } | { cn: string },
  client?: { cert: string; key: string },
): Promise<Served> {
  const ca = await caBundle();
  return await new Promise((resolve, reject) => {
    const socket = connect({
      host: "127.0.0.1",
      port,
      ca,
      ...client,
      ...("servername" in verify
        ? { servername: verify.servername }
        : {
            checkServerIdentity: (_h, c) =>
              c.subject?.CN === verify.cn ? undefined : new Error(`served CN ${String(c.subject?.CN)}`),
          }),
    });
    socket.once("secureConnect", () => {
      const cert = new X509Certificate(socket.getPeerCertificate().raw);
      socket.destroy();
      resolve({ cert, at: Date.now() });
    });
    socket.once("error", reject);
  });
}

const lifetimeMs = (c: X509Certificate): number => Date.parse(c.validTo) - Date.parse(c.validFrom);
const VIRT_API = { servername: "virt-api.kubevirt.svc" };
const HANDLER = { cn: "kubevirt.io:system:node:virt-handler" };
const handlerPort = (): number => Object.values(state.handlerPorts)[0] ?? 0;

async function patchStrategy(selfSigned: unknown): Promise<void> {
  const patch = selfSigned
    ? { spec: { certificateRotateStrategy: { selfSigned } } }
    : { spec: { certificateRotateStrategy: null } };
  await kubectlOk(kubeconfig, [
    "patch",
    "kubevirt",
    "kubevirt",
    "-n",
    "kubevirt",
    "--type=merge",
    "-p",
    JSON.stringify(patch),
  ]);
}

describe("certificate rotation on a running cluster", () => {
  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
  });

  it("serves renewed certificates live, keeps the old CA in the bundle, and the webhooks keep working", async () => {
    const api0 = await served(state.virtApiPort, VIRT_API);
    const ca0 = certificates(await caBundle())[0];
    expect(lifetimeMs(api0.cert)).toBe(24 * 3_600_000 + 60_000);

    await patchStrategy(ROTATION);
    try {
      // The CA duration changed: a new CA, first in the bundle, the old one still trusted (the overlap).
      const bundle = await eventually(async () => {
        const certs = certificates(await caBundle());
        return certs.length === 2 && certs[1]?.fingerprint256 === ca0?.fingerprint256 ? certs : undefined;
      }, WAIT);
      const ca1 = bundle[0];
      // virt-api serves a 40 s certificate of the new CA, picked up from its files without a restart...
      const api1 = await eventually(async () => {
        const s = await served(state.virtApiPort, VIRT_API);
        return lifetimeMs(s.cert) === 100_000 && s.cert.checkIssued(ca1) ? s : undefined;
      }, WAIT);
      // ...and, 10 s later, the next one, while the first is still valid: renewed before it expires.
      const api2 = await eventually(async () => {
        const s = await served(state.virtApiPort, VIRT_API);
        return s.cert.serialNumber !== api1.cert.serialNumber ? s : undefined;
      }, WAIT);
      expect(api2.at).toBeLessThan(Date.parse(api1.cert.validTo));
      expect(api2.cert.checkIssued(ca1)).toBe(true);

      // virt-handler too, to virt-api's renewed client certificate.
      const client = await secretPair("kubevirt-virt-handler-certs");
      const handler = await eventually(async () => {
        const s = await served(handlerPort(), HANDLER, client);
        return lifetimeMs(s.cert) === 100_000 && s.cert.checkIssued(ca1) ? s : undefined;
      }, WAIT);
      expect(handler.cert.subject).toBe("CN=kubevirt.io:system:node:virt-handler");

      // The API server calls the webhooks and the aggregated API with the injected bundle.
      const hook = await getJson<{ webhooks: { clientConfig: { caBundle: string } }[] }>(
        kubeconfig,
        "mutatingwebhookconfiguration",
        "virt-api-mutator",
      );
      expect(certificates(Buffer.from(hook.webhooks[0]?.clientConfig.caBundle ?? "", "base64").toString())[0]).toEqual(
        ca1,
      );
      await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(testGuestVm(NAME)));
      const vm = await getJson<{ spec: { template: { spec: { domain: { machine?: { type?: string } } } } } }>(
        kubeconfig,
        "vm",
        NAME,
      );
      expect(vm.spec.template.spec.domain.machine?.type).toBeTruthy(); // set by the mutating webhook
      const refused = await kubectl(kubeconfig, ["create", "-f", "-"], JSON.stringify(testGuestVm(NAME)));
      expect(refused.stderr).toContain("AlreadyExists");
      const bad = testGuestVm(`${NAME}-bad`, { runStrategy: "Sometimes" });
      const denied = await kubectl(kubeconfig, ["create", "-f", "-"], JSON.stringify(bad));
      // virt-api's validator's answer (the CRD's schema takes any string there).
      expect(denied.stderr).toContain("spec.runStrategy: Invalid RunStrategy (Sometimes)");
      expect(await kubectlOk(kubeconfig, ["get", "--raw", "/apis/subresources.kubevirt.io/v1/version"])).toContain(
        "gitVersion",
      );
    } finally {
      await patchStrategy(undefined);
    }
    // Back to KubeVirt's defaults: another new CA, and 24 h certificates again.
    await eventually(async () => {
      const s = await served(state.virtApiPort, VIRT_API);
      return lifetimeMs(s.cert) === 24 * 3_600_000 + 60_000 ? s : undefined;
    }, WAIT);
  });
});
