import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { generateCa, issueCertificate } from "@kvt/certs";
import { describe, expect, it } from "vitest";
import { FakeCluster, newVmi } from "../fake/fake-cluster.ts";
import { HANDLER_SERVER_NAME, HttpHandlerClient, PodHandlerLocator, TemplateHandlerLocator } from "./handler-client.ts";

describe("handler locators", () => {
  it("a node=URL list maps each node to its handler (the local cluster's form)", async () => {
    const locator = new TemplateHandlerLocator("node01=http://127.0.0.1:9186,node02=http://127.0.0.1:9187");
    await expect(locator.locate(newVmi("a", "Running"))).resolves.toBe("http://127.0.0.1:9186");
    const other = newVmi("b", "Running");
    if (other.status) other.status.nodeName = "node02";
    await expect(locator.locate(other)).resolves.toBe("http://127.0.0.1:9187");
    if (other.status) other.status.nodeName = "node03";
    await expect(locator.locate(other)).rejects.toThrow("no virt-handler known for node node03");
  });

  it("a template substitutes {node}", async () => {
    await expect(
      new TemplateHandlerLocator("https://{node}.handlers:8186").locate(newVmi("a", "Running")),
    ).resolves.toBe("https://node01.handlers:8186");
  });

  it("the pod locator finds the running virt-handler pod on the VMI's node, like KubeVirt", async () => {
    const cluster = new FakeCluster();
    cluster
      .addPod({
        metadata: { name: "h0", namespace: "kubevirt", labels: { "kubevirt.io": "virt-handler" } },
        spec: { nodeName: "node00" },
        status: { phase: "Running", podIP: "10.0.0.9" },
      })
      .addPod({
        metadata: { name: "h1", namespace: "kubevirt", labels: { "kubevirt.io": "virt-handler" } },
        spec: { nodeName: "node01" },
        status: { phase: "Running", podIP: "fd00::1" },
      });
    await expect(new PodHandlerLocator(cluster, "kubevirt").locate(newVmi("a", "Running"))).resolves.toBe(
      "https://[fd00::1]:8186",
    );
  });

  it("an unscheduled VMI has no handler", async () => {
    const vmi = newVmi("a", "Pending");
    if (vmi.status) delete vmi.status.nodeName;
    await expect(new TemplateHandlerLocator("x={node}").locate(vmi)).rejects.toThrow("not scheduled");
  });
});

describe("HttpHandlerClient", () => {
  it("refuses a plain-HTTP handler URL before connecting", async () => {
    const client = new HttpHandlerClient(new TemplateHandlerLocator("http://127.0.0.1:1"), {});
    await expect(client.put(newVmi("a", "Running"), "pause", {})).rejects.toThrow("mutual TLS only");
    await expect(client.console(newVmi("a", "Running"))).rejects.toThrow("mutual TLS only");
  });

  it("accepts the handler's certificate by its CN, not by address, and refuses another CN", async () => {
    const ca = await generateCa("kubevirt-ca");
    const handlerCert = await issueCertificate(ca, { commonName: HANDLER_SERVER_NAME }); // no SAN for the pod IP
    const otherCert = await issueCertificate(ca, { commonName: "somebody-else", ipAddresses: ["127.0.0.1"] });
    for (const [cert, expected] of [
      [handlerCert, "ok"],
      [otherCert, "refused"],
    ] as const) {
      const server = createServer({ cert: cert.certPem, key: cert.keyPem }, (_req, res) => res.end("{}"));
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
      const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const client = new HttpHandlerClient(new TemplateHandlerLocator(url), {
        ca: ca.certPem,
        serverName: HANDLER_SERVER_NAME,
      });
      const outcome = await client.put(newVmi("a", "Running"), "pause", {}).then(
        () => "ok",
        () => "refused",
      );
      server.close();
      expect(outcome).toBe(expected);
    }
  });
});
