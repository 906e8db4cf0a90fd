/* eslint-disable @typescript-eslint/restrict-template-expressions -- FieldPath prints itself (toString) exactly as KubeVirt formats paths into its messages. */
/**
 * VMI networks and interfaces (KubeVirt `network/admitter`): one pod network, one source per network, unique names,
 * every network has an interface and every interface a network, exactly one binding, valid models and ports.
 */
import { INTERFACE_MODELS } from "../constants.ts";
import type { Interface, Network, ValidationCause, VirtualMachineInstanceSpec } from "../types.ts";
import { CAUSE_TYPE, cause, type FieldPath } from "./causes.ts";
import type { ClusterConfig } from "./validation-config.ts";

const notFound = (f: FieldPath, name: string): string => `${f} '${name}' not found.`;
const IFACE_NAME_RE = /^[A-Za-z0-9-_]+$/;
const PORT_NAME_RE = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

function validateNetworkSources(field: FieldPath, networks: Network[]): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const pods = networks.filter((n) => n.pod);
  const multusDefaults = networks.filter((n) => n.multus?.default);
  if (pods.length > 1) {
    causes.push(
      cause(
        CAUSE_TYPE.duplicate,
        `more than one interface is connected to a pod network in ${field.child("interfaces")}`,
        field.child("interfaces"),
      ),
    );
  }
  if (multusDefaults.length > 1)
    causes.push(cause(CAUSE_TYPE.invalid, "Multus CNI should only have one default network", field.child("networks")));
  if (pods.length > 0 && multusDefaults.length > 0) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        "Pod network cannot be defined when Multus default network is defined",
        field.child("networks"),
      ),
    );
  }
  networks.forEach((n, idx) => {
    const count = (n.pod ? 1 : 0) + (n.multus ? 1 : 0);
    if (count === 0)
      causes.push(cause(CAUSE_TYPE.required, "should have a network type", field.child("networks").index(idx)));
    else if (count > 1)
      causes.push(cause(CAUSE_TYPE.required, "should have only one network type", field.child("networks").index(idx)));
  });
  const badMultus = networks.findIndex((n) => n.multus && !n.multus.networkName);
  if (badMultus >= 0)
    causes.push(
      cause(
        CAUSE_TYPE.required,
        "CNI delegating plugin must have a networkName",
        field.child("networks").index(badMultus),
      ),
    );
  return causes;
}

function validateBinding(
  field: FieldPath,
  idx: number,
  iface: Interface,
  net: Network | undefined,
  config: ClusterConfig,
): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const f = field.child("domain", "devices", "interfaces").index(idx);
  const bindings = [iface.bridge, iface.masquerade, iface.sriov, iface.passt, iface.binding].filter(
    (b) => b !== undefined && b !== null,
  );
  if (bindings.length !== 1) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `logical ${iface.name} interface must have exactly one binding method or binding plugin`,
        f,
      ),
    );
  }
  if (iface.masquerade && !net?.pod)
    causes.push(cause(CAUSE_TYPE.invalid, "Masquerade interface only implemented with pod network", f.child("name")));
  if (iface.bridge && net?.pod && !config.permitBridgeInterfaceOnPodNetwork) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        "Bridge on pod network configuration is not enabled under kubevirt-config",
        f.child("name"),
      ),
    );
  }
  return causes;
}

function validateInterfaceFields(
  field: FieldPath,
  idx: number,
  iface: Interface,
  net: Network | undefined,
): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const f = field.child("domain", "devices", "interfaces").index(idx);
  if (!IFACE_NAME_RE.test(iface.name)) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        "Network interface name can only contain alphabetical characters, numbers, dashes (-) or underscores (_)",
        f.child("name"),
      ),
    );
  }
  if (iface.model && !(INTERFACE_MODELS as readonly string[]).includes(iface.model)) {
    causes.push(
      cause(
        CAUSE_TYPE.notSupported,
        `interface ${f.child("name")} uses model ${iface.model} that is not supported.`,
        f.child("model"),
      ),
    );
  }
  if (iface.macAddress && !/^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$/.test(iface.macAddress)) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `interface ${f.child("name")} has malformed MAC address (${iface.macAddress}).`,
        f.child("macAddress"),
      ),
    );
  }
  if (!net?.pod || !iface.ports) return causes;
  const names = new Set<string>();
  iface.ports.forEach((port, pi) => {
    const pf = f.child("ports").index(pi);
    if (port.name) {
      if (names.has(port.name))
        causes.push(cause(CAUSE_TYPE.duplicate, `Duplicate name of the port: ${port.name}`, pf.child("name")));
      if (port.name.length > 15 || !PORT_NAME_RE.test(port.name) || !/[a-z]/.test(port.name)) {
        causes.push(cause(CAUSE_TYPE.invalid, `Invalid name of the port: ${port.name}`, pf.child("name")));
      }
      names.add(port.name);
    }
    if (!port.port) causes.push(cause(CAUSE_TYPE.required, "Port field is mandatory.", pf.child("port")));
    if (port.port < 0 || port.port >= 65536)
      causes.push(cause(CAUSE_TYPE.invalid, "Port field must be in range 0 < x < 65536.", pf.child("port")));
    if (port.protocol && port.protocol !== "TCP" && port.protocol !== "UDP") {
      causes.push(cause(CAUSE_TYPE.invalid, "Unknown protocol, only TCP or UDP allowed", pf.child("protocol")));
    }
  });
  return causes;
}

