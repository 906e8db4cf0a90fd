/**
 * The bridge binding in real network namespaces (root), all made here and removed after:
 *
 *   node ns: kbn.. 10.77.0.1/16 ──veth── pod ns: eth0 10.77.1.5/16 (route 10.76.0.0/16 via 10.77.0.1)
 *                                          after wireBridge(): eth0-nic in k6t-eth0, tap0, eth0 placeholder
 *   guest ns: geth0 (the pod's MAC) ──veth── gport, a port of k6t-eth0 standing in for the VMM's tap
 *
 * The guest takes its lease from the launcher's DHCP server over real UDP broadcasts, puts it on, and the node
 * reaches its HTTP server at the pod's address: the pod's IP now leads to the guest, and the pod (arp_ignore=1)
 * does not answer for it.
 */
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import type { BridgePlan } from "./bridge-plan.ts";

const root = process.getuid?.() === 0;
const fixture = (name: string): string => new URL(`./testdata/${name}`, import.meta.url).pathname;
const made: string[] = [];
const children: ReturnType<typeof spawn>[] = [];
const POD_MAC = "02:77:00:00:01:05";

function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

function netns(role: string): string {
  const name = `kvt-br-${role}-${randomBytes(3).toString("hex")}`;
  sh("ip", ["netns", "add", name]);
  made.push(name);
  sh("ip", ["-n", name, "link", "set", "lo", "up"]);
  return name;
}

/** A node and a pod namespace joined by a veth, the pod's end named eth0 with a pod network's address and routes. */
function podOnNode(): { node: string; pod: string } {
  const node = netns("node");
  const pod = netns("pod");
  const peer = `kbn${randomBytes(3).toString("hex")}`;
  sh("ip", ["link", "add", peer, "netns", node, "type", "veth", "peer", "name", "eth0", "netns", pod]);
  sh("ip", ["-n", node, "addr", "add", "10.77.0.1/16", "dev", peer]);
  sh("ip", ["-n", node, "link", "set", peer, "up"]);
  sh("ip", ["-n", pod, "link", "set", "eth0", "address", POD_MAC, "mtu", "1400"]);
  sh("ip", ["-n", pod, "addr", "add", "10.77.1.5/16", "dev", "eth0"]);
  sh("ip", ["-n", pod, "link", "set", "eth0", "up"]);
  sh("ip", ["-n", pod, "route", "add", "10.76.0.0/16", "via", "10.77.0.1"]);
  return { node, pod };
}

/**
 * Runs `args` in `ns` with this runtime and resolves with its first stdout line. Entered as the process-kubelet
 * enters a pod (nsenter --net), not with `ip netns exec`: /sys then still shows the node's links, as in a launcher.
 */
function firstLine(ns: string, args: string[], keepOpen = false): Promise<string> {
  const child = spawn("nsenter", [`--net=/run/netns/${ns}`, process.execPath, ...args], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  children.push(child);
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  if (!keepOpen) child.stdin.end();
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once("line", resolve);
    child.once("exit", (code) => reject(new Error(`exited ${code}: ${stderr}`)));
  });
}

const plan: BridgePlan = {
  binding: "bridge",
  name: "default",
  model: "virtio",
  index: 0,
  hostname: "vm1",
  dhcpOptions: { bootFileName: "pxelinux.0", ntpServers: ["10.77.0.1"], privateOptions: [{ option: 240, value: "x" }] },
};

afterEach(() => {
  for (const c of children.splice(0)) c.kill();
  for (const ns of made.splice(0)) sh("ip", ["netns", "delete", ns]); // takes its links, and their peers
});

