/**
 * Expansion of a VM's instancetype and preference into a VMI spec (KubeVirt `pkg/instancetype/apply` and
 * `pkg/instancetype/preference/apply`), pure:
 *
 *   instancetype (owns)     cpu.guest -> domain.cpu sockets|cores|threads (per the preference's topology),
 *                           cpu.model/dedicatedCPUPlacement/..., memory.guest (+ overcommitPercent -> requests.memory),
 *                           hugepages, maxGuest, nodeSelector, schedulerName, gpus, hostDevices, ioThreads, annotations
 *   preference (defaults)   disk/cdrom/lun bus, interface model, autoattach flags, machine type, subdomain,
 *                           termination grace period, firmware, cpu features, annotations: only where the VM is silent
 *
 * A VM that sets what its instancetype owns is a conflict: "VM field(s) <path> conflicts with selected instance type".
 * The same function serves virt-api (conflicts refuse the VM) and virt-controller (the VMI it creates).
 */
import { canonicalQuantity, parseQuantity } from "../quantity.ts";
import type { VirtualMachineInstanceSpec } from "../types.ts";
import type { InstancetypeSpec, PreferenceSpec } from "./instancetype-types.ts";

type Obj = Record<string, unknown>;

/** One field the VM sets although its instancetype owns it. */
export interface InstancetypeConflict {
  /** The field path, e.g. `spec.template.spec.domain.cpu.sockets`. */
  readonly field: string;
  /** KubeVirt's message for it. */
  readonly message: string;
}

/** KubeVirt's conflict message for `fields` (a comma-separated list of paths). */
export function conflictMessage(fields: string): string {
  return `VM field(s) ${fields} conflicts with selected instance type`;
}

function conflict(base: string, ...names: string[]): InstancetypeConflict {
  const field = [base, ...names].filter((s) => s !== "").join(".");
  return { field, message: conflictMessage(field) };
}

function obj(parent: Obj, key: string): Obj {
  let v = parent[key] as Obj | undefined;
  if (!v || typeof v !== "object") {
    v = {};
    parent[key] = v;
  }
  return v;
}

function has(o: Obj | undefined, key: string): boolean {
  return o !== undefined && o[key] !== undefined && o[key] !== null;
}

function nonZero(o: Obj | undefined, key: string): boolean {
  return has(o, key) && o?.[key] !== 0 && o?.[key] !== "" && o?.[key] !== false;
}

/** The guest topology for `vCPUs` under the preference's preferredCPUTopology (default sockets). */
export function guestTopology(
  vCPUs: number,
  preference: PreferenceSpec | undefined,
): { sockets: number; cores: number; threads: number } {
  const t = { sockets: 1, cores: 1, threads: 1 };
  if (vCPUs === 1) return t;
  const preferred = preference?.cpu?.preferredCPUTopology ?? "sockets";
  switch (preferred) {
    case "cores":
    case "preferCores":
      t.cores = vCPUs;
      break;
    case "threads":
    case "preferThreads":
      t.threads = vCPUs;
      break;
    case "spread":
    case "preferSpread": {
      const ratio = preference?.cpu?.spreadOptions?.ratio ?? (preference?.preferSpreadSocketToCoreRatio || 2);
      const across = preference?.cpu?.spreadOptions?.across ?? "SocketsCores";
      if (across === "SocketsCores") {
        t.cores = ratio;
        t.sockets = Math.floor(vCPUs / ratio);
      } else if (across === "CoresThreads") {
        t.threads = ratio;
        t.cores = Math.floor(vCPUs / ratio);
      } else {
        t.threads = 2;
        t.cores = ratio;
        t.sockets = Math.floor(vCPUs / 2 / ratio);
      }
      break;
    }
    default:
      t.sockets = vCPUs;
  }
  return t;
}

