import { describe, expect, it } from "vitest";
import { podsLinkPath } from "../kubelet/pods-link.ts";
import { componentTlsFiles } from "./component-volumes.ts";
import { type ClusterLayout, clusterComponents, nodeNames, prometheusScrapeConfig } from "./components.ts";

const layout: ClusterLayout = {
  projectRoot: "/repo",
  dataDir: "/data",
  kubeconfig: "/data/kubeconfig",
  execPath: "/node",
  execArgs: [],
  apiPort: 6443,
  nodeNames: nodeNames(2),
  metricsPorts: { "virt-api": 9001, "virt-controller": 9002, "virt-handler/node01": 9003, "virt-handler/node02": 9004 },
  virtApiPort: 8443,
  handlerPorts: { node01: 8186, node02: 8187 },
  componentTls: componentTlsFiles("/data"),
  tracesFile: "/tmp/traces.jsonl",
};

describe("clusterComponents()", () => {
  it("starts the API server first and one kubelet and one virt-handler per node", () => {
    const names = clusterComponents(layout).map((c) => c.name);
    expect(names).toEqual([
      "apiserver",
      "scheduler",
      "kubelet/node01",
      "kubelet/node02",
      "virt-controller",
      "virt-api",
      "virt-handler/node01",
      "virt-handler/node02",
    ]);
  });

  it("runs the service proxy after the kubelets, and gives the API server the service range, with a pod network", () => {
    const withNet = { ...layout, podNetworkFile: "/data/network/pod-network.json", serviceCidr: "10.150.0.0/16" };
    const components = clusterComponents(withNet);
    expect(components.map((c) => c.name).slice(2, 5)).toEqual(["kubelet/node01", "kubelet/node02", "service-proxy"]);
    expect(components.find((c) => c.name === "service-proxy")?.argv.slice(-4)).toEqual([
      "--kubeconfig",
      "/data/kubeconfig-kube-proxy",
      "--pod-network",
      "/data/network/pod-network.json",
    ]);
    expect(components[0].argv.slice(-2)).toEqual(["--service-cluster-ip-range", "10.150.0.0/16"]);
  });

  it("has each handler delete the flows a migration left, with a pod network only (the proxy deletes UDP ones)", () => {
    const withNet = { ...layout, podNetworkFile: "/data/network/pod-network.json", serviceCidr: "10.150.0.0/16" };
    for (const node of ["node01", "node02"]) {
      const handler = clusterComponents(withNet).find((c) => c.name === `virt-handler/${node}`)!;
      expect(handler.argv.slice(-3)).toEqual(["--clear-migrated-flows", "--node-netns", "/proc/self/ns/net"]);
      const without = clusterComponents(layout).find((c) => c.name === `virt-handler/${node}`)!;
      expect(without.argv).not.toContain("--clear-migrated-flows");
    }
  });

  it("runs the API server with its Node flags (a larger young generation)", () => {
    const apiserver = clusterComponents(layout).find((c) => c.name === "apiserver")!;
    expect(apiserver.argv.slice(0, 4)).toEqual([
      "/node",
      "--max-semi-space-size=32",
      "--v8-pool-size=1",
      "/repo/tools/local-cluster/src/apiserver/main.ts",
    ]);
  });

  it("maps the API server's Node flags for Deno (run -A, V8 flags in --v8-flags)", () => {
    const deno = { ...layout, execPath: "/repo/node_modules/.bin/deno", execArgs: ["run", "-A"] };
    const apiserver = clusterComponents(deno).find((c) => c.name === "apiserver")!;
    expect(apiserver.argv.slice(0, 5)).toEqual([
      "/repo/node_modules/.bin/deno",
      "run",
      "-A",
      "--v8-flags=--max-semi-space-size=32",
      "/repo/tools/local-cluster/src/apiserver/main.ts",
    ]);
  });

  it("passes the node name, kubeconfig (its service account's) and traces file to each handler", () => {
    const handler = clusterComponents(layout).find((c) => c.name === "virt-handler/node02")!;
    expect(handler.argv).toEqual([
      "/node",
      "--max-semi-space-size=1",
      "--v8-pool-size=1",
      "--optimize-for-size",
      "/repo/apps/virt-handler/src/main.ts",
      "--node-name",
      "node02",
      "--kubeconfig",
      "/data/kubeconfig-kubevirt-handler",
      "--kubelet-pods-dir",
      podsLinkPath("/data/nodes/node02"),
      "--device-plugins-dir",
      "/data/nodes/node02/device-plugins",
      "--port",
      "8187",
      "--metrics-port",
      "9004",
      "--host",
      "127.0.0.1",
      "--tls-cert",
      "/data/volumes/secret/kubevirt-virt-handler-server-certs/tls.crt",
      "--tls-key",
      "/data/volumes/secret/kubevirt-virt-handler-server-certs/tls.key",
    ]);
    expect(handler.env.KUBEVIRT_TRACES_FILE).toBe("/tmp/traces.jsonl");
    expect(handler.env.MALLOC_ARENA_MAX).toBe("1");
  });

  it("gives Deno the small-process V8 flags in --v8-flags and drops Node's own", () => {
    const deno = clusterComponents({ ...layout, execPath: "/deno", execArgs: ["run", "-A"] });
    expect(deno.find((c) => c.name === "scheduler")!.argv.slice(0, 4)).toEqual([
      "/deno",
      "run",
      "-A",
      "--v8-flags=--max-semi-space-size=1,--optimize-for-size",
    ]);
  });

  it("points each node's kubelet and virt-handler at one device plugins directory", () => {
    const all = clusterComponents(layout);
    const dirOf = (name: string): string | undefined => {
      const argv = all.find((c) => c.name === name)!.argv;
      return argv[argv.indexOf("--device-plugins-dir") + 1];
    };
    expect(dirOf("kubelet/node01")).toBe("/data/nodes/node01/device-plugins");
    expect(dirOf("virt-handler/node01")).toBe("/data/nodes/node01/device-plugins");
    expect(dirOf("virt-handler/node02")).toBe("/data/nodes/node02/device-plugins");
  });

  it("runs virt-controller as KubeVirt's kubevirt-controller service account", () => {
    const controller = clusterComponents(layout).find((c) => c.name === "virt-controller")!;
    expect(controller.argv).toContain("/data/kubeconfig-kubevirt-controller");
  });

  it("runs no component with the admin kubeconfig: each has its own identity's", () => {
    const all = clusterComponents(layout);
    const kubeconfigOf = (name: string): string | undefined => {
      const argv = all.find((c) => c.name === name)!.argv;
      return argv[argv.indexOf("--kubeconfig") + 1];
    };
    expect(kubeconfigOf("scheduler")).toBe("/data/kubeconfig-scheduler");
    expect(kubeconfigOf("kubelet/node01")).toBe("/data/kubeconfig-node-node01");
    expect(kubeconfigOf("kubelet/node02")).toBe("/data/kubeconfig-node-node02");
    expect(kubeconfigOf("virt-api")).toBe("/data/kubeconfig-kubevirt-apiserver");
    for (const c of all) expect(c.env.KUBECONFIG, c.name).toBeUndefined();
    const apiserver = all.find((c) => c.name === "apiserver")!.argv;
    expect(apiserver[apiserver.indexOf("--token-auth-file") + 1]).toBe("/data/apiserver/token-auth.csv");
  });

  it("tells virt-api where each node's handler listens", () => {
    const api = clusterComponents(layout).find((c) => c.name === "virt-api")!;
    expect(api.argv.slice(-2)).toEqual([
      "--handler-url",
      "node01=https://127.0.0.1:8186,node02=https://127.0.0.1:8187",
    ]);
  });
});

describe("prometheusScrapeConfig()", () => {
  it("has one job per component kind with every instance as a target", () => {
    const yaml = prometheusScrapeConfig(clusterComponents(layout));
    expect(yaml).toContain('  - job_name: virt-handler\n    static_configs:\n      - targets: ["127.0.0.1:9003"]');
    expect(yaml).toContain('targets: ["127.0.0.1:9004"]');
    expect(yaml).toContain("  - job_name: virt-controller");
    expect(yaml).not.toContain("job_name: scheduler");
  });
});
