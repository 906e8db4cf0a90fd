/**
 * What every binding's DHCP lease takes from the pod and the VMI, as KubeVirt's DHCP configurator does (pure):
 * the pod's name servers and search domains (the VMI's `subdomain` first, under the pod's longest service domain),
 * option 15 from the longest search domain, and the interface's `dhcpOptions`.
 */
import type { Interface } from "@kvt/api";
import type { DhcpExtraOptions } from "./dhcp.ts";

/** The lease's name service part. */
export interface LeaseDns {
  readonly dns: readonly string[];
  readonly searchDomains: readonly string[];
  /** Option 15, when there is any search domain. */
  readonly domainName?: string;
}

/**
 * The name service part of a lease from the pod's resolv.conf text (undefined: the pod has none) and the VMI's
 * `spec.subdomain` (KubeVirt's startDHCP: `<subdomain>.<longest *.svc.* search domain>` goes first, unless that
 * domain already starts with the subdomain).
 */
export function leaseDns(resolvConf: string | undefined, subdomain: string | undefined): LeaseDns {
  const { dns, search } = parseResolvConf(resolvConf ?? "");
  const serviceDomain = longest(search.filter((d) => d.includes(".svc.")));
  const searchDomains =
    subdomain && serviceDomain && !serviceDomain.startsWith(`${subdomain}.`)
      ? [`${subdomain}.${serviceDomain}`, ...search]
      : search;
  const domainName = longest(searchDomains);
  return { dns, searchDomains, ...(domainName ? { domainName } : {}) };
}

/** The interface's `dhcpOptions` as the DHCP server sends them (undefined: none set). */
export function dhcpExtraOf(iface: Pick<Interface, "dhcpOptions">): DhcpExtraOptions | undefined {
  const o = iface.dhcpOptions;
  if (!o) return undefined;
  return {
    ...(o.tftpServerName ? { tftpServerName: o.tftpServerName } : {}),
    ...(o.bootFileName ? { bootFileName: o.bootFileName } : {}),
    ...(o.ntpServers?.length ? { ntpServers: [...o.ntpServers] } : {}),
    ...(o.privateOptions?.length
      ? { privateOptions: o.privateOptions.map((p) => ({ option: p.option, value: p.value })) }
      : {}),
  };
}

/** The name servers and search domains of a resolv.conf (what the guest's DHCP lease carries). */
export function parseResolvConf(text: string): { dns: string[]; search: string[] } {
  const dns: string[] = [];
  let search: string[] = [];
  for (const line of text.split("\n")) {
    const [key, ...rest] = line.trim().split(/\s+/);
    if (key === "nameserver" && rest[0] && /^\d+\.\d+\.\d+\.\d+$/.test(rest[0])) dns.push(rest[0]);
    if (key === "search") search = rest.filter(Boolean);
  }
  return { dns, search };
}

/** The longest entry (the first of equals), as KubeVirt's GetDomainName picks it; "" for none. */
function longest(domains: readonly string[]): string {
  return domains.reduce((best, d) => (d.length > best.length ? d : best), "");
}