function cpuConflicts(base: string, it: InstancetypeSpec, domain: Obj): InstancetypeConflict[] {
  const out: InstancetypeConflict[] = [];
  const resources = domain.resources as { requests?: Obj; limits?: Obj } | undefined;
  const cpu = domain.cpu as Obj | undefined;
  if (has(resources?.requests, "cpu")) out.push(conflict(base, "domain", "resources", "requests", "cpu"));
  if (has(resources?.limits, "cpu")) out.push(conflict(base, "domain", "resources", "limits", "cpu"));
  for (const f of ["sockets", "cores", "threads"]) if (nonZero(cpu, f)) out.push(conflict(base, "domain", "cpu", f));
  if (nonZero(cpu, "model") && it.cpu.model !== undefined) out.push(conflict(base, "domain", "cpu", "model"));
  if (cpu?.dedicatedCpuPlacement === true && it.cpu.dedicatedCPUPlacement !== undefined)
    out.push(conflict(base, "domain", "cpu", "dedicatedCPUPlacement"));
  if (cpu?.isolateEmulatorThread === true && it.cpu.isolateEmulatorThread !== undefined)
    out.push(conflict(base, "domain", "cpu", "isolateEmulatorThread"));
  if (has(cpu, "numa") && it.cpu.numa !== undefined) out.push(conflict(base, "domain", "cpu", "numa"));
  if (has(cpu, "realtime") && it.cpu.realtime !== undefined) out.push(conflict(base, "domain", "cpu", "realtime"));
  return out;
}

function applyCpu(
  base: string,
  it: InstancetypeSpec,
  pref: PreferenceSpec | undefined,
  domain: Obj,
): InstancetypeConflict[] {
  const conflicts = cpuConflicts(base, it, domain);
  if (conflicts.length > 0) return conflicts;
  const cpu = obj(domain, "cpu");
  if (it.cpu.model !== undefined) cpu.model = it.cpu.model;
  if (it.cpu.dedicatedCPUPlacement !== undefined) cpu.dedicatedCpuPlacement = it.cpu.dedicatedCPUPlacement;
  if (it.cpu.isolateEmulatorThread !== undefined) cpu.isolateEmulatorThread = it.cpu.isolateEmulatorThread;
  if (it.cpu.numa !== undefined) cpu.numa = structuredClone(it.cpu.numa);
  if (it.cpu.realtime !== undefined) cpu.realtime = structuredClone(it.cpu.realtime);
  if (it.cpu.maxSockets !== undefined) cpu.maxSockets = it.cpu.maxSockets;
  Object.assign(cpu, guestTopology(it.cpu.guest, pref));
  return [];
}

/** Only the first memory conflict is reported, as KubeVirt's `validateMemory` does. */
function memoryConflict(base: string, it: InstancetypeSpec, domain: Obj): InstancetypeConflict | undefined {
  const memory = domain.memory as Obj | undefined;
  const resources = domain.resources as { requests?: Obj; limits?: Obj } | undefined;
  if (has(memory, "guest")) return conflict(base, "domain", "memory", "guest");
  if (has(memory, "hugepages") && it.memory.hugepages) return conflict(base, "domain", "memory", "hugepages");
  if (has(memory, "maxGuest") && it.memory.maxGuest !== undefined)
    return conflict(base, "domain", "memory", "maxGuest");
  if (has(resources?.requests, "memory")) return conflict(base, "domain", "resources", "requests", "memory");
  if (has(resources?.limits, "memory")) return conflict(base, "domain", "resources", "limits", "memory");
  return undefined;
}

/**
 * The pod's memory request for an overcommitted guest: guest * (1 - percent/100), computed in float32 as KubeVirt
 * does, printed in the guest quantity's format (BinarySI stays `Mi`/`Gi` when it divides evenly).
 */
export function overcommittedRequest(guest: string | number, percent: number): string {
  const q = parseQuantity(guest);
  const f = Math.fround;
  const bytes = Math.trunc(f(f(Number(q.value())) * f(1 - f(f(percent) / 100))));
  if (q.format === "BinarySI" && bytes % 1024 === 0) return canonicalQuantity(`${bytes / 1024}Ki`);
  return canonicalQuantity(bytes);
}

function applyMemory(base: string, it: InstancetypeSpec, domain: Obj): InstancetypeConflict[] {
  const c = memoryConflict(base, it, domain);
  if (c) return [c];
  const memory = obj(domain, "memory");
  memory.guest = it.memory.guest;
  const overcommit = it.memory.overcommitPercent ?? 0;
  if (overcommit > 0) {
    const requests = obj(obj(domain, "resources"), "requests");
    requests.memory = overcommittedRequest(it.memory.guest, overcommit);
  }
  if (it.memory.hugepages) memory.hugepages = structuredClone(it.memory.hugepages);
  if (it.memory.maxGuest !== undefined) memory.maxGuest = it.memory.maxGuest;
  return [];
}

