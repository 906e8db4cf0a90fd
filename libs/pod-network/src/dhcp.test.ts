import { describe, expect, it } from "vitest";
import {
  buildDhcpReply,
  DHCP,
  type DhcpLease,
  encodeClasslessRoutes,
  encodeSearch,
  maskOf,
  parseDhcpRequest,
  replyType,
} from "./dhcp.ts";

const MAC = "02:11:22:33:44:55";
const lease: DhcpLease = {
  ip: "10.0.2.2",
  prefixLength: 24,
  router: "10.0.2.1",
  serverIp: "10.0.2.1",
  dns: ["10.96.0.10"],
  searchDomains: ["default.svc.cluster.local", "cluster.local"],
  hostname: "vm1",
  mtu: 1500,
  leaseSeconds: 0xffffffff,
};

/** A client message as udhcpc sends it. */
function clientMessage(type: number, options: number[] = []): Uint8Array {
  const b = new Uint8Array(300);
  b.set([1, 1, 6, 0, 0xde, 0xad, 0xbe, 0xef]);
  b.set([0x80, 0], 10); // broadcast flag
  b.set(
    MAC.split(":").map((h) => Number.parseInt(h, 16)),
    28,
  );
  b.set([99, 130, 83, 99], 236);
  b.set([53, 1, type, ...options, 255], 240);
  return b;
}

/** The options of a reply, by code. */
function options(reply: Uint8Array): Map<number, number[]> {
  const out = new Map<number, number[]>();
  for (let i = 240; i < reply.length && reply[i] !== 255; i += 2 + reply[i + 1]) {
    out.set(reply[i], [...reply.subarray(i + 2, i + 2 + reply[i + 1])]);
  }
  return out;
}

