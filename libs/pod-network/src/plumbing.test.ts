import { createLogger } from "@kvt/observability";
import { describe, expect, it } from "vitest";
import { plumbBridge } from "./bridge.ts";
import { plumbMasquerade } from "./masquerade.ts";
import { type Netns, PLUMBING_PROGRAMS, PodNetworkWiringError, sysctlPath, sysctlWriter } from "./netns.ts";
import { bridgePlan, masqueradePlan } from "./testdata/plans.ts";

const log = createLogger({ component: "t", level: "silent" });

/**
 * A namespace that records what it is asked and answers like iproute2 for a pod whose eth0 has `eth0` (JSON of
 * `ip -j addr show dev eth0`), its default route via 10.77.0.1, and the links in `links`.
 */
function fakeNetns(links: string[]): { ns: Netns; commands: string[]; sysctls: string[] } {
  const commands: string[] = [];
  const sysctls: string[] = [];
  const ns: Netns = {
    description: "fake",
    exec: (program, args) => {
      const line = [program, ...args].join(" ");
      commands.push(line);
      const show = /^ip (-j )?link show dev (\S+)$/.exec(line);
      if (show) {
        if (!links.includes(show[2])) return Promise.reject(new PodNetworkWiringError(`no ${show[2]}`));
        return Promise.resolve(show[1] ? JSON.stringify([{ address: "aa:bb:cc:dd:ee:0f", mtu: 1400 }]) : "");
      }
      if (line === "ip -j addr show dev eth0")
        return Promise.resolve(
          JSON.stringify([
            {
              ifname: "eth0",
              address: "0a:58:0a:4d:00:09",
              mtu: 1400,
              addr_info: [{ family: "inet", local: "10.77.0.9", prefixlen: 24, scope: "global" }],
            },
          ]),
        );
      if (line === "ip -j -4 route show")
        return Promise.resolve(
          JSON.stringify([
            { dst: "default", gateway: "10.77.0.1", dev: "eth0" },
            { dst: "10.77.0.0/24", dev: "eth0" },
          ]),
        );
      if (line === "ip link add k6t-eth0 type bridge") links.push("k6t-eth0");
      return Promise.resolve("");
    },
    setSysctl: (name, value) => {
      sysctlPath(name); // refuses what is not a net.* name, as the real ones do
      sysctls.push(`${name}=${value}`);
      return Promise.resolve();
    },
  };
  return { ns, commands, sysctls };
}

const masquerade = masqueradePlan();
const bridge = bridgePlan;

describe("plumbing for an unprivileged launcher (what virt-handler runs in the pod)", () => {
  it("masquerade: the tap owned by the launcher's user, forwarding, ports from 0, the NAT from stdin", async () => {
    const { ns, commands, sysctls } = fakeNetns(["eth0"]);
    const plumbed = await plumbMasquerade(masquerade, ns, { tapOwner: 107, unprivilegedPortStart: 0 });
    expect(commands).toContain("ip tuntap add dev tap0 mode tap user 107 group 107");
    expect(commands).toContain("nft -f -");
    expect(sysctls).toEqual(["net.ipv4.ip_forward=1", "net.ipv4.ip_unprivileged_port_start=0"]);
    expect(plumbed).toEqual({
      tap: "tap0",
      mac: "02:00:00:aa:bb:cc",
      dhcp: {
        mac: "02:00:00:aa:bb:cc",
        broadcast: "10.0.2.255",
        lease: {
          ip: "10.0.2.2",
          prefixLength: 24,
          router: "10.0.2.1",
          serverIp: "10.0.2.1",
          mtu: 1400,
          leaseSeconds: 0xffffffff,
        },
      },
    });
  });

  it("masquerade without options (a root launcher on itself): a tap of root, no port sysctl", async () => {
    const { ns, commands, sysctls } = fakeNetns(["eth0"]);
    await plumbMasquerade(masquerade, ns);
    expect(commands).toContain("ip tuntap add dev tap0 mode tap");
    expect(sysctls).toEqual(["net.ipv4.ip_forward=1"]);
  });

  it("bridge: the pod's address, gateway and routes go to the lease; the tap owned by the launcher's user", async () => {
    const { ns, commands, sysctls } = fakeNetns(["eth0"]);
    const plumbed = await plumbBridge(bridge, ns, log, { tapOwner: 107, unprivilegedPortStart: 0 });
    expect(commands).toContain("ip tuntap add dev tap0 mode tap user 107 group 107");
    expect(commands).toContain("bridge link set dev eth0-nic learning off");
    expect(sysctls).toEqual(["net.ipv4.conf.all.arp_ignore=1", "net.ipv4.ip_unprivileged_port_start=0"]);
    expect(plumbed).toMatchObject({
      tap: "tap0",
      mac: "0a:58:0a:4d:00:09",
      ipAddresses: ["10.77.0.9"],
      dhcp: {
        broadcast: "255.255.255.255",
        replyFrom: "169.254.75.10",
        lease: { ip: "10.77.0.9", prefixLength: 24, router: "10.77.0.1", mtu: 1400 },
      },
    });
  });

  it.each(["masquerade", "bridge"])(
    "%s runs only PLUMBING_PROGRAMS (what virt-handler's image carries)",
    async (binding) => {
      const { ns, commands } = fakeNetns(["eth0"]);
      if (binding === "masquerade") await plumbMasquerade(masquerade, ns);
      else await plumbBridge(bridge, ns, log);
      const programs = new Set(commands.map((c) => c.split(" ")[0] ?? ""));
      expect([...programs].filter((p) => !(PLUMBING_PROGRAMS as readonly string[]).includes(p))).toEqual([]);
    },
  );

  it("refuses a sysctl outside net.* (not per namespace)", () => {
    expect(() => sysctlPath("kernel.hostname")).toThrow(/not a per-namespace sysctl/);
    expect(sysctlPath("net.ipv4.conf.all.arp_ignore")).toBe("/proc/sys/net/ipv4/conf/all/arp_ignore");
  });
});

describe("sysctlWriter()", () => {
  it("runs the runtime's own binary: node -e with process.argv, deno eval with Deno.args (no -e in Deno)", () => {
    const path = "/proc/sys/net/ipv4/ip_forward";
    const node = sysctlWriter("/usr/bin/node", path, "1", false);
    expect(node.slice(0, 2)).toEqual(["/usr/bin/node", "-e"]);
    expect(node[2]).toContain("process.argv[1]");
    expect(node.slice(3)).toEqual([path, "1"]);
    const deno = sysctlWriter("/usr/bin/deno", path, "1", true);
    expect(deno.slice(0, 2)).toEqual(["/usr/bin/deno", "eval"]);
    expect(deno[2]).toContain("Deno.args[0]");
    expect(deno.slice(3)).toEqual([path, "1"]);
  });
});
