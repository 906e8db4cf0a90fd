/**
 * `virtctl create vm|instancetype|preference [flags]`: print a manifest (KubeVirt `pkg/virtctl/create/vm`,
 * `create/instancetype`, `create/preference`). Nothing is sent
 * to the cluster; pipe it to `kubectl create -f -`. Defaults as KubeVirt's: a name `vm-<5 random>`, runStrategy
 * Always, terminationGracePeriodSeconds 180, memory.guest 512Mi unless an instancetype sizes the VM.
 *
 * Covered: --name, --run-strategy, --termination-grace-period, --memory, --instancetype and --preference
 * (`[kind/]name`), --volume-containerdisk and --volume-pvc (`src:...,name:...,bootorder:N`), --cloud-init-user-data
 * (base64). Each volume flag is taken once (the CLI keeps the last value of a repeated flag). Not covered: inference
 * from volumes, DataVolume imports, sysprep, access credentials, cloud-init users/keys.
 */
import { randomInt } from "node:crypto";
import { type Command, CommandError, type CommandInput, intFlag } from "../cli/command.ts";

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** `failed to parse "--<flag>" flag: <message>`, as KubeVirt's `params.FlagErr`. */
function flagErr(flag: string, message: string): CommandError {
  return new CommandError(`failed to parse "--${flag}" flag: ${message}`);
}

/** `key:value,key:value` (a value may hold colons), with only `known` keys (KubeVirt `params.Map`). */
export function parseParams(flag: string, text: string, known: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  const unknown: string[] = [];
  for (const param of text.split(",")) {
    const at = param.indexOf(":");
    if (at < 0) throw flagErr(flag, `params need to have at least one colon: ${param}`);
    const [key, value] = [param.slice(0, at), param.slice(at + 1)];
    if (known.includes(key.toLowerCase())) out[key.toLowerCase()] = value;
    else unknown.push(param);
  }
  if (unknown.length > 0) throw flagErr(flag, `unknown param(s): ${unknown.join(",")}`);
  return out;
}

/** `[kind/]name` (KubeVirt `params.SplitPrefixedName`). */
function splitPrefixed(flag: string, text: string): [string, string] {
  const parts = text.split("/");
  if (parts.length === 1) return ["", parts[0] ?? ""];
  if (parts.length === 2) return [parts[0] ?? "", parts[1] ?? ""];
  throw flagErr(flag, `invalid count ${parts.length - 1} of slashes in prefix/name`);
}

function matcher(flag: string, value: string, kinds: readonly [string, string]): Record<string, Json> {
  const [rawKind, name] = splitPrefixed(flag, value);
  const kind = rawKind.toLowerCase();
  if (kind !== "" && !kinds.includes(kind)) {
    throw flagErr(flag, `invalid ${flag} kind "${kind}", supported values are: ${kinds[0]}, ${kinds[1]}`);
  }
  return kind ? { kind, name } : { name };
}

const RUN_STRATEGIES = ["Always", "Manual", "Halted", "Once", "RerunOnFailure"] as const;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

interface Template {
  domain: { devices: { disks?: Json[] }; memory?: { guest: string }; resources: Record<string, never> };
  terminationGracePeriodSeconds: number;
  volumes?: Json[];
}

function addVolume(
  flag: string,
  spec: Template,
  name: string,
  source: Record<string, Json>,
  bootOrders: Set<number>,
  bootorder?: string,
): void {
  if (!DNS1123_LABEL.test(name) || name.length > 63) {
    throw flagErr(
      flag,
      `invalid name "${name}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character`,
    );
  }
  if (spec.volumes?.some((v) => (v as { name?: string }).name === name)) {
    throw flagErr(flag, `there is already a volume with name "${name}"`);
  }
  spec.volumes ??= [];
  spec.volumes.push({ name, ...source });
  if (bootorder === undefined) return;
  const order = Number(bootorder);
  if (!/^\d+$/.test(bootorder)) throw flagErr(flag, `failed to parse param "bootorder": invalid syntax`);
  if (order === 0) throw flagErr(flag, "bootorder must be greater than 0");
  if (bootOrders.has(order)) throw flagErr(flag, `bootorder ${order} was specified multiple times`);
  bootOrders.add(order);
  spec.domain.devices.disks ??= [];
  spec.domain.devices.disks.push({ bootOrder: order, name });
}