/** Node selector and scheduler name: owned, so a VM that sets them too conflicts. */
function applyScheduling(base: string, it: InstancetypeSpec, spec: Obj): InstancetypeConflict[] {
  const out: InstancetypeConflict[] = [];
  if (it.nodeSelector) {
    if (has(spec, "nodeSelector")) out.push(conflict(base, "nodeSelector"));
    else spec.nodeSelector = { ...it.nodeSelector };
  }
  if (it.schedulerName) {
    if (nonZero(spec, "schedulerName")) out.push(conflict(base, "schedulerName"));
    else spec.schedulerName = it.schedulerName;
  }
  return out;
}

/** IO threads, launch security, GPUs, host devices: owned, so a VM that sets them too conflicts. */
function applyOwnedDevices(base: string, it: InstancetypeSpec, domain: Obj): InstancetypeConflict[] {
  const out: InstancetypeConflict[] = [];
  if (it.ioThreadsPolicy !== undefined) {
    if (has(domain, "ioThreadsPolicy")) out.push(conflict(base, "domain", "ioThreadsPolicy"));
    else domain.ioThreadsPolicy = it.ioThreadsPolicy;
  }
  if (it.ioThreads !== undefined) {
    if (has(domain, "ioThreads")) out.push(conflict(base, "domain", "ioThreads"));
    else domain.ioThreads = structuredClone(it.ioThreads);
  }
  if (it.launchSecurity !== undefined) {
    if (has(domain, "launchSecurity")) out.push(conflict(base, "domain", "launchSecurity"));
    else domain.launchSecurity = structuredClone(it.launchSecurity);
  }
  const devices = obj(domain, "devices");
  for (const key of ["gpus", "hostDevices"] as const) {
    const wanted = it[key];
    if (!wanted || wanted.length === 0) continue;
    if (Array.isArray(devices[key]) && (devices[key] as unknown[]).length > 0)
      out.push(conflict(base, "domain", "devices", key));
    else devices[key] = structuredClone(wanted);
  }
  return out;
}

function applyInstancetypeAnnotations(it: InstancetypeSpec, metadata: Obj): InstancetypeConflict[] {
  const out: InstancetypeConflict[] = [];
  const annotations = obj(metadata, "annotations") as Record<string, string>;
  for (const [k, v] of Object.entries(it.annotations ?? {})) {
    if (k in annotations) {
      if (annotations[k] !== v) out.push(conflict("annotations", k));
    } else annotations[k] = v;
  }
  return out;
}

function setIfUnset(o: Obj, key: string, value: unknown): void {
  if (value !== undefined && !has(o, key)) o[key] = structuredClone(value);
}

function applyDevicePreferences(pref: PreferenceSpec, spec: Obj, domain: Obj): void {
  const d = pref.devices;
  if (!d) return;
  const devices = obj(domain, "devices");
  setIfUnset(devices, "useVirtioTransitional", d.preferredUseVirtioTransitional);
  setIfUnset(devices, "blockMultiQueue", d.preferredBlockMultiQueue);
  setIfUnset(devices, "networkInterfaceMultiqueue", d.preferredNetworkInterfaceMultiQueue);
  if (d.preferredDisableHotplug !== undefined) devices.disableHotplug = d.preferredDisableHotplug;
  setIfUnset(devices, "rng", d.preferredRng);
  setIfUnset(devices, "tpm", d.preferredTPM);
  setIfUnset(devices, "autoattachGraphicsDevice", d.preferredAutoattachGraphicsDevice);
  setIfUnset(devices, "autoattachMemBalloon", d.preferredAutoattachMemBalloon);
  setIfUnset(devices, "autoattachPodInterface", d.preferredAutoattachPodInterface);
  setIfUnset(devices, "autoattachSerialConsole", d.preferredAutoattachSerialConsole);
  setIfUnset(devices, "autoattachInputDevice", d.preferredAutoattachInputDevice);
  for (const disk of (devices.disks as Obj[] | undefined) ?? []) {
    if (!disk.disk && !disk.cdrom && !disk.lun) disk.disk = {};
    if (disk.disk) {
      const target = disk.disk as Obj;
      if (d.preferredDiskBus && !target.bus) target.bus = d.preferredDiskBus;
      setIfUnset(disk, "blockSize", d.preferredDiskBlockSize);
      if (d.preferredDiskCache && !disk.cache) disk.cache = d.preferredDiskCache;
      if (d.preferredDiskIO && !disk.io) disk.io = d.preferredDiskIO;
      if (target.bus === "virtio") setIfUnset(disk, "dedicatedIOThread", d.preferredDiskDedicatedIoThread);
    } else if (disk.cdrom) {
      const target = disk.cdrom as Obj;
      if (d.preferredCdromBus && !target.bus) target.bus = d.preferredCdromBus;
    } else if (disk.lun) {
      const target = disk.lun as Obj;
      if (d.preferredLunBus && !target.bus) target.bus = d.preferredLunBus;
    }
  }
  const podNetworks = new Set(((spec.networks as Obj[] | undefined) ?? []).filter((n) => n.pod).map((n) => n.name));
  for (const iface of (devices.interfaces as Obj[] | undefined) ?? []) {
    if (d.preferredInterfaceModel && !iface.model) iface.model = d.preferredInterfaceModel;
    const bindingUnset = !["bridge", "masquerade", "sriov", "slirp", "passt", "macvtap", "binding"].some(
      (b) => b in iface,
    );
    if (d.preferredInterfaceMasquerade && bindingUnset && podNetworks.has(iface.name))
      iface.masquerade = structuredClone(d.preferredInterfaceMasquerade);
  }
}