/**
 * KubeVirt's validateDHCPOptions: private options unique and within 224-254 (reported on the spec's path, as
 * KubeVirt does), NTP servers IPv4 addresses.
 */
function validateDhcpOptions(field: FieldPath, idx: number, iface: Interface): ValidationCause[] {
  const options = iface.dhcpOptions;
  if (!options) return [];
  const causes: ValidationCause[] = [];
  const privateOptions = options.privateOptions ?? [];
  if (new Set(privateOptions.map((p) => p.option)).size < privateOptions.length) {
    causes.push(cause(CAUSE_TYPE.invalid, "Found Duplicates: you have provided duplicate DHCPPrivateOptions", field));
  }
  for (const p of privateOptions) {
    if (!(p.option >= 224 && p.option <= 254)) {
      causes.push(
        cause(CAUSE_TYPE.invalid, "provided DHCPPrivateOptions are out of range, must be in range 224 to 254", field),
      );
    }
  }
  (options.ntpServers ?? []).forEach((ip, i) => {
    if (!isIpv4(ip)) {
      causes.push(
        cause(
          CAUSE_TYPE.invalid,
          "NTP servers must be a list of valid IPv4 addresses.",
          field.child("domain", "devices", "interfaces").index(idx).child("dhcpOptions", "ntpServers").index(i),
        ),
      );
    }
  });
  return causes;
}

/** Go's net.ParseIP(ip).To4() != nil for the forms a manifest carries (dotted quad, or IPv4-mapped IPv6). */
function isIpv4(ip: string): boolean {
  const quad = ip.startsWith("::ffff:") ? ip.slice(7) : ip;
  const parts = quad.split(".");
  return parts.length === 4 && parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255);
}

/** All network and interface rules, in KubeVirt's order. */
export function validateNetworks(
  field: FieldPath,
  spec: VirtualMachineInstanceSpec,
  config: ClusterConfig,
): ValidationCause[] {
  const networks = spec.networks ?? [];
  const ifaces = spec.domain.devices.interfaces ?? [];
  const byName = new Map(networks.map((n) => [n.name, n]));
  const ifaceNames = new Set(ifaces.map((i) => i.name));
  const causes = validateNetworkSources(field, networks);
  ifaces.forEach((iface, idx) => {
    causes.push(...validateBinding(field, idx, iface, byName.get(iface.name), config));
  });
  const seenNets = new Set<string>();
  networks.forEach((n, idx) => {
    if (seenNets.has(n.name)) {
      causes.push(
        cause(
          CAUSE_TYPE.duplicate,
          `Network with name "${n.name}" already exists, every network must have a unique name`,
          field.child("networks").index(idx).child("name"),
        ),
      );
    }
    seenNets.add(n.name);
  });
  networks.forEach((n, idx) => {
    const f = field.child("networks").index(idx).child("name");
    if (!ifaceNames.has(n.name)) causes.push(cause(CAUSE_TYPE.required, notFound(f, n.name), f));
  });
  const seenIfaces = new Set<string>();
  ifaces.forEach((iface, idx) => {
    const f = field.child("domain", "devices", "interfaces").index(idx).child("name");
    if (seenIfaces.has(iface.name))
      causes.push(cause(CAUSE_TYPE.duplicate, "Only one interface can be connected to one specific network", f));
    seenIfaces.add(iface.name);
  });
  ifaces.forEach((iface, idx) => {
    const f = field.child("domain", "devices", "interfaces").index(idx).child("name");
    if (!byName.has(iface.name)) causes.push(cause(CAUSE_TYPE.invalid, notFound(f, iface.name), f));
  });
  ifaces.forEach((iface, idx) => {
    causes.push(...validateInterfaceFields(field, idx, iface, byName.get(iface.name)));
    causes.push(...validateDhcpOptions(field, idx, iface));
  });
  return causes;
}
