/**
 * DHCPv4 messages (RFC 2131, options RFC 2132 and RFC 3397) as the launcher's one-guest DHCP server reads and writes
 * them (pure). Parsing never throws: whatever a guest sends is either a request this server answers or undefined.
 *
 *   0      1      2      3      4            8        10      12       16       20       24       28        44
 *   | op   | htype| hlen | hops | xid (4)    | secs   | flags | ciaddr | yiaddr | siaddr | giaddr | chaddr (16)
 *   44 sname (64) | 108 file (128) | 236 magic 99.130.83.99 | 240 options: code, length, value ... 255
 *
 *   guest DISCOVER -> OFFER;  REQUEST for the lease's address (or none) -> ACK;  REQUEST for another -> NAK
 */

/** DHCP message types (option 53). */
export const DHCP = { DISCOVER: 1, OFFER: 2, REQUEST: 3, DECLINE: 4, ACK: 5, NAK: 6, RELEASE: 7, INFORM: 8 } as const;

const MAGIC = 0x63825363;
const HEADER_BYTES = 240;

/** A client message this server may answer. */
export interface DhcpRequest {
  readonly xid: number;
  readonly flags: number;
  /** The client's hardware address, lower-case colon-separated. */
  readonly mac: string;
  readonly messageType: number;
  readonly ciaddr: string;
  /** Option 50. */
  readonly requestedIp?: string;
  /** Option 54. */
  readonly serverId?: string;
}

/** What the guest is told. */
export interface DhcpLease {
  readonly ip: string;
  readonly prefixLength: number;
  /** Option 3; none when the pod routes through no gateway. */
  readonly router?: string;
  /** The server's own address (option 54, siaddr). */
  readonly serverIp: string;
  readonly dns: readonly string[];
  readonly searchDomains: readonly string[];
  readonly hostname?: string;
  readonly mtu?: number;
  /** Seconds; KubeVirt gives an infinite lease (0xffffffff). */
  readonly leaseSeconds: number;
  /** Classless static routes (option 121, RFC 3442): the pod's routes under the bridge binding. */
  readonly routes?: readonly DhcpRoute[];
  /** Option 15, the domain name (KubeVirt: the longest search domain; Windows resolves with it). */
  readonly domainName?: string;
  /** The interface's `dhcpOptions` (KubeVirt's DHCPOptions). */
  readonly extra?: DhcpExtraOptions;
}

/** One classless static route: `destination` a CIDR (`0.0.0.0/0` the default route), `gateway` 0.0.0.0 on-link. */
export interface DhcpRoute {
  readonly destination: string;
  readonly gateway: string;
}

/** KubeVirt's `interfaces[].dhcpOptions`: options 66, 67, 42 and the private options 224-254. */
export interface DhcpExtraOptions {
  readonly tftpServerName?: string;
  readonly bootFileName?: string;
  /** IPv4 addresses (admission refuses others; any left are skipped). */
  readonly ntpServers?: readonly string[];
  /** Codes outside 224-254 are skipped, as KubeVirt's server does. */
  readonly privateOptions?: readonly { readonly option: number; readonly value: string }[];
}

/** Parses a client message; undefined for anything that is not a well-formed BOOTREQUEST with a message type. */
export function parseDhcpRequest(buf: Uint8Array): DhcpRequest | undefined {
  if (buf.length < HEADER_BYTES) return undefined;
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  if (buf[0] !== 1 || buf[1] !== 1 || buf[2] !== 6 || view.getUint32(236) !== MAGIC) return undefined;
  const options = readOptions(buf.subarray(HEADER_BYTES));
  const type = options.get(53);
  if (type?.length !== 1) return undefined;
  const requested = options.get(50);
  const server = options.get(54);
  return {
    xid: view.getUint32(4),
    flags: view.getUint16(10),
    mac: [...buf.subarray(28, 34)].map((b) => b.toString(16).padStart(2, "0")).join(":"),
    messageType: type[0],
    ciaddr: ipString(buf.subarray(12, 16)),
    ...(requested?.length === 4 ? { requestedIp: ipString(requested) } : {}),
    ...(server?.length === 4 ? { serverId: ipString(server) } : {}),
  };
}

/** The options of a message (the first occurrence of each code); stops at END or at a truncated option. */
function readOptions(bytes: Uint8Array): Map<number, Uint8Array> {
  const out = new Map<number, Uint8Array>();
  let i = 0;
  while (i < bytes.length) {
    const code = bytes[i];
    if (code === 255) break;
    if (code === 0) {
      i++;
      continue;
    }
    if (i + 1 >= bytes.length) break;
    const len = bytes[i + 1];
    if (i + 2 + len > bytes.length) break;
    if (!out.has(code)) out.set(code, bytes.subarray(i + 2, i + 2 + len));
    i += 2 + len;
  }
  return out;
}

/** What to answer `req` with for `lease` (pure): OFFER, ACK, NAK, or nothing (other message types). */
export function replyType(req: DhcpRequest, lease: DhcpLease): number | undefined {
  if (req.messageType === DHCP.DISCOVER) return DHCP.OFFER;
  if (req.messageType !== DHCP.REQUEST) return undefined;
  if (req.serverId && req.serverId !== lease.serverIp) return undefined; // the guest chose another server
  const wanted = req.requestedIp ?? (req.ciaddr !== "0.0.0.0" ? req.ciaddr : undefined);
  return wanted === undefined || wanted === lease.ip ? DHCP.ACK : DHCP.NAK;
}

