/**
 * The pod network as a KubeVirt user meets it: a launcher pod gets its own address of its node's range (the local
 * cluster's plan, network/pod-network.json; a real node's spec.podCIDR) in status.podIP/podIPs, a live migration
 * between two such pods on two nodes works (the target listens on its pod IP), and the addresses differ. On the
 * local cluster (when it runs as root, which creates the network) it also checks what only this host shows: each
 * pod has its own network namespace with the launcher in it, and the namespaces go with the pods. On tools/kube's
 * real nodes the CNI plugins and containerd own those namespaces, inside the nodes' own mount namespaces.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { kubectl, kubectlOk, virtctl } from "../lib/cli.ts";
import { clusterKindFromEnv } from "../lib/cluster-kind.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { vmiOrUndefined } from "../lib/objects.ts";

const NAME = "e2e-pod-network";
const root = process.getuid?.() === 0;
/** The local cluster: its plan and pod namespaces are on this host. */
const local = clusterKindFromEnv() === "local";

interface PodNet {
  metadata: { name: string; uid: string; creationTimestamp: string };
  spec: { nodeName: string };
  status?: { phase?: string; podIP?: string; podIPs?: { ip: string }[] };
}

/** The cluster's plan (tools/local-cluster network/cluster-network.ts writes it beside the kubeconfig). */
function plan(kubeconfig: string): { netnsPrefix: string; nodeCidrs: Record<string, string> } {
  return JSON.parse(readFileSync(join(dirname(kubeconfig), "network", "pod-network.json"), "utf8")) as {
    netnsPrefix: string;
    nodeCidrs: Record<string, string>;
  };
}

/** Each node's spec.podCIDR (a real cluster's controller-manager allocates them; both are /24 here). */
async function nodePodCidrs(kubeconfig: string): Promise<Record<string, string>> {
  const list = JSON.parse(await kubectlOk(kubeconfig, ["get", "nodes", "-o", "json"])) as {
    items: { metadata: { name: string }; spec: { podCIDR?: string } }[];
  };
  return Object.fromEntries(list.items.map((n) => [n.metadata.name, n.spec.podCIDR ?? ""]));
}

function namespaces(): string[] {
  // stderr piped: "ip netns list" complains about a namespace deleted while it lists.
  return execFileSync("ip", ["netns", "list"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
    .split("\n")
    .map((l) => l.split(" ")[0]);
}

describe.runIf(root)("pod network (CNI bridge + host-local, one namespace per pod)", () => {
  const kubeconfig = inject("kubeconfig");
  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
  });

  it("gives launcher pods their own addresses, migrates between them, and removes their namespaces", async () => {
    const { netnsPrefix, nodeCidrs } = local
      ? plan(kubeconfig)
      : { netnsPrefix: "", nodeCidrs: await nodePodCidrs(kubeconfig) };
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(testGuestVm(NAME, { running: true })));
    const vmi = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.status?.phase).toBe("Running");
        expect(v?.status?.conditions?.find((c) => c.type === "LiveMigratable")?.status).toBe("True");
        return v!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 150_000, intervalMs: 500, what: "a running VMI" },
    );
    const pods = async (): Promise<PodNet[]> => {
      const args = ["get", "pods", "-l", `kubevirt.io/created-by=${vmi.metadata.uid}`, "-o", "json"];
      const list = JSON.parse(await kubectlOk(kubeconfig, args)) as { items: PodNet[] };
      return list.items.sort((a, b) => a.metadata.creationTimestamp.localeCompare(b.metadata.creationTimestamp));
    };
    const inRange = (ip: string | undefined, node: string): boolean =>
      ip?.startsWith(`${nodeCidrs[node].split(".").slice(0, 3).join(".")}.`) ?? false;

    const [source] = await pods();
    expect(inRange(source.status?.podIP, source.spec.nodeName)).toBe(true);
    expect(source.status?.podIPs).toEqual([{ ip: source.status?.podIP }]);
    const sourceNs = `${netnsPrefix}${source.metadata.uid}`;
    if (local) {
      expect(namespaces()).toContain(sourceNs);
      // The launcher (and everything it started) runs inside the pod's namespace.
      expect(execFileSync("ip", ["netns", "pids", sourceNs], { encoding: "utf8" }).trim()).not.toBe("");
    }

    // A live migration: the target launcher listens on its own pod IP; the source reaches it over the bridge.
    const migrate = await virtctl(kubeconfig, ["migrate", NAME]);
    expect(migrate.code, migrate.stderr).toBe(0);
    const target = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.status?.migrationState?.completed).toBe(true);
        expect(v?.status?.migrationState?.failed).toBeFalsy();
        const t = (await pods()).find((p) => p.metadata.uid !== source.metadata.uid);
        expect(t?.status?.phase).toBe("Running");
        return t!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 150_000, intervalMs: 500, what: "the migration to complete" },
    );
    expect(target.spec.nodeName).not.toBe(source.spec.nodeName);
    expect(inRange(target.status?.podIP, target.spec.nodeName)).toBe(true);
    expect(target.status?.podIP).not.toBe(source.status?.podIP);

    await kubectlOk(kubeconfig, ["delete", "vm", NAME, "--wait=false"]);
    if (!local) return;
    await eventually(
      async () => {
        const left = namespaces().filter((n) => n === sourceNs || n === `${netnsPrefix}${target.metadata.uid}`);
        expect(left).toEqual([]);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 90_000, intervalMs: 500, what: "the pods' namespaces to go" },
    );
  });
});
