/**
 * The local cluster's Service routing as one nftables table in the host's network namespace (pure: objects in, an
 * `nft -f` script out), in the shape of kube-proxy's nftables mode:
 *
 *   host process ──> nat-output ─┐                              ┌─> filter-output: a ClusterIP left undNATed
 *   pod (bridge) ──> nat-prerouting (iif bridge) ─┤             │   (no ready endpoint, no Service) is rejected
 *                                  services: ClusterIP . proto . port -> svc-<ns>/<name>/<proto>/<port>
 *                                  svc-...: numgen random mod N vmap -> ep-... (one of the ready endpoints)
 *                                  ep-...: dnat to podIP:targetPort
 *   nat-postrouting: out through the bridge and DNATed from a ClusterIP -> masquerade to the bridge's address, so
 *   the reply comes back through the host (a pod reaching itself or a neighbour on the same bridge, a host socket)
 *   filter-forward: nothing that came in through the bridge leaves through another interface
 *   filter-input: a TCP segment from the bridge that is neither SYN nor RST and has no flow is dropped, not answered:
 *   it is a reply from an endpoint a flow has not been DNATed to yet (a migrated VM answering from its new pod before
 *   the client's next segment re-picks the flow, once virt-handler deleted the old one: its --clear-migrated-flows);
 *   the host's reset would kill the guest's connection
 *
 * The table is `ip <name>` (the cluster's bridge name, so two clusters on one host never share one); a script
 * replaces it whole in one transaction. Everything that reaches the script comes from API objects, so each value is
 * checked first: addresses must be IPv4 (ClusterIPs inside the service range, endpoints inside the pod network: no
 * Service can send traffic off this machine), ports integers 1..65535, protocols TCP/UDP/SCTP; anything else is
 * left out and reported.
 */

/** Where the rules apply. */
export interface ProxyNetwork {
  /** The nftables table's name (ip family). */
  readonly table: string;
  /** The pod network's bridge. */
  readonly bridge: string;
  /** The pods' IPv4 CIDR: the only place endpoints may be. */
  readonly clusterCidr: string;
  /** The Services' ClusterIP range. */
  readonly serviceCidr: string;
}

/** A Service as the proxy reads it. */
export interface ServiceInfo {
  readonly namespace: string;
  readonly name: string;
  readonly clusterIP: string;
  readonly ports: readonly { readonly name: string; readonly port: number; readonly protocol: string }[];
}

/** An EndpointSlice as the proxy reads it. */
export interface SliceInfo {
  readonly namespace: string;
  /** Its `kubernetes.io/service-name` label. */
  readonly serviceName: string;
  readonly ports: readonly { readonly name: string; readonly port: number; readonly protocol: string }[];
  readonly endpoints: readonly {
    readonly addresses: readonly string[];
    readonly ready: boolean;
    readonly serving: boolean;
    readonly terminating: boolean;
  }[];
}

/** One Service port and where its traffic goes. */
export interface ServicePortRoute {
  /** `<ns>/<name>/<protocol>/<port name or number>`. */
  readonly id: string;
  readonly clusterIP: string;
  readonly protocol: "tcp" | "udp" | "sctp";
  readonly port: number;
  /** `ip:port` of each endpoint traffic is spread over (none: the port is rejected). */
  readonly backends: readonly string[];
  /**
   * The address of every endpoint still serving this port (ready, or serving while terminating), sorted: a flow to
   * one of them may go on; a flow to an address that left this set has no server any more (conntrack.ts).
   */
  readonly serving: readonly string[];
}

const PROTOCOLS: Readonly<Record<string, ServicePortRoute["protocol"]>> = { TCP: "tcp", UDP: "udp", SCTP: "sctp" };

function ipv4(ip: string): number | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  if (!m) return undefined;
  const p = m.slice(1).map(Number);
  if (p.some((x) => x > 255)) return undefined;
  return ((p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]) >>> 0;
}

/** True when `ip` is an IPv4 address inside `cidr`. */
export function inCidr(ip: string, cidr: string): boolean {
  const [base, len] = cidr.split("/");
  const a = ipv4(ip);
  const b = ipv4(base ?? "");
  const bits = Number(len);
  if (a === undefined || b === undefined || !Number.isInteger(bits) || bits < 0 || bits > 32) return false;
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return (a & mask) >>> 0 === (b & mask) >>> 0;
}

const validPort = (p: unknown): p is number => typeof p === "number" && Number.isInteger(p) && p > 0 && p < 65536;

/** One Service port's backends (`ip:port`, with kube-proxy's terminating fallback) and serving addresses. */
function portEndpoints(
  net: ProxyNetwork,
  svc: ServiceInfo,
  port: ServiceInfo["ports"][number],
  slices: readonly SliceInfo[],
  problems: (message: string) => void,
): { backends: string[]; serving: string[] } {
  const ready: string[] = [];
  const fallback: string[] = [];
  const serving = new Set<string>();
  for (const slice of slices) {
    const target = slice.ports.find((p) => p.name === port.name && p.protocol === port.protocol);
    if (!target || !validPort(target.port)) continue;
    for (const ep of slice.endpoints) {
      const address = ep.addresses[0] ?? "";
      if (!inCidr(address, net.clusterCidr)) {
        problems(`Service ${svc.namespace}/${svc.name}: endpoint ${address} is outside the pod network`);
        continue;
      }
      const backend = `${address}:${target.port}`;
      if (ep.ready) ready.push(backend);
      else if (ep.serving && ep.terminating) fallback.push(backend);
      if (ep.ready || ep.serving) serving.add(address);
    }
  }
  return { backends: [...new Set(ready.length > 0 ? ready : fallback)].sort(), serving: [...serving].sort() };
}

