import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualMachineInstance } from "@kvt/api";
import { createLogger } from "@kvt/observability";
import type { Netns, PlumbedPodNetwork, PlumbOptions, PodNetworkPlan } from "@kvt/pod-network";
import { afterEach, describe, expect, it } from "vitest";
import { PodNetworkWiring, podUidOfSocket } from "./pod-network-wiring.ts";

const UID = "3f0e9a52-7c1d-4b8e-9f2a-5d6c7b8a9e01";
const SOCKET = `/pods/${UID}/volumes/kubernetes.io~empty-dir/sockets/launcher-sock`;
const log = createLogger({ component: "t", level: "silent" });
const USER_107 = "Name:\tnode\nUid:\t107\t107\t107\t107\nCapEff:\t0000000000000000\n";
const ROOT = "Name:\tnode\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n";

const vmi = (iface: Record<string, unknown> | undefined): VirtualMachineInstance => ({
  metadata: { name: "vm1", namespace: "default", uid: "u-1" },
  spec: {
    domain: { devices: { interfaces: iface ? [{ name: "default", ...iface }] : [] } },
    networks: iface ? [{ name: "default", pod: {} }] : [],
  },
});

describe("PodNetworkWiring", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  /** A /proc with launcher pid 42 (status `status`, its private dir; `found`: the lookup finds it), a recording plumb. */
  function setup(status: string, found = true, hostTun = "/nonexistent/tun") {
    const procRoot = mkdtempSync(join(tmpdir(), "kvt-wiring-"));
    dirs.push(procRoot);
    mkdirSync(join(procRoot, "42", "root", "var/run/kubevirt-private"), { recursive: true });
    writeFileSync(join(procRoot, "42", "status"), status);
    const calls: { plan: PodNetworkPlan; ns: string; options?: PlumbOptions }[] = [];
    const queries: unknown[] = [];
    const wiring = new PodNetworkWiring({
      procRoot,
      hostTun,
      findPid: (q) => {
        queries.push(q);
        return Promise.resolve(found ? 42 : undefined);
      },
      netns: (nsPath): Netns => ({
        description: nsPath,
        exec: () => Promise.reject(new Error("not in a test")),
        setSysctl: () => Promise.reject(new Error("not in a test")),
      }),
      plumb: (plan, ns, _log, options): Promise<PlumbedPodNetwork> => {
        calls.push({ plan, ns: ns.description, ...(options ? { options } : {}) });
        return Promise.resolve({ tap: "tap0", mac: "02:00:00:00:00:01" });
      },
    });
    const handover = join(procRoot, "42", "root", "var/run/kubevirt-private/pod-network.json");
    return { wiring, calls, queries, handover, procRoot };
  }

  it("plumbs an unprivileged launcher's pod in its namespace and hands the result over, once", async () => {
    const { wiring, calls, queries, handover, procRoot } = setup(USER_107);
    await wiring.ensure(vmi({ masquerade: {} }), { socketPath: SOCKET, podUid: UID }, log);
    expect(queries).toEqual([
      {
        podUid: UID,
        socketOnNode: SOCKET,
        socketInPod: "/var/run/kubevirt/sockets/launcher-sock",
        procRoot,
      },
    ]);
    expect(calls).toEqual([
      {
        plan: expect.objectContaining({ name: "default", guestIp: "10.0.2.2" }),
        ns: join(procRoot, "42", "ns", "net"),
        options: { tapOwner: 107, unprivilegedPortStart: 0 },
      },
    ]);
    expect(JSON.parse(readFileSync(handover, "utf8"))).toEqual({ tap: "tap0", mac: "02:00:00:00:00:01" });
    await wiring.ensure(vmi({ masquerade: {} }), { socketPath: SOCKET, podUid: UID }, log);
    expect(calls).toHaveLength(1); // a second sync of the same launcher plumbs nothing
  });

  it("leaves a launcher holding CAP_NET_ADMIN (the process-kubelet's root) to plumb itself", async () => {
    const { wiring, calls, handover } = setup(ROOT);
    await wiring.ensure(vmi({ bridge: {} }), { socketPath: SOCKET, podUid: UID }, log);
    expect(calls).toEqual([]);
    expect(existsSync(handover)).toBe(false);
  });

  it("does not plumb a pod again whose handover exists (a restarted handler: a bridged pod cannot be)", async () => {
    const { wiring, calls, handover } = setup(USER_107);
    writeFileSync(handover, "{}");
    await wiring.ensure(vmi({ bridge: {} }), { socketPath: SOCKET }, log);
    expect(calls).toEqual([]);
  });

  it("does nothing for a VMI without a pod-network binding", async () => {
    const { wiring, calls, queries } = setup(USER_107);
    await wiring.ensure(vmi(undefined), { socketPath: SOCKET, podUid: UID }, log);
    expect([calls, queries]).toEqual([[], []]);
  });

  it("fails, to be retried, when the launcher's process is not found", async () => {
    const { wiring } = setup(USER_107, false);
    await expect(wiring.ensure(vmi({ masquerade: {} }), { socketPath: SOCKET, podUid: UID }, log)).rejects.toThrow(
      `no process of launcher pod ${UID}`,
    );
  });

  it("fails when neither the launcher nor its socket path names the pod", async () => {
    const { wiring } = setup(USER_107);
    await expect(
      wiring.ensure(vmi({ masquerade: {} }), { socketPath: "/run/kvt/launcher-x.sock" }, log),
    ).rejects.toThrow("cannot tell the pod of the launcher at /run/kvt/launcher-x.sock");
  });
});

describe.runIf(process.getuid?.() === 0)("PodNetworkWiring and the pod's tun device (root: mknod)", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  /** A /proc with launcher pid 42 of user 107 whose root has a tun device node 0600 root. */
  function podWithTun(): { procRoot: string; tun: string } {
    const procRoot = mkdtempSync(join(tmpdir(), "kvt-tun-"));
    dirs.push(procRoot);
    mkdirSync(join(procRoot, "42", "root", "dev/net"), { recursive: true });
    mkdirSync(join(procRoot, "42", "root", "var/run/kubevirt-private"), { recursive: true });
    writeFileSync(join(procRoot, "42", "status"), USER_107);
    const tun = join(procRoot, "42", "root", "dev/net/tun");
    execFileSync("mknod", ["-m", "0600", tun, "c", "10", "200"]);
    return { procRoot, tun };
  }

  function wiringFor(procRoot: string, hostTun: string): PodNetworkWiring {
    return new PodNetworkWiring({
      procRoot,
      hostTun,
      findPid: () => Promise.resolve(42),
      plumb: () => Promise.resolve({ tap: "tap0", mac: "02:00:00:00:00:01" }),
    });
  }

  it("gives the pod's own tun node to the launcher's user", async () => {
    const { procRoot, tun } = podWithTun();
    await wiringFor(procRoot, "/nonexistent/tun").ensure(vmi({ masquerade: {} }), { socketPath: SOCKET }, log);
    expect([statSync(tun).uid, statSync(tun).gid]).toEqual([107, 107]);
  });

  it("leaves the node alone when it is the host's own (a bind mount)", async () => {
    const { procRoot, tun } = podWithTun();
    await wiringFor(procRoot, tun).ensure(vmi({ masquerade: {} }), { socketPath: SOCKET }, log);
    expect(statSync(tun).uid).toBe(0);
  });
});

it("podUidOfSocket() reads the pod uid from the kubelet's pods directory", () => {
  expect(podUidOfSocket(SOCKET)).toBe(UID);
  expect(podUidOfSocket("/run/kvt/launcher-x.sock")).toBeUndefined();
});
