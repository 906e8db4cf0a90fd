import { describe, expect, it } from "vitest";
import { FakeCluster, newVmi } from "../fake/fake-cluster.ts";
import { PodHandlerLocator, TemplateHandlerLocator } from "./handler-client.ts";

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