/** The VM manifest `virtctl create vm` prints for these flag values. */
export function createVmManifest(values: CommandInput["values"], name: string): Record<string, Json> {
  const str = (k: string): string | undefined => (typeof values[k] === "string" ? values[k] : undefined);
  const memory = str("memory") ?? "512Mi";
  if (str("memory") !== undefined && str("instancetype") !== undefined) {
    throw new CommandError(
      "if any flags in the group [memory instancetype infer-instancetype infer-instancetype-from] are set none of the others can be; [instancetype memory] were all set",
    );
  }
  const input = { args: [], values } as CommandInput;
  const spec: Template = {
    domain: { devices: {}, memory: { guest: memory }, resources: {} },
    terminationGracePeriodSeconds: intFlag(input, "termination-grace-period", 180),
  };
  const vmSpec: Record<string, Json> = {};
  const rs = str("run-strategy") ?? "Always";
  const runStrategy = RUN_STRATEGIES.find((s) => s.toLowerCase() === rs.toLowerCase());
  if (!runStrategy) {
    throw flagErr("run-strategy", `invalid run strategy "${rs}", supported values are: ${RUN_STRATEGIES.join(", ")}`);
  }
  vmSpec.runStrategy = runStrategy;
  const it = str("instancetype");
  if (it !== undefined) {
    vmSpec.instancetype = matcher("instancetype", it, [
      "virtualmachineinstancetype",
      "virtualmachineclusterinstancetype",
    ]);
    delete spec.domain.memory;
  }
  const pref = str("preference");
  if (pref !== undefined) {
    vmSpec.preference = matcher("preference", pref, ["virtualmachinepreference", "virtualmachineclusterpreference"]);
  }
  const bootOrders = new Set<number>();
  const cd = str("volume-containerdisk");
  if (cd !== undefined) {
    const p = parseParams("volume-containerdisk", cd, ["name", "src", "bootorder"]);
    if (!p.src) throw flagErr("volume-containerdisk", "src must be specified");
    const volName = p.name || `${name}-containerdisk-0`;
    addVolume("volume-containerdisk", spec, volName, { containerDisk: { image: p.src } }, bootOrders, p.bootorder);
  }
  const pvc = str("volume-pvc");
  if (pvc !== undefined) {
    const p = parseParams("volume-pvc", pvc, ["name", "src", "bootorder"]);
    if (!p.src) throw flagErr("volume-pvc", "src must be specified");
    const [ns, claim] = splitPrefixed("volume-pvc", p.src);
    if (ns !== "") throw flagErr("volume-pvc", `not allowed to specify namespace of pvc "${claim}"`);
    const source = { persistentVolumeClaim: { claimName: claim } };
    addVolume("volume-pvc", spec, p.name || claim, source, bootOrders, p.bootorder);
  }
  const userData = str("cloud-init-user-data");
  if (userData !== undefined) {
    if (spec.volumes?.some((v) => (v as { name?: string }).name === "cloudinitdisk")) {
      throw new CommandError('there is already a volume with name "cloudinitdisk"');
    }
    spec.volumes ??= [];
    spec.volumes.push({ cloudInitNoCloud: { userDataBase64: userData }, name: "cloudinitdisk" });
  }
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachine",
    metadata: { creationTimestamp: null, name },
    spec: {
      ...vmSpec,
      template: { metadata: { creationTimestamp: null }, spec: spec as unknown as Json },
    },
    status: {},
  };
}

