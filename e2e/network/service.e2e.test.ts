/**
 * `virtctl expose` Services route to the guest (when the cluster runs as root and has its pod network): the demo VM
 * (QEMU here) serves HTTP in the guest behind KubeVirt's masquerade binding; `virtctl expose vmi` makes a ClusterIP
 * Service; the local cluster allocates its ClusterIP from the service range, lists the launcher pod in the Service's
 * EndpointSlice and Endpoints, and its service proxy's nftables rules carry a request from the host and from a pod (the launcher
 * pod itself: through the Service back to its own guest) to the guest.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { kubectl, kubectlOk, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { consoleLog } from "../lib/console-log.ts";
import { httpGuestVm } from "../lib/http-vm.ts";
import { vmiOrUndefined } from "../lib/objects.ts";

const exec = promisify(execFile);
const NAME = "e2e-service";
const SERVICE = `${NAME}-http`;
const root = process.getuid?.() === 0;
const BOOT = { ...CLUSTER_WAIT, timeoutMs: 240_000, intervalMs: 1000 };

/** The cluster's network plan (written beside the kubeconfig). */
function plan(kubeconfig: string): { netnsPrefix: string; serviceCidr?: string; clusterCidr: string } {
  return JSON.parse(readFileSync(join(dirname(kubeconfig), "network", "pod-network.json"), "utf8")) as {
    netnsPrefix: string;
    serviceCidr?: string;
    clusterCidr: string;
  };
}

/** An HTTP GET from a process inside the network namespace `netns` (a pod's). */
async function getFromPod(netns: string, url: string): Promise<string> {
  const script = `fetch(${JSON.stringify(url)},{signal:AbortSignal.timeout(5000)}).then((r)=>r.text()).then((t)=>process.stdout.write(t))`;
  const { stdout } = await exec("ip", ["netns", "exec", netns, process.execPath, "-e", script], { timeout: 15_000 });
  return stdout;
}

interface Slice {
  endpoints: { addresses: string[]; conditions: { ready: boolean }; targetRef?: { name: string } }[];
  ports: { port: number; protocol: string }[];
}

describe.runIf(root)("Services (ClusterIP allocation, EndpointSlices, nftables service proxy)", () => {
  const kubeconfig = inject("kubeconfig");
  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "svc", SERVICE, "--ignore-not-found", "--wait=false"]);
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
  });

  it("routes `virtctl expose vmi` through its ClusterIP to the guest, from the host and from a pod", async () => {
    const { netnsPrefix, serviceCidr } = plan(kubeconfig);
    expect(serviceCidr).toMatch(/^10\.\d+\.0\.0\/16$/);
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(httpGuestVm(NAME)));
    const vmi = await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.status?.phase).toBe("Running");
      return v!;
    }, BOOT);
    const exposed = await virtctl(kubeconfig, [
      "expose",
      "vmi",
      NAME,
      "--name",
      SERVICE,
      "--port",
      "80",
      "--target-port",
      "8080",
    ]);
    expect(exposed.code, exposed.stderr).toBe(0);
    const svc = JSON.parse(await kubectlOk(kubeconfig, ["get", "svc", SERVICE, "-o", "json"])) as {
      spec: { clusterIP: string; clusterIPs: string[] };
    };
    const clusterIP = svc.spec.clusterIP;
    expect(svc.spec.clusterIPs).toEqual([clusterIP]);
    const prefix = (serviceCidr ?? "").split(".").slice(0, 2).join(".");
    expect(clusterIP.startsWith(`${prefix}.`)).toBe(true);

    const pod = JSON.parse(
      await kubectlOk(kubeconfig, ["get", "pods", "-l", `kubevirt.io/created-by=${vmi.metadata.uid}`, "-o", "json"]),
    ) as { items: { metadata: { name: string; uid: string }; status?: { podIP?: string } }[] };
    const launcher = pod.items[0];
    // The EndpointSlice controller lists the launcher pod once it is ready.
    await eventually(async () => {
      const list = JSON.parse(
        await kubectlOk(kubeconfig, [
          "get",
          "endpointslices",
          "-l",
          `kubernetes.io/service-name=${SERVICE}`,
          "-o",
          "json",
        ]),
      ) as { items: Slice[] };
      expect(list.items).toHaveLength(1);
      expect(list.items[0]).toMatchObject({
        ports: [{ port: 8080, protocol: "TCP" }],
        endpoints: [
          {
            addresses: [launcher.status?.podIP],
            conditions: { ready: true },
            targetRef: { name: launcher.metadata.name },
          },
        ],
      });
      // kubectl describe shows the same endpoint (the Endpoints controller's object).
      const described = await kubectlOk(kubeconfig, ["describe", "svc", SERVICE]);
      expect(described).toMatch(
        new RegExp(`^Endpoints:\\s+${launcher.status?.podIP?.replaceAll(".", "\\.")}:8080$`, "m"),
      );
      return true;
    }, CLUSTER_WAIT);

    await eventually(async () => {
      expect(await consoleLog(kubeconfig, vmi.metadata.uid)).toContain("kvt-http-up");
      return true;
    }, BOOT);
    const hello = `hello from ${NAME}\n`;
    // From the host: ClusterIP:80 -> DNAT to podIP:8080 -> the launcher's masquerade NAT -> the guest's httpd.
    await eventually(
      async () => {
        const res = await fetch(`http://${clusterIP}/`, { signal: AbortSignal.timeout(5000) });
        expect(await res.text()).toBe(hello);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 60_000, intervalMs: 1000 },
    );
    // From a pod: the launcher pod itself, through the Service and back to its own guest (hairpin).
    expect(await getFromPod(`${netnsPrefix}${launcher.metadata.uid}`, `http://${clusterIP}/`)).toBe(hello);
  });
});
