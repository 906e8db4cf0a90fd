/**
 * KubeVirt's masquerade binding end to end (when the cluster runs as root and has its pod network): the demo VM
 * (QEMU here) gets 10.0.2.2/24 from the launcher's DHCP server, serves HTTP in the guest, and the host reaches it
 * through the launcher pod's IP (nftables DNAT in the pod). After `virtctl migrate` the guest keeps its address and
 * the service answers through the target pod's IP.
 */
import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { inConsole, kubectl, kubectlOk, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { consoleLog } from "../lib/console-log.ts";
import { httpGuestVm } from "../lib/http-vm.ts";
import { vmiOrUndefined } from "../lib/objects.ts";

const NAME = "e2e-masquerade";
const root = process.getuid?.() === 0;
const BOOT = { ...CLUSTER_WAIT, timeoutMs: 240_000, intervalMs: 1000 };

interface PodNet {
  metadata: { name: string; uid: string; creationTimestamp: string };
  spec: { nodeName: string };
  status?: { phase?: string; podIP?: string };
}

async function get(ip: string): Promise<string> {
  const res = await fetch(`http://${ip}:8080/`, { signal: AbortSignal.timeout(5000) });
  return res.text();
}

describe.runIf(root)("masquerade binding (DHCP in the launcher, nftables NAT to the pod IP)", () => {
  const kubeconfig = inject("kubeconfig");
  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
  });

  it("the guest gets 10.0.2.2 by DHCP, serves through the pod IP, and keeps both across a migration", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(httpGuestVm(NAME)));
    const vmi = await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.status?.phase).toBe("Running");
      return v!;
    }, BOOT);
    const pods = async (): Promise<PodNet[]> => {
      const args = ["get", "pods", "-l", `kubevirt.io/created-by=${vmi.metadata.uid}`, "-o", "json"];
      const list = JSON.parse(await kubectlOk(kubeconfig, args)) as { items: PodNet[] };
      return list.items.sort((a, b) => a.metadata.creationTimestamp.localeCompare(b.metadata.creationTimestamp));
    };
    await eventually(async () => {
      const log = await consoleLog(kubeconfig, vmi.metadata.uid);
      expect(log).toMatch(/kvt-dhcp: bound 10\.0\.2\.2\/24 router 10\.0\.2\.1/);
      expect(log).toContain("kvt-http-up");
      return true;
    }, BOOT);
    const [source] = await pods();
    // The guest's server is up; the first answer through the pod IP may still take a few seconds on a loaded TCG
    // host, so one slow answer is retried rather than failing the test (a wrong answer still fails it).
    const SERVE = { ...CLUSTER_WAIT, timeoutMs: 60_000, intervalMs: 1000 };
    await eventually(async () => {
      expect(await get(source.status!.podIP!)).toBe(`hello from ${NAME}\n`);
      return true;
    }, SERVE);
    // status.interfaces as KubeVirt fills it for a masquerade interface without a guest agent.
    const iface = async (): Promise<Record<string, unknown> | undefined> =>
      ((await vmiOrUndefined(kubeconfig, NAME))?.status as { interfaces?: Record<string, unknown>[] } | undefined)
        ?.interfaces?.[0];
    const reported = await eventually(async () => {
      const i = await iface();
      expect(i).toMatchObject({ name: "default", ipAddress: source.status!.podIP, infoSource: "domain" });
      return i!;
    }, CLUSTER_WAIT);
    expect(reported.mac).toMatch(/^02(:[0-9a-f]{2}){5}$/);

    const migrate = await virtctl(kubeconfig, ["migrate", NAME]);
    expect(migrate.code, migrate.stderr).toBe(0);
    const target = await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.status?.migrationState?.completed).toBe(true);
      expect(v?.status?.migrationState?.failed).toBeFalsy();
      const t = (await pods()).find((p) => p.metadata.uid !== source.metadata.uid && p.status?.phase === "Running");
      expect(t?.status?.podIP).toBeDefined();
      return t!;
    }, BOOT);
    expect(target.status!.podIP).not.toBe(source.status!.podIP);
    await eventually(async () => {
      expect(await get(target.status!.podIP!)).toBe(`hello from ${NAME}\n`);
      return true;
    }, SERVE);
    await eventually(async () => {
      expect(await iface()).toMatchObject({ ipAddress: target.status!.podIP, mac: reported.mac });
      return true;
    }, CLUSTER_WAIT);
    // The guest did not ask again: the address it had is the one it still has.
    const session = await inConsole(kubeconfig, NAME, "ip -4 -o addr show eth0", 15_000);
    expect(session.stdout).toMatch(/eth0\s+inet 10\.0\.2\.2\/24/);
  });
});
