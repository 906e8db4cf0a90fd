/**
 * The masquerade wiring in a real network namespace (root): a namespace standing in for a launcher pod (eth0 is one
 * end of a veth pair), wireMasquerade() run inside it, and the result read back: the bridge with the gateway address,
 * the tap on it, forwarding on in that namespace only, and Debian's nft holding KubeVirt's ruleset (all ports, or
 * only the declared ones). The DHCP server answers a real DISCOVER over UDP. Everything made is removed.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createSocket } from "node:dgram";
import { createLogger } from "@kvt/observability";
import { afterEach, describe, expect, it } from "vitest";
import { DHCP, parseDhcpRequest } from "./dhcp.ts";
import { startDhcpServer } from "./dhcp-server.ts";
import { type MasqueradePlan, masqueradeRuleset } from "./masquerade-plan.ts";
import { masqueradePlan } from "./testdata/plans.ts";

const root = process.getuid?.() === 0;
const fixture = new URL("./testdata/wire.fixture.ts", import.meta.url).pathname;
const made: string[] = [];

function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** A namespace with eth0 (a veth whose peer stays in this namespace, down). */
function podNamespace(): string {
  const name = `kvt-masq-test-${randomBytes(3).toString("hex")}`;
  sh("ip", ["netns", "add", name]);
  made.push(name);
  const peer = `kmt${randomBytes(3).toString("hex")}`;
  sh("ip", ["link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", name]);
  sh("ip", ["-n", name, "link", "set", "eth0", "up"]);
  return name;
}

const plan = (ports?: MasqueradePlan["ports"]): MasqueradePlan => masqueradePlan(ports ? { ports } : {});

afterEach(() => {
  for (const ns of made.splice(0)) sh("ip", ["netns", "delete", ns]); // takes eth0, and with it its host peer
});

describe.runIf(root)("wireMasquerade() in a real namespace (root)", () => {
  it.each([
    ["every port", undefined],
    [
      "only the declared ports",
      [
        { protocol: "tcp" as const, port: 80 },
        { protocol: "udp" as const, port: 53 },
      ],
    ],
  ])("wires the bridge, the tap and KubeVirt's nat table forwarding %s", (_name, ports) => {
    const ns = podNamespace();
    const p = plan(ports);
    const out = sh("ip", ["netns", "exec", ns, process.execPath, fixture, JSON.stringify(p)]);
    expect(out.trim()).toBe(`wired tap0 ${p.mac}`);
    expect(sh("ip", ["-n", ns, "-br", "addr", "show", "k6t-eth0"])).toContain("10.0.2.1/24");
    expect(sh("ip", ["-n", ns, "-o", "link", "show", "tap0"])).toContain("master k6t-eth0");
    expect(sh("ip", ["netns", "exec", ns, "cat", "/proc/sys/net/ipv4/ip_forward"]).trim()).toBe("1");
    const table = sh("ip", ["netns", "exec", ns, "nft", "list", "table", "ip", "nat"]);
    const dnats = table.split("\n").filter((l) => l.includes("dnat to 10.0.2.2") && !l.includes("127.0.0.1"));
    if (ports) expect(dnats.map((l) => l.trim().split(" ")[0]).sort()).toEqual(["tcp", "udp"]);
    else
      expect(dnats.map((l) => l.trim())).toEqual([
        expect.stringMatching(/^counter packets \d+ bytes \d+ dnat to 10\.0\.2\.2$/),
      ]);
    expect(table).toMatch(/tcp dport \{ 49152, 49153 \} counter packets \d+ bytes \d+ return/);
    expect(table).toMatch(/ip saddr 10\.0\.2\.2 counter packets \d+ bytes \d+ masquerade/);
    // The rules came from the same script the unit test pins.
    expect(masqueradeRuleset(p)).toContain("KUBEVIRT_PREINBOUND");
  });

  it("refuses to wire a namespace without the pod's eth0", () => {
    const name = `kvt-masq-test-${randomBytes(3).toString("hex")}`;
    sh("ip", ["netns", "add", name]);
    made.push(name);
    expect(() => sh("ip", ["netns", "exec", name, process.execPath, fixture, JSON.stringify(plan())])).toThrow(
      /the pod has no eth0/,
    );
  });
});

describe("startDhcpServer() over real UDP", () => {
  it("answers the guest's DISCOVER with an OFFER and ignores other MACs and garbage", async () => {
    const client = createSocket("udp4");
    await new Promise<void>((r) => client.bind(0, "127.0.0.1", () => r()));
    const clientPort = client.address().port;
    const server = await startDhcpServer({
      mac: "02:00:00:aa:bb:cc",
      broadcast: "127.0.0.1",
      clientPort,
      port: 0,
      log: createLogger({ component: "t", level: "silent" }),
      lease: {
        ip: "10.0.2.2",
        prefixLength: 24,
        router: "10.0.2.1",
        serverIp: "10.0.2.1",
        dns: [],
        searchDomains: [],
        leaseSeconds: 0xffffffff,
      },
    });
    try {
      const port = server.address.port;
      const discover = (mac: number[]): Buffer => {
        const b = Buffer.alloc(300);
        b.set([1, 1, 6, 0, 1, 2, 3, 4]);
        b.set(mac, 28);
        b.writeUInt32BE(0x63825363, 236);
        b.set([53, 1, DHCP.DISCOVER, 255], 240);
        return b;
      };
      const reply = new Promise<Buffer>((r) => client.once("message", (m) => r(m)));
      client.send(Buffer.from("garbage"), port, "127.0.0.1");
      client.send(discover([2, 0, 0, 0xee, 0xee, 0xee]), port, "127.0.0.1");
      client.send(discover([2, 0, 0, 0xaa, 0xbb, 0xcc]), port, "127.0.0.1");
      const offer = await reply;
      expect(offer[0]).toBe(2);
      expect([...offer.subarray(16, 20)]).toEqual([10, 0, 2, 2]);
      expect(parseDhcpRequest(offer)).toBeUndefined(); // a reply is not a request
      expect(server.counters).toEqual({ replies: 1, dropped: 2 });
    } finally {
      await server.close();
      client.close();
    }
  });
});
