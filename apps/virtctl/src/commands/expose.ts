/**
 * `virtctl expose vm|vmi NAME --name SVC [--port N] [...]`: create a Service selecting the VM's launcher pod by
 * `vm.kubevirt.io/name`, owned by the VM/VMI, with ports from `--port` or from the pod-network interface's ports
 * (KubeVirt `pkg/virtctl/expose`).
 */
import { createHash } from "node:crypto";
import { errorMessage } from "@kvt/kube";
import { type Command, CommandError, type CommandInput, intFlag } from "../cli/command.ts";
import { corePath, kubevirtPath } from "../kube/paths.ts";

interface Owner {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; uid: string };
  spec?: Record<string, unknown>;
}

interface ServicePort {
  name?: string;
  protocol: string;
  port: number;
  /** Unset: the API server defaults it to `port`. */
  targetPort?: number | string;
}

/**
 * KubeVirt's `CalculateVirtualMachineInstanceID`: the name when it fits a label (63), else its first 54
 * characters, "-", and the first 8 hex digits of its SHA-1.
 */
export function vmiIdLabelValue(name: string): string {
  if (name.length <= 63) return name;
  const hash = createHash("sha1").update(name).digest("hex").slice(0, 8);
  return `${name.slice(0, 54)}-${hash}`;
}

function vmiSpecOf(owner: Owner, isVm: boolean): Record<string, unknown> | undefined {
  if (!isVm) return owner.spec;
  return (owner.spec?.template as { spec?: Record<string, unknown> } | undefined)?.spec;
}

/** Ports of the interface bound to the pod network (`podNetworkPorts`): named `port-<n>`, target = port. */
export function podNetworkPorts(spec: Record<string, unknown> | undefined): ServicePort[] {
  const networks = (spec?.networks ?? []) as Array<{ name: string; pod?: unknown }>;
  const podNet = networks.find((n) => n.pod !== undefined);
  if (!podNet) return [];
  const domain = spec?.domain as
    | {
        devices?: {
          interfaces?: Array<{ name: string; ports?: Array<{ name?: string; port: number; protocol?: string }> }>;
        };
      }
    | undefined;
  const iface = domain?.devices?.interfaces?.find((i) => i.name === podNet.name);
  return (iface?.ports ?? []).map((p, i) => ({ name: `port-${i + 1}`, protocol: p.protocol ?? "TCP", port: p.port }));
}

function oneOf(value: string, allowed: readonly string[], what: string): string {
  const hit = allowed.find((a) => a.toLowerCase() === value.toLowerCase());
  if (!hit) throw new CommandError(`unknown ${what}: ${value}`);
  return hit;
}

function serviceSpecFlags(input: CommandInput): Record<string, unknown> {
  const type = String(input.values.type ?? "ClusterIP");
  if (type.toLowerCase() === "externalname") throw new CommandError(`type: ${type} not supported`);
  const spec: Record<string, unknown> = {
    type: oneOf(type, ["ClusterIP", "NodePort", "LoadBalancer"], "service type"),
  };
  if (typeof input.values["cluster-ip"] === "string") spec.clusterIP = input.values["cluster-ip"];
  if (typeof input.values["external-ip"] === "string") spec.externalIPs = [input.values["external-ip"]];
  const family = input.values["ip-family"];
  if (typeof family === "string" && family !== "") {
    spec.ipFamilies = family.split(",").map((f) => oneOf(f, ["IPv4", "IPv6"], "IP family"));
  }
  const policy = input.values["ip-family-policy"];
  if (typeof policy === "string" && policy !== "") {
    spec.ipFamilyPolicy = oneOf(policy, ["SingleStack", "PreferDualStack", "RequireDualStack"], "IP family policy");
  } else if (Array.isArray(spec.ipFamilies) && spec.ipFamilies.length > 1) {
    spec.ipFamilyPolicy = "PreferDualStack"; // two families and no policy: KubeVirt asks for dual stack
  }
  return spec;
}