describe.runIf(root)("wireBridge() in real namespaces (root)", () => {
  it("hands the pod's address to the guest by DHCP and the node reaches the guest there", async () => {
    const hostArpIgnore = sh("cat", ["/proc/sys/net/ipv4/conf/all/arp_ignore"]);
    const { node, pod } = podOnNode();
    // What an attempt that failed early leaves behind is cleared first.
    sh("ip", ["-n", pod, "link", "add", "k6t-eth0", "type", "bridge"]);
    sh("ip", ["-n", pod, "tuntap", "add", "dev", "tap0", "mode", "tap"]);
    const wired = JSON.parse(await firstLine(pod, [fixture("bridge.fixture.ts"), JSON.stringify(plan)], true));
    expect(wired).toEqual({ tap: "tap0", mac: POD_MAC, ipAddresses: ["10.77.1.5"] });

    // The pod's links as KubeVirt leaves them.
    const links = JSON.parse(sh("ip", ["-n", pod, "-j", "-d", "addr", "show"])) as {
      ifname: string;
      address: string;
      operstate: string;
      master?: string;
      mtu: number;
      addr_info: { family: string; local: string; prefixlen: number }[];
    }[];
    const link = (name: string) => links.find((l) => l.ifname === name)!;
    const v4 = (name: string) =>
      link(name)
        .addr_info.filter((a) => a.family === "inet")
        .map((a) => a.local);
    expect(v4("k6t-eth0")).toEqual(["169.254.75.10"]);
    // eth0-nic took the bridge's MAC (the bridge's own may move to tap0's since): the pod's MAC is the guest's alone.
    expect(link("eth0-nic").master).toBe("k6t-eth0");
    expect(link("eth0-nic").address).not.toBe(POD_MAC);
    expect(v4("eth0-nic")).toEqual([]);
    expect(link("tap0")).toMatchObject({ master: "k6t-eth0", mtu: 1400 });
    expect(link("eth0")).toMatchObject({ address: POD_MAC, operstate: "DOWN" });
    expect(v4("eth0")).toEqual(["10.77.1.5"]);
    expect(sh("ip", ["netns", "exec", pod, "cat", "/proc/sys/net/ipv4/conf/all/arp_ignore"]).trim()).toBe("1");
    expect(sh("cat", ["/proc/sys/net/ipv4/conf/all/arp_ignore"])).toBe(hostArpIgnore); // the host's is untouched
    expect(sh("ip", ["-n", pod, "-4", "route", "show"]).trim()).toBe(""); // the pod routes nothing itself

    // A guest on the bridge with the pod's MAC takes the lease.
    const guest = netns("guest");
    sh("ip", ["link", "add", "gport", "netns", pod, "type", "veth", "peer", "name", "geth0", "netns", guest]);
    sh("ip", ["-n", pod, "link", "set", "gport", "master", "k6t-eth0", "up"]);
    sh("ip", ["-n", guest, "link", "set", "geth0", "address", POD_MAC, "up"]);
    sh("ip", ["-n", guest, "addr", "add", "169.254.99.99/16", "dev", "geth0"]);
    const ack = JSON.parse(await firstLine(guest, [fixture("dhcp-client.fixture.ts"), POD_MAC, "169.254.99.99"])) as {
      yiaddr: string;
      options: Record<string, number[]>;
    };
    expect(ack.yiaddr).toBe("10.77.1.5");
    expect(ack.options[53]).toEqual([5]); // ACK
    expect(ack.options[1]).toEqual([255, 255, 0, 0]);
    expect(ack.options[3]).toEqual([10, 77, 0, 1]);
    expect(ack.options[54]).toEqual([169, 254, 75, 10]);
    expect(ack.options[121]).toEqual([16, 10, 76, 10, 77, 0, 1]);
    expect(ack.options[26]).toEqual([5, 120]); // MTU 1400
    expect(Buffer.from(ack.options[12] ?? []).toString()).toBe("vm1");
    // The interface's dhcpOptions: boot file, NTP server, a private option.
    expect(Buffer.from(ack.options[67] ?? []).toString()).toBe("pxelinux.0");
    expect(ack.options[42]).toEqual([10, 77, 0, 1]);
    expect(ack.options[240]).toEqual([120]);

    sh("ip", ["-n", guest, "addr", "flush", "dev", "geth0"]);
    sh("ip", ["-n", guest, "addr", "add", "10.77.1.5/16", "dev", "geth0"]);
    const server = `require("node:http").createServer((q, r) => r.end("guest")).listen(8080, "10.77.1.5", () => console.log("up"))`;
    expect(await firstLine(guest, ["-e", server], true)).toBe("up");
    const get = `fetch("http://10.77.1.5:8080/").then((r) => r.text()).then((t) => console.log(t), (e) => console.log(String(e.cause ?? e)))`;
    expect(await firstLine(node, ["-e", get])).toBe("guest");
    expect(sh("ip", ["-n", node, "neigh", "show", "10.77.1.5"])).toContain(`lladdr ${POD_MAC}`);
  });

  it("refuses a namespace without the pod's eth0 and one bridged already", async () => {
    const empty = netns("empty");
    await expect(firstLine(empty, [fixture("bridge.fixture.ts"), JSON.stringify(plan)])).rejects.toThrow(
      /the pod has no eth0/,
    );
    const { pod } = podOnNode();
    sh("ip", ["-n", pod, "link", "set", "eth0", "name", "eth0-nic"]);
    await expect(firstLine(pod, [fixture("bridge.fixture.ts"), JSON.stringify(plan)])).rejects.toThrow(
      /bridged already/,
    );
  });
});