function scalar(v: string | number | boolean | null): string {
  if (typeof v !== "string") return String(v);
  const plain =
    /^[A-Za-z0-9_./][A-Za-z0-9_./:@+-]*$/.test(v) && !/^(true|false|null|yes|no|on|off|~|[-+.\d][\d.eE+-]*)$/i.test(v);
  return plain && !v.includes(": ") ? v : JSON.stringify(v);
}

/** YAML as sigs.k8s.io/yaml prints a Go object: keys sorted, two-space indent, lists not indented under their key. */
export function toYaml(value: Json, indent = ""): string {
  if (Array.isArray(value)) {
    if (value.length === 0) return " []\n";
    return `\n${value.map((item) => `${indent}-${toYaml(item, `${indent}  `).replace(/^\n\s*/, " ")}`).join("")}`;
  }
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    if (keys.length === 0) return " {}\n";
    const body = keys
      .map((k) => {
        const child = value[k];
        const nested = Array.isArray(child) ? toYaml(child, indent) : toYaml(child, `${indent}  `);
        return `${indent}${k}:${nested}`;
      })
      .join("");
    return `\n${body}`;
  }
  return ` ${scalar(value)}\n`;
}

/** `virtctl create instancetype`: a (Cluster)Instancetype of `--cpu` vCPUs and `--memory` (both required). */
export function createInstancetypeManifest(values: CommandInput["values"], suffix: string): Record<string, Json> {
  const missing = ["cpu", "memory"].filter((f) => typeof values[f] !== "string");
  if (missing.length > 0) throw new CommandError(`required flag(s) ${missing.map((f) => `"${f}"`).join(", ")} not set`);
  const cpu = intFlag({ args: [], values }, "cpu", 0);
  if (cpu <= 0) throw new CommandError("cpu value must be greater than zero");
  const memory = String(values.memory);
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$/.test(memory)) {
    throw new CommandError(
      "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    );
  }
  const spec: Record<string, Json> = { cpu: { guest: cpu }, memory: { guest: memory } };
  const policy = values.iothreadspolicy;
  if (typeof policy === "string") {
    if (policy !== "auto" && policy !== "shared") {
      throw flagErr("iothreadspolicy", "IOThread must be of value auto or shared");
    }
    spec.ioThreadsPolicy = policy;
  }
  const namespaced = values.namespaced === true;
  const name = typeof values.name === "string" ? values.name : `${namespaced ? "" : "cluster"}instancetype-${suffix}`;
  return {
    apiVersion: "instancetype.kubevirt.io/v1beta1",
    kind: namespaced ? "VirtualMachineInstancetype" : "VirtualMachineClusterInstancetype",
    metadata: { creationTimestamp: null, name },
    spec,
  };
}

/** `virtctl create preference`: a (Cluster)Preference with the given topology, storage class and machine type. */
export function createPreferenceManifest(values: CommandInput["values"], suffix: string): Record<string, Json> {
  const spec: Record<string, Json> = {};
  const topology = values["cpu-topology"];
  if (typeof topology === "string") {
    if (!["sockets", "cores", "threads", "spread"].includes(topology)) {
      throw flagErr("cpu-topology", "CPU topology must have a value of sockets, cores, threads or spread");
    }
    spec.cpu = { preferredCPUTopology: topology };
  }
  if (typeof values["machine-type"] === "string") spec.machine = { preferredMachineType: values["machine-type"] };
  if (typeof values["volume-storage-class"] === "string") {
    spec.volumes = { preferredStorageClassName: values["volume-storage-class"] };
  }
  const namespaced = values.namespaced === true;
  const name = typeof values.name === "string" ? values.name : `${namespaced ? "" : "cluster"}preference-${suffix}`;
  return {
    apiVersion: "instancetype.kubevirt.io/v1beta1",
    kind: namespaced ? "VirtualMachinePreference" : "VirtualMachineClusterPreference",
    metadata: { creationTimestamp: null, name },
    spec,
  };
}

