/**
 * The handler's path in real namespaces (root): a namespace standing in for a launcher pod, plumbed from outside it
 * (enteredNetns: nsenter --net, as virt-handler enters /proc/<launcher pid>/ns/net) with the tap owned by KubeVirt's
 * launcher user 107; the handover written; then a process of user 107 without any capability, inside the
 * namespace, adopts it and serves DHCP on port 67. Everything made is removed.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@kvt/observability";
import { afterEach, describe, expect, it } from "vitest";
import { type BridgePlan, planBridge } from "./bridge-plan.ts";
import { enteredNetns } from "./netns.ts";
import { plumbPodNetwork } from "./pod-network.ts";
import { masqueradePlan } from "./testdata/plans.ts";

const root = process.getuid?.() === 0;
const fixture = new URL("./testdata/adopt.fixture.ts", import.meta.url).pathname;
/** The checkout's root (ends with `/`). */
const checkout = new URL("../../../", import.meta.url).pathname;
const log = createLogger({ component: "t", level: "silent" });
const made: string[] = [];
const dirs: string[] = [];

function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** A namespace with eth0 (a veth whose peer stays here, down), holding `address` when given. */
function podNamespace(address?: string): string {
  const name = `kvt-hand-test-${randomBytes(3).toString("hex")}`;
  sh("ip", ["netns", "add", name]);
  made.push(name);
  const peer = `kht${randomBytes(3).toString("hex")}`;
  sh("ip", ["link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", name]);
  sh("ip", ["-n", name, "link", "set", "eth0", "up"]);
  if (address) {
    sh("ip", ["-n", name, "addr", "add", address, "dev", "eth0"]);
    sh("ip", ["-n", name, "route", "add", "default", "via", "10.77.0.1", "dev", "eth0"]);
  }
  return name;
}

/**
 * Runs the adopting launcher as user 107 with no capabilities (setpriv), inside namespace `ns`. User 107 must reach
 * the fixture and the runtime, and a checkout may sit under a directory only root can enter (`mktemp -d` makes them
 * 0700): the command runs in a private mount namespace where the checkout is bind-mounted at a path anyone can
 * enter, and the paths under the checkout are given by that mount.
 */
function adoptAsLauncher(ns: string, plan: object, handover: string): string {
  const door = mkdtempSync(join(tmpdir(), "kvt-handover-checkout-"));
  chmodSync(door, 0o755);
  const mount = join(door, "p");
  mkdirSync(mount);
  const seen = (path: string): string => (path.startsWith(checkout) ? join(mount, path.slice(checkout.length)) : path);
  const launcher = [
    "setpriv",
    "--reuid=107",
    "--regid=107",
    "--clear-groups",
    "--inh-caps=-all",
    "--bounding-set=-all",
  ];
  // Deno turns a spawn of its own executable into `deno run -A`; through unshare it cannot, so the test says it.
  const denoRun = "Deno" in globalThis ? ["run", "-A"] : [];
  const bindThenRun = 'mount --bind "$1" "$2" && shift 2 && exec "$@"';
  try {
    return sh("unshare", [
      "--mount",
      "--propagation",
      "private",
      "sh",
      "-c",
      bindThenRun,
      "sh",
      checkout,
      mount,
      ...["ip", "netns", "exec", ns, ...launcher, seen(process.execPath), ...denoRun, seen(fixture)],
      JSON.stringify(plan),
      handover,
    ]);
  } finally {
    // rmdir, never a recursive remove: the mount point is empty outside the command's private namespace.
    rmdirSync(mount);
    rmdirSync(door);
  }
}

const masquerade = masqueradePlan({ mac: "02:00:00:aa:bb:cd" });

afterEach(() => {
  for (const ns of made.splice(0)) sh("ip", ["netns", "delete", ns]);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function handoverFile(content: object): string {
  const dir = mkdtempSync(join(tmpdir(), "kvt-handover-"));
  dirs.push(dir);
  chmodSync(dir, 0o755);
  const file = join(dir, "pod-network.json");
  writeFileSync(file, JSON.stringify(content), { mode: 0o644 });
  return file;
}

describe.runIf(root)("plumbed from outside the namespace, served by an unprivileged launcher (root)", () => {
  it("masquerade: the tap belongs to user 107, who serves DHCP on port 67 without capabilities", async () => {
    const ns = podNamespace();
    const plumbed = await plumbPodNetwork(masquerade, enteredNetns(`/run/netns/${ns}`), log, {
      tapOwner: 107,
      unprivilegedPortStart: 0,
    });
    expect(plumbed).toMatchObject({
      tap: "tap0",
      mac: masquerade.mac,
      dhcp: { broadcast: "10.0.2.255", lease: { ip: "10.0.2.2", router: "10.0.2.1", mtu: 1500 } },
    });
    expect(sh("ip", ["-n", ns, "tuntap", "show"])).toMatch(/^tap0: tap persist .*user 107 group 107/m);
    expect(sh("ip", ["netns", "exec", ns, "cat", "/proc/sys/net/ipv4/ip_forward"]).trim()).toBe("1");
    expect(sh("ip", ["netns", "exec", ns, "cat", "/proc/sys/net/ipv4/ip_unprivileged_port_start"]).trim()).toBe("0");
    // Only the entered namespace changed: this one keeps its privileged ports.
    expect(sh("cat", ["/proc/sys/net/ipv4/ip_unprivileged_port_start"]).trim()).not.toBe("0");
    expect(sh("ip", ["netns", "exec", ns, "nft", "list", "table", "ip", "nat"])).toContain("KUBEVIRT_PREINBOUND");
    const out = adoptAsLauncher(ns, masquerade, handoverFile(plumbed));
    expect(out.trim()).toBe(`adopted tap0 ${masquerade.mac} 67`);
  });

  it("bridge: the pod's address goes to the lease, and user 107 serves it from the bridge's address", async () => {
    const ns = podNamespace("10.77.0.9/24");
    const plan = planBridge({
      metadata: { name: "vm1", namespace: "default", uid: "u-1" },
      spec: {
        domain: { devices: { interfaces: [{ name: "default", bridge: {} }] } },
        networks: [{ name: "default", pod: {} }],
      },
    }) as BridgePlan;
    const plumbed = await plumbPodNetwork(plan, enteredNetns(`/run/netns/${ns}`), log, {
      tapOwner: 107,
      unprivilegedPortStart: 0,
    });
    expect(plumbed.ipAddresses).toEqual(["10.77.0.9"]);
    expect(plumbed.dhcp).toMatchObject({ replyFrom: "169.254.75.10", lease: { ip: "10.77.0.9", router: "10.77.0.1" } });
    expect(sh("ip", ["-n", ns, "tuntap", "show"])).toMatch(/^tap0: tap persist .*user 107 group 107/m);
    expect(sh("ip", ["netns", "exec", ns, "cat", "/proc/sys/net/ipv4/conf/all/arp_ignore"]).trim()).toBe("1");
    const out = adoptAsLauncher(ns, plan, handoverFile(plumbed));
    expect(out.trim()).toBe(`adopted tap0 ${plumbed.mac} 67`);
  });

  it("a launcher without the handover refuses to start its NIC, naming the file", () => {
    const ns = podNamespace();
    expect(() => adoptAsLauncher(ns, masquerade, "/nonexistent/pod-network.json")).toThrow(
      /virt-handler has not wired this pod's network \(no \/nonexistent\/pod-network.json\)/,
    );
  });
});
