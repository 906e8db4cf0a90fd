/**
 * KubeVirt's bridge binding end to end (when the cluster runs as root and has its pod network): the demo VM (QEMU
 * here) with `bridge: {}` on the pod network takes the launcher pod's own IP by DHCP; the host reaches the guest's
 * HTTP server at that IP; status.interfaces reports it; the VMI is LiveMigratable=False (InterfaceNotLiveMigratable)
 * and `virtctl migrate` is refused with KubeVirt's message. With the KubeVirt CR's permitBridgeInterfaceOnPodNetwork
 * false, admission refuses such a VM. On the local cluster, whose pods are namespaces of this host, it also checks
 * the pod's links (KubeVirt's layout) and that the pod's namespace and its veth go once the VM stops.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { KUBEVIRT_CR } from "@kvt/api";
import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { kubectl, kubectlOk, virtctl } from "../lib/cli.ts";
import { clusterKindFromEnv } from "../lib/cluster-kind.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { consoleLog } from "../lib/console-log.ts";
import { httpGuestVm } from "../lib/http-vm.ts";
import { launcherPods, vmiOrUndefined } from "../lib/objects.ts";

const NAME = "e2e-bridge";
const root = process.getuid?.() === 0;
/** The local cluster: its pods' namespaces, links and plan are on this host. */
const local = clusterKindFromEnv() === "local";
const BOOT = { ...CLUSTER_WAIT, timeoutMs: 240_000, intervalMs: 1000 };
const CR = ["-n", KUBEVIRT_CR.namespace, "kubevirt", KUBEVIRT_CR.name];
const NOT_MIGRATABLE =
  "cannot migrate VMI which does not use masquerade or a migratable plugin to connect to the pod network";

interface IfaceStatus {
  name?: string;
  mac?: string;
  ipAddress?: string;
  ipAddresses?: string[];
  infoSource?: string;
  podInterfaceName?: string;
}

interface Link {
  ifindex: number;
  ifname: string;
  address?: string;
  master?: string;
  link_index?: number;
}

function links(netns?: string): Link[] {
  const args = [...(netns ? ["-n", netns] : []), "-j", "link", "show"];
  return JSON.parse(execFileSync("ip", args, { encoding: "utf8" })) as Link[];
}

async function get(ip: string, path = "/"): Promise<string> {
  const res = await fetch(`http://${ip}:8080${path}`, { signal: AbortSignal.timeout(5000) });
  return res.text();
}

const setPermit = (kubeconfig: string, permit: boolean | null): Promise<string> =>
  kubectlOk(kubeconfig, [
    "patch",
    ...CR,
    "--type=merge",
    "-p",
    JSON.stringify({ spec: { configuration: { network: { permitBridgeInterfaceOnPodNetwork: permit } } } }),
  ]);

/** The local cluster's pod network plan (tools/local-cluster writes it beside the kubeconfig). */
function localPlan(kubeconfig: string): { bridge: string; netnsPrefix: string } {
  return JSON.parse(readFileSync(join(dirname(kubeconfig), "network", "pod-network.json"), "utf8")) as {
    bridge: string;
    netnsPrefix: string;
  };
}

/** Checks the bridged pod's links in namespace `netns` (local cluster); returns the host's end of its veth. */
function podLayout(kubeconfig: string, netns: string): Link | undefined {
  const inPod = links(netns);
  const byName = (name: string): Link | undefined => inPod.find((l) => l.ifname === name);
  expect(byName("tap0")?.master).toBe("k6t-eth0");
  expect(byName("eth0-nic")?.master).toBe("k6t-eth0");
  const hostVeth = links().find((l) => l.ifindex === byName("eth0-nic")?.link_index);
  expect(hostVeth?.master).toBe(localPlan(kubeconfig).bridge);
  return hostVeth;
}

