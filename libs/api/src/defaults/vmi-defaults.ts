/**
 * What the VMI mutating webhook applies to a new VMI (KubeVirt `defaults.SetDefaultVirtualMachineInstance` plus
 * `vmi-mutator.go`), in KubeVirt's order:
 *
 *   architecture, machine type -> cpu request from limit -> memory.guest from requests/limits/hugepages ->
 *   CPU topology (sockets from the cpu limit/request, 1 core, 1 thread) -> containerDisk pull policy ->
 *   eviction strategy -> default pod network + interface -> a disk for every volume -> firmware uuid, disk targets,
 *   feature flags -> default disk bus (sata on amd64) -> CPU model -> grace period -> status memory and topology ->
 *   hotplug headroom (LiveUpdate) -> finalizer, phase Pending.
 */
import { DEFAULT_GRACE_PERIOD_SECONDS, DEFAULT_NETWORK_NAME, FINALIZER } from "../constants.ts";
import { Quantity } from "../quantity.ts";
import { typeErrors } from "../strict-decode.ts";
import type { VirtualMachineInstance, VirtualMachineInstanceSpec } from "../types.ts";
import { quantityOrZero } from "../validation/quantities.ts";
import { type ClusterConfig, DEFAULT_CLUSTER_CONFIG } from "../validation/validation-config.ts";

/** Inputs the defaults need besides the object (injected so the functions stay pure and testable). */
export interface DefaultingOptions {
  /** Cluster settings (KubeVirt's by default). */
  config?: ClusterConfig;
  /** Source of random UUIDs (default `crypto.randomUUID`). */
  uuid?: () => string;
  /** The current time as RFC 3339 (default now). */
  now?: () => string;
}

const HOTPLUG_BLOCK_BYTES = 2n * 1024n * 1024n;
const MIN_HOTPLUG_GUEST_BYTES = 1024n * 1024n * 1024n;
const MAX_VCPUS = 512;

function setResources(spec: VirtualMachineInstanceSpec): void {
  const res = spec.domain.resources;
  if (
    res?.limits?.cpu !== undefined &&
    !quantityOrZero(res.limits.cpu).isZero() &&
    quantityOrZero(res.requests?.cpu).isZero()
  ) {
    res.requests = { ...res.requests, cpu: res.limits.cpu };
  }
}

function setGuestMemory(spec: VirtualMachineInstanceSpec): void {
  const mem = spec.domain.memory ?? {};
  spec.domain.memory = mem;
  if (mem.guest !== undefined) return;
  const res = spec.domain.resources;
  if (!quantityOrZero(res?.requests?.memory).isZero()) mem.guest = res?.requests?.memory;
  else if (!quantityOrZero(res?.limits?.memory).isZero()) mem.guest = res?.limits?.memory;
  else if (mem.hugepages?.pageSize) mem.guest = mem.hugepages.pageSize;
}

function setCpuTopology(spec: VirtualMachineInstanceSpec): void {
  const cpu = spec.domain.cpu ?? {};
  spec.domain.cpu = cpu;
  if (cpu.cores || cpu.sockets || cpu.threads) return;
  const res = spec.domain.resources;
  // Sockets give the best guest performance (KubeVirt, rhbz#1653453); Value() rounds 100m up to 1.
  const from = res?.limits?.cpu ?? res?.requests?.cpu;
  cpu.sockets = from === undefined ? 1 : Math.max(1, Number(quantityOrZero(from).value()));
  cpu.cores = 1;
  cpu.threads = 1;
}

/** A VMI the cluster's settings cannot default; KubeVirt's admission answers 400 with the message. */
export class DefaultingError extends Error {
  override name = "DefaultingError";
}

/**
 * KubeVirt's SetDefaultNetworkInterface: a VMI with neither networks nor interfaces (and autoattachPodInterface not
 * false) gets the pod network and an interface with the cluster's default binding. Throws a DefaultingError when
 * that binding is bridge and the cluster forbids bridge on the pod network, or slirp.
 */
export function setDefaultNetworkInterface(spec: VirtualMachineInstanceSpec, config: ClusterConfig): void {
  const devices = spec.domain.devices;
  if (devices.autoattachPodInterface === false || spec.networks?.length || devices.interfaces?.length) return;
  switch (config.defaultNetworkInterface) {
    case "bridge":
      if (!config.permitBridgeInterfaceOnPodNetwork)
        throw new DefaultingError("bridge interface is not enabled in kubevirt-config");
      devices.interfaces = [{ name: DEFAULT_NETWORK_NAME, bridge: {} }];
      break;
    case "masquerade":
      devices.interfaces = [{ name: DEFAULT_NETWORK_NAME, masquerade: {} }];
      break;
    case "slirp":
      throw new DefaultingError("slirp interface is deprecated as of v1.3");
    default:
      break; // KubeVirt adds the network alone; validation then names the interface it lacks
  }
  spec.networks = [{ name: DEFAULT_NETWORK_NAME, pod: {} }];
}

function setNetworkAndDisks(spec: VirtualMachineInstanceSpec, config: ClusterConfig): void {
  const devices = spec.domain.devices;
  setDefaultNetworkInterface(spec, config);
  const disks = devices.disks ?? [];
  for (const volume of spec.volumes ?? []) {
    if (!disks.some((d) => d.name === volume.name)) disks.push({ name: volume.name });
  }
  for (const disk of disks) {
    if (!disk.disk && !disk.cdrom && !disk.lun) disk.disk = {};
    if (disk.cdrom) {
      disk.cdrom.readonly ??= true;
      disk.cdrom.tray ||= "closed";
    }
    // amd64: SATA is understood by every guest OS out of the box (KubeVirt setDefaultAmd64DisksBus).
    if (spec.architecture === "amd64" || spec.architecture === undefined) {
      for (const t of [disk.disk, disk.cdrom, disk.lun]) if (t && !t.bus) t.bus = "sata";
    }
  }
  if (disks.length > 0 || devices.disks) devices.disks = disks;
}