/** The `expose` command. */
export const exposeCommand: Command = {
  name: "expose",
  use: "expose (TYPE NAME)",
  short:
    "Expose a virtual machine instance, virtual machine, or virtual machine instance replica set as a new service.",
  long: "Looks up a virtual machine instance or virtual machine by name and use its selector as the selector for a new service on the specified port.\nPossible types are (case insensitive, both single and plurant forms): virtualmachineinstance (vmi), virtualmachine (vm)",
  example:
    "  # Expose SSH to a virtual machine instance called 'myvm' on each node via a NodePort service:\n  virtctl expose vmi myvm --port=22 --name=myvm-ssh --type=NodePort",
  flags: {
    name: { type: "string", help: "Name of the service created for the exposure of the VM." },
    "cluster-ip": {
      type: "string",
      help: "ClusterIP to be assigned to the service. Leave empty to auto-allocate, or set to 'None' to create a headless service.",
    },
    "external-ip": {
      type: "string",
      help: "Additional external IP address (not managed by the cluster) to accept for the service.",
    },
    port: { type: "string", help: "The port that the service should serve on.", default: "0" },
    protocol: {
      type: "string",
      help: "The network protocol for the service to be created.",
      default: "TCP",
      values: ["TCP", "UDP", "SCTP"],
    },
    "target-port": {
      type: "string",
      help: "Name or number for the port on the VM that the service should direct traffic to. Optional.",
    },
    type: {
      type: "string",
      help: "Type for this service: ClusterIP, NodePort, or LoadBalancer.",
      default: "ClusterIP",
      values: ["ClusterIP", "NodePort", "LoadBalancer"],
    },
    "port-name": { type: "string", help: "Name of the port. Optional." },
    "ip-family": {
      type: "string",
      help: "IP family over which the service will be exposed. Valid values are 'IPv4', 'IPv6', 'IPv4,IPv6' or 'IPv6,IPv4'",
      values: ["IPv4", "IPv6", "IPv4,IPv6", "IPv6,IPv4"],
    },
    "ip-family-policy": {
      type: "string",
      help: "IP family policy: 'SingleStack', 'PreferDualStack' or 'RequireDualStack'",
      values: ["SingleStack", "PreferDualStack", "RequireDualStack"],
    },
  },
  args: 2,
  argWords: ["vm", "vmi"],
  async run(input, ctx) {
    const [rawType = "", name = ""] = input.args;
    const serviceName = input.values.name;
    if (typeof serviceName !== "string" || serviceName === "")
      throw new CommandError('required flag(s) "name" not set');
    const type = rawType.toLowerCase();
    const isVm = ["vm", "vms", "virtualmachine", "virtualmachines"].includes(type);
    const isVmi = ["vmi", "vmis", "virtualmachineinstance", "virtualmachineinstances"].includes(type);
    if (!isVm && !isVmi) throw new CommandError(`unsupported resource type: ${rawType}`);
    const protocol = oneOf(String(input.values.protocol ?? "TCP"), ["TCP", "UDP"], "protocol");
    const spec = serviceSpecFlags(input);
    const client = ctx.client();
    let owner: Owner;
    try {
      owner = (await client.request({
        method: "GET",
        path: kubevirtPath(client.namespace, isVm ? "virtualmachines" : "virtualmachineinstances", name),
      })) as Owner;
    } catch (error) {
      throw new CommandError(
        `error fetching ${isVm ? "VirtualMachine" : "VirtualMachineInstance"}: ${errorMessage(error)}`,
        { cause: error },
      );
    }
    let ports = podNetworkPorts(vmiSpecOf(owner, isVm));
    const port = intFlag(input, "port", 0);
    if (port !== 0) {
      const target = input.values["target-port"];
      const targetPort =
        typeof target === "string" && target !== "" ? (/^\d+$/.test(target) ? Number(target) : target) : port;
      const portName = input.values["port-name"];
      ports = [{ ...(typeof portName === "string" && portName ? { name: portName } : {}), protocol, port, targetPort }];
    }
    if (ports.length === 0) throw new CommandError("couldn't find port via --port flag or introspection");
    const service = {
      apiVersion: "v1",
      kind: "Service",
      // No owner: like KubeVirt's, the Service is the user's and outlives the VM/VMI it was made for.
      metadata: { name: serviceName, namespace: client.namespace },
      spec: { ...spec, ports, selector: { "vm.kubevirt.io/name": vmiIdLabelValue(name) } },
    };
    try {
      await client.request({ method: "POST", path: corePath(client.namespace, "services"), body: service });
    } catch (error) {
      throw new CommandError(`service creation failed: ${errorMessage(error)}`, { cause: error });
    }
    ctx.stdout.write(`Service ${serviceName} successfully created for ${rawType} ${name}\n`);
  },
};