function applyPreference(pref: PreferenceSpec, spec: Obj, domain: Obj, metadata: Obj): void {
  const features = pref.cpu?.preferredCPUFeatures ?? [];
  if (features.length > 0) {
    const cpu = obj(domain, "cpu");
    const list = (cpu.features as Obj[] | undefined) ?? [];
    const names = new Set(list.map((f) => f.name));
    for (const f of features) if (!names.has(f.name)) list.push({ ...f });
    cpu.features = list;
  }
  applyDevicePreferences(pref, spec, domain);
  if (pref.machine?.preferredMachineType) {
    const machine = obj(domain, "machine");
    if (!machine.type) machine.type = pref.machine.preferredMachineType;
  }
  if (pref.preferredSubdomain !== undefined && !spec.subdomain) spec.subdomain = pref.preferredSubdomain;
  setIfUnset(spec, "terminationGracePeriodSeconds", pref.preferredTerminationGracePeriodSeconds);
  const fw = pref.firmware;
  if (fw) {
    const bootloader = obj(obj(domain, "firmware"), "bootloader");
    if (fw.preferredUseBios && !bootloader.bios && !bootloader.efi) bootloader.bios = {};
    if (fw.preferredUseBiosSerial !== undefined && bootloader.bios)
      setIfUnset(bootloader.bios as Obj, "useSerial", fw.preferredUseBiosSerial);
    if (!bootloader.efi && !bootloader.bios && fw.preferredEfi) bootloader.efi = structuredClone(fw.preferredEfi);
    else if (fw.preferredUseEfi && !bootloader.efi && !bootloader.bios) bootloader.efi = {};
    if (fw.preferredUseSecureBoot !== undefined && bootloader.efi)
      setIfUnset(bootloader.efi as Obj, "secureBoot", fw.preferredUseSecureBoot);
    if (Object.keys(bootloader).length === 0) delete (domain.firmware as Obj).bootloader;
  }
  const annotations = obj(metadata, "annotations") as Record<string, string>;
  for (const [k, v] of Object.entries(pref.annotations ?? {})) if (!(k in annotations)) annotations[k] = v;
}

/**
 * Applies `instancetype` and `preference` to `vmiSpec` and `metadata` in place (KubeVirt `ApplyToVMI`); `base` is
 * the path of the spec in conflict messages (`spec.template.spec` for a VM, `spec` for a VMI). Returns the
 * conflicts; when there are any the preference is not applied and the spec is left part-applied (use a copy).
 */
export function applyInstancetypeToVmi(
  base: string,
  instancetype: InstancetypeSpec | undefined,
  preference: PreferenceSpec | undefined,
  vmiSpec: VirtualMachineInstanceSpec,
  metadata: { annotations?: Record<string, string> },
): InstancetypeConflict[] {
  const spec = vmiSpec as unknown as Obj;
  const domain = obj(spec, "domain");
  if (instancetype) {
    // KubeVirt's order, which is the order of the conflicts reported.
    const conflicts = [
      ...applyScheduling(base, instancetype, spec),
      ...applyCpu(base, instancetype, preference, domain),
      ...applyMemory(base, instancetype, domain),
      ...applyOwnedDevices(base, instancetype, domain),
      ...applyInstancetypeAnnotations(instancetype, metadata),
    ];
    if (conflicts.length > 0) return conflicts;
  }
  if (preference) applyPreference(preference, spec, domain, metadata);
  return [];
}