/**
 * The routes of every Service port (pure). Backends are the ready endpoints of the Service's slices whose port of
 * the same name and protocol is known; when none is ready, the serving ones that are terminating (kube-proxy's
 * fallback). `problems` receives what was left out and why.
 */
export function serviceRoutes(
  net: ProxyNetwork,
  services: readonly ServiceInfo[],
  slices: readonly SliceInfo[],
  problems: (message: string) => void = () => undefined,
): ServicePortRoute[] {
  const out: ServicePortRoute[] = [];
  for (const svc of services) {
    if (svc.clusterIP === "None" || svc.clusterIP === "") continue;
    if (!inCidr(svc.clusterIP, net.serviceCidr)) {
      problems(`Service ${svc.namespace}/${svc.name}: clusterIP ${svc.clusterIP} is outside ${net.serviceCidr}`);
      continue;
    }
    const mine = slices.filter((s) => s.namespace === svc.namespace && s.serviceName === svc.name);
    for (const port of svc.ports) {
      const protocol = PROTOCOLS[port.protocol];
      if (!protocol || !validPort(port.port)) {
        problems(`Service ${svc.namespace}/${svc.name}: port ${String(port.port)}/${port.protocol} is not routable`);
        continue;
      }
      const { backends, serving } = portEndpoints(net, svc, port, mine, problems);
      const id = `${svc.namespace}/${svc.name}/${protocol}/${port.name || String(port.port)}`;
      out.push({ id, clusterIP: svc.clusterIP, protocol, port: port.port, backends, serving });
    }
  }
  return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** A chain name from API names: nft identifiers take letters, digits and `/ - _ .` only. */
function chainName(prefix: string, id: string): string {
  return `${prefix}-${id.replace(/[^a-zA-Z0-9/_.-]/g, "_")}`;
}

function quoted(name: string): string {
  if (!/^[a-zA-Z0-9_.-]+$/.test(name)) throw new TypeError(`"${name}" is not a valid interface or table name`);
  return `"${name}"`;
}

/** The `nft -f` script that replaces the table with these routes (atomic: one transaction). */
export function renderRuleset(net: ProxyNetwork, routes: readonly ServicePortRoute[]): string {
  const t = net.table;
  quoted(t);
  const br = quoted(net.bridge);
  const svc = net.serviceCidr;
  const lines = [
    `table ip ${t}`,
    `delete table ip ${t}`,
    `table ip ${t} {`,
    "\tchain nat-prerouting {",
    "\t\ttype nat hook prerouting priority dstnat; policy accept;",
    `\t\tiifname ${br} jump services`,
    "\t}",
    "\tchain nat-output {",
    // nft 1.0 names dstnat only for prerouting: -100 is its value (NF_IP_PRI_NAT_DST).
    "\t\ttype nat hook output priority -100; policy accept;",
    "\t\tjump services",
    "\t}",
    "\tchain nat-postrouting {",
    "\t\ttype nat hook postrouting priority srcnat; policy accept;",
    `\t\toifname ${br} ct original ip daddr ${svc} masquerade`,
    "\t}",
    "\tchain filter-forward {",
    "\t\ttype filter hook forward priority filter; policy accept;",
    `\t\tiifname ${br} oifname != ${br} drop`,
    `\t\tip daddr ${svc} reject`,
    "\t}",
    "\tchain filter-input {",
    "\t\ttype filter hook input priority filter; policy accept;",
    `\t\tiifname ${br} meta l4proto tcp ct state new tcp flags & (syn | rst) == 0 drop`,
    "\t}",
    "\tchain filter-output {",
    "\t\ttype filter hook output priority filter; policy accept;",
    `\t\tip daddr ${svc} reject`,
    "\t}",
    "\tchain services {",
  ];
  const chains: string[] = [];
  for (const r of routes) {
    if (r.backends.length === 0) continue;
    const svcChain = chainName("svc", r.id);
    lines.push(`\t\tip daddr ${r.clusterIP} meta l4proto ${r.protocol} th dport ${r.port} goto ${svcChain}`);
    const eps = r.backends.map((b) => chainName("ep", `${r.id}/${b.replace(":", "/")}`));
    chains.push(`\tchain ${svcChain} {`);
    if (eps.length === 1) chains.push(`\t\tgoto ${eps[0]}`);
    else
      chains.push(`\t\tnumgen random mod ${eps.length} vmap { ${eps.map((e, i) => `${i} : goto ${e}`).join(", ")} }`);
    chains.push("\t}");
    for (const [i, b] of r.backends.entries())
      chains.push(`\tchain ${eps[i]} {`, `\t\tmeta l4proto ${r.protocol} dnat to ${b}`, "\t}");
  }
  lines.push("\t}", ...chains, "}");
  return `${lines.join("\n")}\n`;
}

/** The `nft -f` script that removes the table (an error when it does not exist; callers ignore that). */
export function deleteTableScript(table: string): string {
  quoted(table);
  return `delete table ip ${table}\n`;
}