function randomSuffix(): string {
  const alphabet = "bcdfghjklmnpqrstvwxz2456789"; // apimachinery rand.String's alphabet
  return Array.from({ length: 5 }, () => alphabet[randomInt(alphabet.length)]).join("");
}

/** `virtctl create vm|instancetype|preference`. */
export const createCommand: Command = {
  name: "create",
  use: "create vm|instancetype|preference",
  short: "Create a manifest for the specified Kind.",
  long: "Create a VirtualMachine, (Cluster)Instancetype or (Cluster)Preference manifest.",
  example: `  # Create a manifest for a VirtualMachine with a random name:
  virtctl create vm

  # Create a manifest for a VirtualMachine with an instancetype, a preference and a containerdisk
  virtctl create vm --instancetype=u1.nano --preference=cirros --volume-containerdisk=src:my.registry/my-image:my-tag

  # Create a manifest for a VirtualMachineInstancetype and create it with kubectl
  virtctl create instancetype --namespaced --name my-instancetype --cpu 2 --memory 256Mi | kubectl create -f -

  # Create a manifest for a ClusterPreference preferring cores
  virtctl create preference --cpu-topology cores`,
  flags: {
    name: { type: "string", help: "Specify the name of the VM." },
    "run-strategy": { type: "string", help: "Specify the RunStrategy of the VM.", default: "Always" },
    "termination-grace-period": {
      type: "string",
      help: "Specify the termination grace period of the VM.",
      default: "180",
    },
    memory: {
      type: "string",
      help: "Specify the memory of the VM. Mutually exclusive with --instancetype.",
      default: "512Mi",
    },
    instancetype: {
      type: "string",
      help: "Specify the Instance Type of the VM. Format: [kind/]name (kind defaults to virtualmachineclusterinstancetype).",
    },
    preference: {
      type: "string",
      help: "Specify the Preference of the VM. Format: [kind/]name (kind defaults to virtualmachineclusterpreference).",
    },
    "volume-containerdisk": {
      type: "string",
      help: "Specify a containerdisk to be used by the VM. Supported parameters: name:string,src:string,bootorder:uint",
    },
    "volume-pvc": {
      type: "string",
      help: "Specify a PVC to be used by the VM. Supported parameters: name:string,src:string,bootorder:uint",
    },
    "cloud-init-user-data": { type: "string", help: "Specify the base64 encoded cloud-init user data of the VM." },
    cpu: { type: "string", help: "instancetype: Specify the count of CPUs of the Instancetype." },
    iothreadspolicy: {
      type: "string",
      help: 'instancetype: Specify IOThreadsPolicy to be used. Only valid values are "auto" and "shared".',
    },
    namespaced: {
      type: "boolean",
      help: "instancetype, preference: create the namespaced kind (by default the cluster kind is created).",
    },
    "cpu-topology": { type: "string", help: "preference: Defines the preferred guest visible CPU topology." },
    "machine-type": { type: "string", help: "preference: Defines the preferred machine type to use." },
    "volume-storage-class": { type: "string", help: "preference: Defines the preferred storage class" },
  },
  args: 1,
  argWords: ["vm", "instancetype", "preference"],
  checkArgs: (args) => {
    if (args.length !== 1) return `accepts 1 arg(s), received ${args.length}`;
    return ["vm", "instancetype", "preference"].includes(args[0] ?? "")
      ? undefined
      : `unknown command "${args[0]}" for "virtctl create"`;
  },
  run(input, ctx) {
    const kind = input.args[0];
    let manifest: Record<string, Json>;
    if (kind === "instancetype") manifest = createInstancetypeManifest(input.values, randomSuffix());
    else if (kind === "preference") manifest = createPreferenceManifest(input.values, randomSuffix());
    else {
      const name = typeof input.values.name === "string" ? input.values.name : `vm-${randomSuffix()}`;
      manifest = createVmManifest(input.values, name);
    }
    ctx.stdout.write(toYaml(manifest).replace(/^\n/, ""));
    return Promise.resolve();
  },
};
