/**
 * `spec.dnsPolicy` and `spec.dnsConfig` of a VMI, as KubeVirt's `validateDNSPolicy` and `validatePodDNSConfig`
 * (copied there from Kubernetes' pod validation) check them: `None` needs a dnsConfig with at least one nameserver;
 * at most 3 nameservers, each an IP; at most 6 search domains, 256 characters in all, each a DNS-1123 subdomain;
 * options need a name. The nameserver, search and option causes carry KubeVirt's bare field names.
 */
import { isIP } from "node:net";
import type { ValidationCause, VirtualMachineInstanceSpec } from "../types.ts";
import { CAUSE_TYPE, cause, type FieldPath } from "./causes.ts";
import { dns1123SubdomainErrors } from "./dns.ts";

const DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None", ""];
const MAX_NAMESERVERS = 3;
const MAX_SEARCH_PATHS = 6;
const MAX_SEARCH_LIST_CHARS = 256;

/** Go's `%s` of a []string: `[a b c]`. */
const goList = (values: readonly string[]) => `[${values.join(" ")}]`;

/** The DNS policy and configuration of a VMI spec at `field`. */
export function validateDnsSettings(field: FieldPath, spec: VirtualMachineInstanceSpec): ValidationCause[] {
  const policy = spec.dnsPolicy ?? "";
  const config = spec.dnsConfig;
  const causes: ValidationCause[] = [];
  if (!DNS_POLICIES.includes(policy)) {
    causes.push(
      cause(
        CAUSE_TYPE.notSupported,
        `DNSPolicy: ${policy} is not supported, valid values: ${goList(DNS_POLICIES)}`,
        field.child("dnsPolicy"),
      ),
    );
  }
  if (policy === "None") {
    if (!config) {
      const message = "must provide `dnsConfig` when `dnsPolicy` is None";
      return [...causes, cause(CAUSE_TYPE.required, message, field.child("dnsConfig"))];
    }
    if ((config.nameservers ?? []).length === 0) {
      const message = "must provide at least one DNS nameserver when `dnsPolicy` is None";
      return [...causes, cause(CAUSE_TYPE.required, message, "nameservers")];
    }
  }
  if (!config) return causes;
  const nameservers = config.nameservers ?? [];
  if (nameservers.length > MAX_NAMESERVERS) {
    const message = `must not have more than ${MAX_NAMESERVERS} nameservers: ${goList(nameservers)}`;
    causes.push(cause(CAUSE_TYPE.invalid, message, "nameservers"));
  }
  for (const ns of nameservers) {
    if (isIP(ns) === 0) causes.push(cause(CAUSE_TYPE.invalid, `must be valid IP address: ${ns}`, "nameservers"));
  }
  const searches = config.searches ?? [];
  if (searches.length > MAX_SEARCH_PATHS) {
    const message = `must not have more than ${MAX_SEARCH_PATHS} search paths`;
    causes.push(cause(CAUSE_TYPE.invalid, message, "searchDomains"));
  }
  if (searches.join(" ").length > MAX_SEARCH_LIST_CHARS) {
    const message = `must not have more than ${MAX_SEARCH_LIST_CHARS} characters (including spaces) in the search list`;
    causes.push(cause(CAUSE_TYPE.invalid, message, "searchDomains"));
  }
  for (const search of searches) {
    for (const e of dns1123SubdomainErrors(search)) causes.push(cause(CAUSE_TYPE.invalid, e, "searchDomains"));
  }
  for (const option of config.options ?? []) {
    if (!option.name) causes.push(cause(CAUSE_TYPE.invalid, "Option.Name must not be empty", "options"));
  }
  return causes;
}