/** Builds the reply of `type` to `req` carrying `lease` (a NAK carries only the server id). */
export function buildDhcpReply(req: DhcpRequest, type: number, lease: DhcpLease): Uint8Array {
  const head = new Uint8Array(HEADER_BYTES);
  const view = new DataView(head.buffer);
  head.set([2, 1, 6, 0]);
  view.setUint32(4, req.xid);
  view.setUint16(10, req.flags);
  if (type !== DHCP.NAK) {
    head.set(ipBytes(lease.ip), 16);
    head.set(ipBytes(lease.serverIp), 20);
  }
  head.set(
    req.mac.split(":").map((h) => Number.parseInt(h, 16)),
    28,
  );
  view.setUint32(236, MAGIC);
  const opts: number[][] = [
    [53, 1, type],
    [54, 4, ...ipBytes(lease.serverIp)],
  ];
  if (type !== DHCP.NAK) {
    opts.push([51, 4, ...u32(lease.leaseSeconds)]);
    opts.push([1, 4, ...ipBytes(maskOf(lease.prefixLength))]);
    if (lease.router) opts.push([3, 4, ...ipBytes(lease.router)]);
    const dns = lease.dns.filter((d) => /^\d+\.\d+\.\d+\.\d+$/.test(d)).slice(0, 8);
    if (dns.length > 0) opts.push([6, dns.length * 4, ...dns.flatMap(ipBytes)]);
    if (lease.hostname) opts.push(option(12, new TextEncoder().encode(lease.hostname.slice(0, 63))));
    if (lease.mtu) opts.push([26, 2, (lease.mtu >> 8) & 0xff, lease.mtu & 0xff]);
    const search = encodeSearch(lease.searchDomains);
    if (search.length > 0 && search.length <= 255) opts.push(option(119, search));
    if (lease.domainName) opts.push(option(15, text(lease.domainName)));
    const routes = encodeClasslessRoutes(lease.routes ?? []);
    if (routes.length > 0) opts.push(option(121, routes));
    opts.push(...extraOptions(lease.extra));
  }
  const body = Uint8Array.from([...opts.flat(), 255]);
  const out = new Uint8Array(Math.max(300, HEADER_BYTES + body.length)); // BOOTP's minimum of 300 bytes
  out.set(head);
  out.set(body, HEADER_BYTES);
  return out;
}

/** RFC 3397 domain search list: each domain as DNS labels (no compression). */
export function encodeSearch(domains: readonly string[]): Uint8Array {
  const bytes: number[] = [];
  for (const d of domains) {
    const labels = d.replace(/\.$/, "").split(".");
    if (labels.some((l) => l.length === 0 || l.length > 63)) continue;
    for (const l of labels) bytes.push(l.length, ...new TextEncoder().encode(l));
    bytes.push(0);
  }
  return Uint8Array.from(bytes);
}

/**
 * RFC 3442 classless static routes: per route the prefix length, the significant octets of the destination, then
 * the gateway. The default route goes last, as KubeVirt orders it (a client applies them in order, and the default
 * route's gateway may need an earlier route). Malformed entries are skipped.
 */
export function encodeClasslessRoutes(routes: readonly DhcpRoute[]): Uint8Array {
  const isDefault = (r: DhcpRoute): boolean => r.destination.endsWith("/0");
  const ordered = [...routes.filter((r) => !isDefault(r)), ...routes.filter(isDefault)];
  const bytes: number[] = [];
  for (const r of ordered) {
    const m = /^(\d+\.\d+\.\d+\.\d+)\/(\d+)$/.exec(r.destination);
    const width = m ? Number(m[2]) : Number.NaN;
    if (!m || !isIpv4(m[1]) || !isIpv4(r.gateway) || !(width >= 0 && width <= 32)) continue;
    bytes.push(width, ...ipBytes(m[1]).slice(0, Math.ceil(width / 8)), ...ipBytes(r.gateway));
  }
  return Uint8Array.from(bytes);
}

/** The options of `dhcpOptions` (KubeVirt's prepareDHCPOptions). */
function extraOptions(extra: DhcpExtraOptions | undefined): number[][] {
  if (!extra) return [];
  const out: number[][] = [];
  if (extra.tftpServerName) out.push(option(66, text(extra.tftpServerName)));
  if (extra.bootFileName) out.push(option(67, text(extra.bootFileName)));
  const ntp = (extra.ntpServers ?? []).filter(isIpv4);
  if (ntp.length > 0) out.push(option(42, Uint8Array.from(ntp.flatMap(ipBytes))));
  const seen = new Set<number>();
  for (const p of extra.privateOptions ?? []) {
    if (!Number.isInteger(p.option) || p.option < 224 || p.option > 254 || seen.has(p.option)) continue;
    seen.add(p.option);
    out.push(option(p.option, text(p.value)));
  }
  return out;
}

/** An option; a value over 255 bytes is split into consecutive instances of the code (RFC 3396). */
function option(code: number, value: Uint8Array): number[] {
  if (value.length <= 255) return [code, value.length, ...value];
  const out: number[] = [];
  for (let i = 0; i < value.length; i += 255) {
    const part = value.subarray(i, i + 255);
    out.push(code, part.length, ...part);
  }
  return out;
}

function text(value: string): Uint8Array {
  return new TextEncoder().encode(value);
}

function isIpv4(ip: string): boolean {
  const parts = ip.split(".");
  return parts.length === 4 && parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255);
}

function u32(n: number): number[] {
  return [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
}

/** The dotted mask of a prefix length. */
export function maskOf(prefixLength: number): string {
  const m = prefixLength === 0 ? 0 : (0xffffffff << (32 - prefixLength)) >>> 0;
  return u32(m).join(".");
}

function ipBytes(ip: string): number[] {
  return ip.split(".").map(Number);
}

function ipString(b: Uint8Array): string {
  return [...b].join(".");
}