function setPullPolicies(spec: VirtualMachineInstanceSpec): void {
  for (const v of spec.volumes ?? []) {
    const cd = v.containerDisk;
    if (!cd || cd.imagePullPolicy) continue;
    // Mutation runs before schema validation: a missing (required) image defaults as Go's "" does.
    const image = typeof cd.image === "string" ? cd.image : "";
    cd.imagePullPolicy = image.endsWith(":latest") || !/[:@]/.test(image) ? "Always" : "IfNotPresent";
  }
}

function setFeatures(spec: VirtualMachineInstanceSpec): void {
  const f = spec.domain.features ?? {};
  spec.domain.features = f;
  for (const k of ["acpi", "apic", "smm", "pvspinlock"] as const) {
    const feature = f[k];
    if (feature) feature.enabled ??= true;
  }
}

function setHotplug(vmi: VirtualMachineInstance, config: ClusterConfig): void {
  const spec = vmi.spec;
  if (config.vmRolloutStrategy !== "LiveUpdate" || (spec.architecture && spec.architecture !== "amd64")) return;
  const cpu = spec.domain.cpu ?? {};
  if (!cpu.maxSockets) {
    const sockets = cpu.sockets ?? 1;
    const per = (cpu.cores ?? 1) * (cpu.threads ?? 1);
    cpu.maxSockets = sockets * config.maxHotplugRatio;
    if (cpu.maxSockets * per > MAX_VCPUS) cpu.maxSockets = Math.max(Math.floor(MAX_VCPUS / per), sockets);
  }
  const mem = spec.domain.memory;
  if (!mem || mem.maxGuest !== undefined || mem.guest === undefined) return;
  const guest = quantityOrZero(mem.guest).value();
  const maxGuest = guest * BigInt(config.maxHotplugRatio);
  // KubeVirt silently skips memory hotplug when the VM cannot use it (small or unaligned guests, hugepages, ...).
  if (guest < MIN_HOTPLUG_GUEST_BYTES || guest % HOTPLUG_BLOCK_BYTES !== 0n || mem.hugepages) return;
  mem.maxGuest = Quantity.of(maxGuest, "BinarySI").toString();
}

/**
 * Applies the spec defaults shared by a VMI and by the VMI a VM will create (mutates `spec`). Throws a
 * DefaultingError when the cluster's settings cannot default its network (see setDefaultNetworkInterface).
 */
export function applyVmiSpecDefaults(
  spec: VirtualMachineInstanceSpec,
  config: ClusterConfig = DEFAULT_CLUSTER_CONFIG,
): void {
  spec.architecture ||= config.architecture;
  spec.domain.machine = { ...spec.domain.machine, type: spec.domain.machine?.type || config.machineType };
  setResources(spec);
  setGuestMemory(spec);
  setCpuTopology(spec);
  setPullPolicies(spec);
  if (spec.evictionStrategy === undefined && config.evictionStrategy) spec.evictionStrategy = config.evictionStrategy;
  setNetworkAndDisks(spec, config);
}

/**
 * A new VMI with every default the mutating webhook applies on create (returns a copy; the input is untouched).
 * Call on admission of a CREATE only; on update KubeVirt applies no defaults. Throws a DefaultingError as
 * applyVmiSpecDefaults does.
 */
export function defaultVmi(input: VirtualMachineInstance, opts: DefaultingOptions = {}): VirtualMachineInstance {
  const config = opts.config ?? DEFAULT_CLUSTER_CONFIG;
  const vmi = structuredClone(input);
  // A malformed VMI (no domain.devices, wrong types) is refused by validation; defaulting leaves it for that to report.
  if (!vmi.spec?.domain?.devices || typeErrors("VirtualMachineInstance", vmi).length > 0) return vmi;
  const spec = vmi.spec;
  applyVmiSpecDefaults(spec, config);
  const firmware = spec.domain.firmware ?? {};
  spec.domain.firmware = firmware;
  firmware.uuid ||= (opts.uuid ?? (() => crypto.randomUUID()))();
  setFeatures(spec);
  spec.domain.cpu = { ...spec.domain.cpu, model: spec.domain.cpu?.model || config.cpuModel };
  spec.terminationGracePeriodSeconds ??= DEFAULT_GRACE_PERIOD_SECONDS;
  const status = vmi.status ?? {};
  vmi.status = status;
  const guest = spec.domain.memory?.guest;
  if (guest !== undefined) status.memory = { guestAtBoot: guest, guestCurrent: guest, guestRequested: guest };
  const cpu = spec.domain.cpu;
  status.currentCPUTopology ??= { sockets: cpu.sockets ?? 1, cores: cpu.cores ?? 1, threads: cpu.threads ?? 1 };
  setHotplug(vmi, config);
  const meta = vmi.metadata ?? {};
  vmi.metadata = meta;
  if (!meta.finalizers?.includes(FINALIZER.vmi)) meta.finalizers = [...(meta.finalizers ?? []), FINALIZER.vmi];
  status.phase = "Pending";
  const now = (opts.now ?? (() => new Date().toISOString().replace(/\.\d+Z$/, "Z")))();
  status.phaseTransitionTimestamps = [
    ...(status.phaseTransitionTimestamps ?? []),
    { phase: "Pending", phaseTransitionTimestamp: now },
  ];
  return vmi;
}
