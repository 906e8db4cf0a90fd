/**
 * The parts of KubeVirt's DomainSpec beyond disks and interfaces (vmi-spec.ts): clock and timers, Hyper-V
 * enlightenments, launch security, chassis, I/O threads, and the devices other than disks and NICs (GPUs, host
 * devices, TPM, watchdog, inputs, filesystems, sound, video, panic devices). Field names follow KubeVirt's
 * `staging/src/kubevirt.io/api/core/v1/schema.go`. Which of them this platform can provide is decided at admission
 * (validation/unsupported-hardware.ts), never by leaving a field out of the schema.
 */
import { arr, bool, int, marker, obj, str } from "./builder.ts";

/** `{enabled}`: a feature switch (FeatureState). */
export const enabledSchema = obj({ enabled: bool() });

const timer = (extra: Record<string, ReturnType<typeof str>> = {}) =>
  obj({ present: bool({ description: "Whether the timer is present; defaults to true." }), ...extra });

const utcSchema = obj({ offsetSeconds: int({ description: "Seconds added to UTC." }) });
const timezoneSchema = str({ description: "A timezone name, e.g. Europe/Berlin; the guest clock follows it." });

/** Timer: the guest's timers (hpet, kvm, pit, rtc, hyperv). */
export const timerSchema = obj({
  hpet: timer({ tickPolicy: str() }),
  kvm: timer(),
  pit: timer({ tickPolicy: str() }),
  rtc: timer({ tickPolicy: str(), track: str() }),
  hyperv: timer(),
});

/** ClockOffset: UTC with an offset, or a timezone. */
export const clockOffsetSchema = obj({ utc: utcSchema, timezone: timezoneSchema });

/** Clock: the guest's clock offset and timers. */
export const clockSchema = obj(
  { utc: utcSchema, timezone: timezoneSchema, timer: timerSchema },
  { description: "Clock sets the clock and timers of the vmi." },
);

/** Hyper-V enlightenments (FeatureHyperv). */
export const hypervSchema = obj({
  relaxed: enabledSchema,
  vapic: enabledSchema,
  spinlocks: obj({ enabled: bool(), spinlocks: int({ format: "int64" }) }),
  vpindex: enabledSchema,
  runtime: enabledSchema,
  synic: enabledSchema,
  synictimer: obj({ enabled: bool(), direct: enabledSchema }),
  reset: enabledSchema,
  vendorid: obj({ enabled: bool(), vendorid: str() }),
  frequencies: enabledSchema,
  reenlightenment: enabledSchema,
  tlbflush: obj({ enabled: bool(), direct: enabledSchema, extended: enabledSchema }),
  ipi: enabledSchema,
  evmcs: enabledSchema,
});

/** FeatureAPIC. */
export const apicSchema = obj({ enabled: bool(), endOfInterrupt: bool() });
/** FeatureKVM. */
export const kvmFeatureSchema = obj({ hidden: bool() });

/** Features: ACPI, APIC, SMM, paravirtual spinlocks, KVM hiding and Hyper-V. */
export const featuresSchema = obj(
  {
    acpi: enabledSchema,
    apic: apicSchema,
    smm: enabledSchema,
    pvspinlock: enabledSchema,
    kvm: kvmFeatureSchema,
    hyperv: hypervSchema,
    hypervPassthrough: obj({ enabled: bool() }),
  },
  { description: "Features like acpi, apic, hyperv, smm." },
);

const claimedDevice = {
  name: str(),
  deviceName: str({ description: "The device plugin's resource name (mutually exclusive with claimName)." }),
  claimName: str({ description: "A spec.resourceClaims name (DRA)." }),
  requestName: str(),
  tag: str(),
};

/** VGPUOptions. */
export const vgpuOptionsSchema = obj({ display: obj({ enabled: bool(), ramFB: enabledSchema }) });
/** One GPU (device plugin or DRA claim). */
export const gpuSchema = obj({ ...claimedDevice, virtualGPUOptions: vgpuOptionsSchema }, { required: ["name"] });
/** One host device (device plugin or DRA claim). */
export const hostDeviceSchema = obj(claimedDevice, { required: ["name"] });
/** TPMDevice. */
export const tpmSchema = obj({ enabled: bool(), persistent: bool() }, { description: "An emulated TPM (swtpm)." });
/** NUMA. */
export const numaSchema = obj({ guestMappingPassthrough: marker() });
/** Realtime. */
export const realtimeSchema = obj({ mask: str() });
/** DiskIOThreads. */
export const ioThreadsSchema = obj({ supplementalPoolThreadCount: int({ format: "int64" }) });
/** LaunchSecurity: SEV, SEV-SNP or TDX. */
export const launchSecuritySchema = obj({
  sev: obj({ policy: obj({ encryptedState: bool() }), attestation: marker(), session: str(), dhCert: str() }),
  snp: marker(),
  tdx: marker(),
});
/** BlockSize of a disk: custom sizes or those of the volume. */
export const blockSizeSchema = obj({
  custom: obj({ logical: int(), physical: int(), discardGranularity: int() }, { required: ["logical", "physical"] }),
  matchVolume: enabledSchema,
});

/** Devices other than disks and interfaces (spread into the devices schema). */
export const devicesExtraProps = {
  autoattachInputDevice: bool(),
  autoattachVSOCK: bool(),
  disableHotplug: bool(),
  clientPassthrough: marker({ description: "Pass USB devices of the client (virtctl usbredir) into the guest." }),
  downwardMetrics: marker(),
  gpus: arr(gpuSchema, { description: "GPUs passed through or mediated (vGPU) into the guest." }),
  hostDevices: arr(hostDeviceSchema, { description: "Host PCI or USB devices." }),
  filesystems: arr(obj({ name: str(), virtiofs: marker() }, { required: ["name", "virtiofs"] }), {
    description: "Volumes shared with the guest over virtiofs.",
  }),
  inputs: arr(obj({ bus: str(), type: str(), name: str() }, { required: ["type", "name"] })),
  panicDevices: arr(obj({ model: str({ description: "hyperv, isa or pvpanic." }) })),
  sound: obj({ name: str(), model: str({ description: "ich9 or ac97." }) }, { required: ["name"] }),
  tpm: tpmSchema,
  video: obj({ type: str({ description: "vga, cirrus, virtio, ramfb or bochs." }) }),
  watchdog: obj(
    { name: str(), i6300esb: obj({ action: str() }), diag288: obj({ action: str() }) },
    { required: ["name"] },
  ),
};

/** DomainSpec fields beyond resources, CPU, memory, machine, firmware, features and devices. */
export const domainExtraProps = {
  clock: clockSchema,
  chassis: obj({ manufacturer: str(), version: str(), serial: str(), asset: str(), sku: str() }),
  ioThreads: ioThreadsSchema,
  launchSecurity: launchSecuritySchema,
  rebootPolicy: str({ description: "Reboot (the default) or Terminate." }),
};
