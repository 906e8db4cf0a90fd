/**
 * The service proxy without the kernel: how it reads Services and EndpointSlices, and, against a real in-memory API
 * server with a recording `nft` and `conntrack`, that it writes the table when the objects change, not when nothing
 * changed, tries again after nft fails, and clears the flows of an endpoint that left the Service.
 */
import { kubeConfigFromFile, RestClient } from "@kvt/kube";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver/apiserver.ts";
import { call, eventually } from "../apiserver/extensions/testdata/fixtures.ts";
import type { V1EndpointSlice } from "../cluster/kube-models.ts";
import type { StaleFlows } from "./conntrack.ts";
import { ServiceProxy, serviceInfo, sliceInfo } from "./service-proxy.ts";

describe("serviceInfo / sliceInfo", () => {
  it("reads unset endpoint conditions as discovery.k8s.io/v1 defines them", () => {
    const slice: V1EndpointSlice = {
      addressType: "IPv4",
      metadata: { namespace: "ns", labels: { "kubernetes.io/service-name": "web" } },
      ports: [{ port: 8080 }, { name: "no-port" }],
      endpoints: [
        { addresses: ["10.1.1.2"] },
        { addresses: ["10.1.1.3"], conditions: { ready: false, serving: true, terminating: true } },
      ],
    };
    expect(sliceInfo(slice)).toEqual({
      namespace: "ns",
      serviceName: "web",
      ports: [{ name: "", port: 8080, protocol: "TCP" }],
      endpoints: [
        { addresses: ["10.1.1.2"], ready: true, serving: true, terminating: false },
        { addresses: ["10.1.1.3"], ready: false, serving: true, terminating: true },
      ],
    });
  });

  it("ignores slices of another address family or of no Service", () => {
    expect(
      sliceInfo({ addressType: "IPv6", endpoints: [], metadata: { labels: { "kubernetes.io/service-name": "x" } } }),
    ).toBe(undefined);
    expect(sliceInfo({ addressType: "IPv4", endpoints: [], metadata: {} })).toBeUndefined();
  });

  it("gives ExternalName Services no ClusterIP", () => {
    const svc = { metadata: { name: "x", namespace: "y" }, spec: { type: "ExternalName", clusterIP: "10.0.0.1" } };
    expect(serviceInfo(svc).clusterIP).toBe("");
  });
});

describe("ServiceProxy against the API server (recording nft)", () => {
  let api: ApiServerHandle;
  let proxy: ServiceProxy;
  const scripts: string[] = [];
  const cleared: { flows: StaleFlows; afterScript: number }[] = [];
  let failNext = 1;
  const NS = "/api/v1/namespaces/default";
  const net = { table: "kvt-test01", bridge: "kvt-test01", clusterCidr: "10.77.0.0/16", serviceCidr: "10.141.0.0/16" };

  beforeAll(async () => {
    api = await startApiServer({ inMemory: true, serviceClusterIpRange: net.serviceCidr });
    const transport = new RestClient(kubeConfigFromFile(api.kubeconfigPath));
    const nft = (script: string): Promise<void> => {
      if (failNext > 0) {
        failNext--;
        return Promise.reject(new Error("nft -f - exited 1: Error: Could not process rule"));
      }
      scripts.push(script);
      return Promise.resolve();
    };
    const conntrack = (flows: StaleFlows): Promise<number> => {
      cleared.push({ flows, afterScript: scripts.length });
      return Promise.resolve(1);
    };
    proxy = new ServiceProxy({ transport, network: net, log: pino({ level: "silent" }), nft, conntrack });
    await proxy.start();
  });
  afterAll(async () => {
    await proxy.stop();
    await api.stop();
  });

  it("writes the table again after nft failed, then once per change", async () => {
    await eventually("the first table after the failure", async () => (scripts.length === 1 ? true : undefined), 5000);
    expect(scripts[0]).toContain("table ip kvt-test01 {");
    const pod = await call(api, "POST", `${NS}/pods`, {
      metadata: { name: "p", labels: { app: "p" } },
      spec: { containers: [{ name: "c", image: "x" }] },
    });
    const status = { phase: "Running", podIP: "10.77.1.4", conditions: [{ type: "Ready", status: "True" }] };
    expect((await call(api, "PUT", `${NS}/pods/p/status`, { ...pod.body, status })).code).toBe(200);
    const svc = await call(api, "POST", `${NS}/services`, {
      metadata: { name: "p" },
      spec: {
        selector: { app: "p" },
        ports: [
          { name: "web", port: 80, targetPort: 8080 },
          { name: "dns", port: 53, protocol: "UDP", targetPort: 5353 },
        ],
      },
    });
    const ip = (svc.body.spec as { clusterIP: string }).clusterIP;
    const routed = await eventually(
      "the Service routed",
      async () => scripts.find((s) => s.includes(`ip daddr ${ip} meta l4proto tcp th dport 80 goto`)),
      5000,
    );
    expect(routed).toContain("dnat to 10.77.1.4:8080");
    const count = scripts.length;
    // A change that does not touch the rules (a label) writes nothing.
    const cur = (await call(api, "GET", `${NS}/services/p`)).body as { metadata: Record<string, unknown> };
    await call(api, "PUT", `${NS}/services/p`, { ...cur, metadata: { ...cur.metadata, labels: { x: "y" } } });
    await new Promise((r) => setTimeout(r, 300));
    expect(scripts.length).toBe(count);
  });

  it("clears the UDP flows to an endpoint that left the Service, once the new table is in; not TCP's", async () => {
    const ready = (ip: string) => ({ phase: "Running", podIP: ip, conditions: [{ type: "Ready", status: "True" }] });
    const svc = (await call(api, "GET", `${NS}/services/p`)).body as { spec: { clusterIP: string } };
    const ip = svc.spec.clusterIP;
    // A second pod of the Service, as a migration's target launcher pod; then the first one ends (Succeeded).
    const q = await call(api, "POST", `${NS}/pods`, {
      metadata: { name: "q", labels: { app: "p" } },
      spec: { containers: [{ name: "c", image: "x" }] },
    });
    expect((await call(api, "PUT", `${NS}/pods/q/status`, { ...q.body, status: ready("10.77.2.9") })).code).toBe(200);
    await eventually("both pods routed", async () => scripts.find((s) => s.includes("dnat to 10.77.2.9:8080")), 5000);
    expect(cleared).toEqual([]);
    const p = (await call(api, "GET", `${NS}/pods/p`)).body;
    const done = { ...ready("10.77.1.4"), phase: "Succeeded" };
    expect((await call(api, "PUT", `${NS}/pods/p/status`, { ...p, status: done })).code).toBe(200);
    const flows = await eventually("the old endpoint's flows cleared", async () => cleared[0], 5000);
    // As kube-proxy: UDP only (a migrated VM's TCP flows are virt-handler's, --clear-migrated-flows).
    expect(flows.flows).toEqual({ protocol: "udp", clusterIP: ip, port: 53, endpoint: "10.77.1.4" });
    // Issued after the table without the old endpoint was written.
    expect(scripts[flows.afterScript - 1]).not.toContain("10.77.1.4");
    expect(scripts[flows.afterScript - 1]).toContain("dnat to 10.77.2.9:8080");
    await new Promise((r) => setTimeout(r, 300));
    expect(cleared).toHaveLength(1);
  });
});