describe("DHCP (pure)", () => {
  it("answers a DISCOVER with an OFFER carrying KubeVirt's lease", () => {
    const req = parseDhcpRequest(clientMessage(DHCP.DISCOVER))!;
    expect(req).toMatchObject({ xid: 0xdeadbeef, mac: MAC, messageType: DHCP.DISCOVER, flags: 0x8000 });
    expect(replyType(req, lease)).toBe(DHCP.OFFER);
    const reply = buildDhcpReply(req, DHCP.OFFER, lease);
    expect([...reply.subarray(0, 2)]).toEqual([2, 1]);
    expect([...reply.subarray(16, 20)]).toEqual([10, 0, 2, 2]); // yiaddr
    expect([...reply.subarray(28, 34)]).toEqual([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
    const o = options(reply);
    expect(o.get(53)).toEqual([DHCP.OFFER]);
    expect(o.get(1)).toEqual([255, 255, 255, 0]);
    expect(o.get(3)).toEqual([10, 0, 2, 1]);
    expect(o.get(6)).toEqual([10, 96, 0, 10]);
    expect(o.get(51)).toEqual([255, 255, 255, 255]);
    expect(o.get(26)).toEqual([5, 220]);
    expect(Buffer.from(o.get(12)!).toString()).toBe("vm1");
    expect(o.get(119)).toEqual([...encodeSearch(lease.searchDomains)]);
  });

  it.each([
    ["for the lease's address", [50, 4, 10, 0, 2, 2], DHCP.ACK],
    ["without an address", [], DHCP.ACK],
    ["for another address", [50, 4, 10, 0, 2, 9], DHCP.NAK],
    ["to another server", [54, 4, 10, 9, 9, 9], undefined],
  ])("answers a REQUEST %s", (_name, opts, want) => {
    expect(replyType(parseDhcpRequest(clientMessage(DHCP.REQUEST, opts))!, lease)).toBe(want);
  });

  it("refuses what is not a BOOTREQUEST with a message type, and never throws on garbage", () => {
    expect(parseDhcpRequest(new Uint8Array(10))).toBeUndefined();
    const noType = clientMessage(DHCP.DISCOVER);
    noType[240] = 255;
    expect(parseDhcpRequest(noType)).toBeUndefined();
    const truncated = clientMessage(DHCP.DISCOVER, [50, 200]);
    expect(parseDhcpRequest(truncated)?.requestedIp).toBeUndefined();
    let seed = 7;
    for (let i = 0; i < 2000; i++) {
      const b = clientMessage(DHCP.DISCOVER);
      for (let j = 0; j < 16; j++) {
        seed = (seed * 1103515245 + 12345) >>> 0;
        b[seed % b.length] = seed >>> 24;
      }
      const r = parseDhcpRequest(b);
      if (r) expect(() => buildDhcpReply(r, DHCP.OFFER, lease)).not.toThrow();
    }
  });

  it("encodes search domains as RFC 1035 labels and masks", () => {
    expect([...encodeSearch(["a.bc"])]).toEqual([1, 97, 2, 98, 99, 0]);
    expect(maskOf(24)).toBe("255.255.255.0");
    expect(maskOf(30)).toBe("255.255.255.252");
  });

  it("carries the bridge binding's routes (RFC 3442, default route last) and the domain name; no router if none", () => {
    const req = parseDhcpRequest(clientMessage(DHCP.DISCOVER))!;
    const { router: _router, ...noRouter } = lease;
    const reply = buildDhcpReply(req, DHCP.OFFER, {
      ...noRouter,
      domainName: "default.svc.cluster.local",
      routes: [
        { destination: "0.0.0.0/0", gateway: "10.99.0.1" },
        { destination: "10.98.0.0/16", gateway: "10.99.0.1" },
        { destination: "not a cidr", gateway: "10.99.0.1" },
      ],
    });
    const o = options(reply);
    expect(o.has(3)).toBe(false);
    expect(o.get(121)).toEqual([16, 10, 98, 10, 99, 0, 1, 0, 10, 99, 0, 1]);
    expect(Buffer.from(o.get(15)!).toString()).toBe("default.svc.cluster.local");
    expect([...encodeClasslessRoutes([{ destination: "10.0.0.0/8", gateway: "10.1.2.3" }])]).toEqual([
      8, 10, 10, 1, 2, 3,
    ]);
    expect([...encodeClasslessRoutes([{ destination: "192.168.1.0/25", gateway: "0.0.0.0" }])]).toEqual([
      25, 192, 168, 1, 0, 0, 0, 0, 0,
    ]);
  });

  it("sends dhcpOptions as KubeVirt does: TFTP server 66, boot file 67, NTP 42, private options 224-254", () => {
    const req = parseDhcpRequest(clientMessage(DHCP.DISCOVER))!;
    const reply = buildDhcpReply(req, DHCP.ACK, {
      ...lease,
      extra: {
        tftpServerName: "tftp.example",
        bootFileName: "pxelinux.0",
        ntpServers: ["10.0.0.5", "not-an-ip", "10.0.0.6"],
        privateOptions: [
          { option: 240, value: "extra.options.kubevirt.io" },
          { option: 240, value: "a duplicate" },
          { option: 100, value: "out of range" },
        ],
      },
    });
    const o = options(reply);
    expect(Buffer.from(o.get(66)!).toString()).toBe("tftp.example");
    expect(Buffer.from(o.get(67)!).toString()).toBe("pxelinux.0");
    expect(o.get(42)).toEqual([10, 0, 0, 5, 10, 0, 0, 6]);
    expect(Buffer.from(o.get(240)!).toString()).toBe("extra.options.kubevirt.io");
    expect(o.has(100)).toBe(false);
    expect(parseDhcpRequest(reply)).toBeUndefined();
  });

  it("splits an option longer than 255 bytes into consecutive instances (RFC 3396)", () => {
    const req = parseDhcpRequest(clientMessage(DHCP.DISCOVER))!;
    const long = "b".repeat(300);
    const reply = buildDhcpReply(req, DHCP.ACK, { ...lease, extra: { bootFileName: long } });
    const parts: number[][] = [];
    for (let i = 240; i < reply.length && reply[i] !== 255; i += 2 + reply[i + 1]) {
      if (reply[i] === 67) parts.push([...reply.subarray(i + 2, i + 2 + reply[i + 1])]);
    }
    expect(parts.map((p) => p.length)).toEqual([255, 45]);
    expect(Buffer.from(parts.flat()).toString()).toBe(long);
  });
});