describe.runIf(root)("bridge binding (the guest takes the pod IP by DHCP; no live migration)", () => {
  const kubeconfig = inject("kubeconfig");
  afterAll(async () => {
    await setPermit(kubeconfig, null).catch(() => undefined);
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
  });

  it("admission refuses a bridge on the pod network while the KubeVirt CR forbids it", async () => {
    await setPermit(kubeconfig, false);
    try {
      const refused = await kubectl(
        kubeconfig,
        ["create", "--dry-run=server", "-f", "-"],
        JSON.stringify(httpGuestVm(NAME, "bridge")),
      );
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain(
        "The request is invalid: spec.template.spec.domain.devices.interfaces[0].name: Bridge on pod network configuration is not enabled under kubevirt-config",
      );
    } finally {
      await setPermit(kubeconfig, null);
    }
  });

  it("the guest holds the pod IP, serves at it, and is refused migration; the pod network goes with the VM", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(httpGuestVm(NAME, "bridge")));
    const vmi = await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.status?.phase).toBe("Running");
      return v!;
    }, BOOT);
    const pod = (await launcherPods(kubeconfig, vmi.metadata.uid)).at(-1)!;
    const podIp = (
      await kubectlOk(kubeconfig, ["get", "pod", pod.metadata.name, "-o", "jsonpath={.status.podIP}"])
    ).trim();
    expect(podIp).toMatch(/^\d+\.\d+\.\d+\.\d+$/);

    // Inside the pod (the local cluster's pods are namespaces of this host): KubeVirt's layout; the host's end of
    // the pod's veth is on the cluster's bridge.
    const netns = local ? `${localPlan(kubeconfig).netnsPrefix}${pod.metadata.uid}` : undefined;
    const hostVeth = netns ? podLayout(kubeconfig, netns) : undefined;

    // The guest's own view: the lease it took and its eth0 (printed by the guest, served by its HTTP server).
    await eventually(async () => {
      const log = await consoleLog(kubeconfig, vmi.metadata.uid);
      expect(log).toContain(`kvt-dhcp: bound ${podIp}/`);
      expect(log).toContain("kvt-http-up");
      return true;
    }, BOOT);
    expect(await get(podIp)).toBe(`hello from ${NAME}\n`);
    const guestView = await get(podIp, "/addr.txt");
    expect(guestView).toMatch(new RegExp(`inet ${podIp.replaceAll(".", "\\.")}/\\d+`));

    // status.interfaces as KubeVirt fills a bridge interface without a guest agent: the pod IP, the guest's MAC.
    const reported = await eventually(async () => {
      const v = (await vmiOrUndefined(kubeconfig, NAME)) as { status?: { interfaces?: IfaceStatus[] } } | undefined;
      const i = v?.status?.interfaces?.[0];
      expect(i).toMatchObject({
        name: "default",
        ipAddress: podIp,
        ipAddresses: [podIp],
        infoSource: "domain",
        podInterfaceName: "eth0",
      });
      return i!;
    }, CLUSTER_WAIT);
    expect(guestView).toContain(`link/ether ${reported.mac}`);

    // No live migration: KubeVirt's condition, and virtctl's refusal with the admission's message.
    await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.status?.conditions?.find((c) => c.type === "LiveMigratable")).toMatchObject({
        status: "False",
        reason: "InterfaceNotLiveMigratable",
        message: NOT_MIGRATABLE,
      });
      return true;
    }, CLUSTER_WAIT);
    const migrate = await virtctl(kubeconfig, ["migrate", NAME]);
    expect(migrate.code).not.toBe(0);
    expect(migrate.stderr).toContain(
      `Cannot migrate VMI, Reason: InterfaceNotLiveMigratable, Message: ${NOT_MIGRATABLE}`,
    );

    // Stopped, the VM leaves no namespace and no veth behind.
    const stop = await virtctl(kubeconfig, ["stop", NAME]);
    expect(stop.code, stop.stderr).toBe(0);
    await eventually(async () => {
      expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
      if (netns) {
        expect(execFileSync("ip", ["netns", "list"], { encoding: "utf8" })).not.toContain(netns);
        expect(links().some((l) => l.ifindex === hostVeth?.ifindex && l.ifname === hostVeth.ifname)).toBe(false);
      }
      return true;
    }, CLUSTER_WAIT);
  });
});
