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

/** Clock: the guest's clock offset and timers. */
export const clockSchema = obj(
  {
    utc: obj({ offsetSeconds: int({ description: "Seconds added to UTC." }) }),
    timezone: str({ description: "A timezone name, e.g. Europe/Berlin; the guest clock follows it." }),
    timer: obj({
      hpet: timer({ tickPolicy: str() }),
      kvm: timer(),
      pit: timer({ tickPolicy: str() }),
      rtc: timer({ tickPolicy: str(), track: str() }),
      hyperv: timer(),
    }),
  },
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

/** Features: ACPI, APIC, SMM, paravirtual spinlocks, KVM hiding and Hyper-V. */
export const featuresSchema = obj(
  {
    acpi: enabledSchema,
    apic: obj({ enabled: bool(), endOfInterrupt: bool() }),
    smm: enabledSchema,
    pvspinlock: enabledSchema,
    kvm: obj({ hidden: bool() }),
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

/** Devices other than disks and interfaces (spread into the devices schema). */
export const devicesExtraProps = {
  autoattachInputDevice: bool(),
  autoattachVSOCK: bool(),
  disableHotplug: bool(),
  clientPassthrough: marker({ description: "Pass USB devices of the client (virtctl usbredir) into the guest." }),
  downwardMetrics: marker(),
  gpus: arr(
    obj(
      {
        ...claimedDevice,
        virtualGPUOptions: obj({ display: obj({ enabled: bool(), ramFB: enabledSchema }) }),
      },
      { required: ["name"] },
    ),
    { description: "GPUs passed through or mediated (vGPU) into the guest." },
  ),
  hostDevices: arr(obj(claimedDevice, { required: ["name"] }), { description: "Host PCI or USB devices." }),
  filesystems: arr(obj({ name: str(), virtiofs: marker() }, { required: ["name", "virtiofs"] }), {
    description: "Volumes shared with the guest over virtiofs.",
  }),
  inputs: arr(obj({ bus: str(), type: str(), name: str() }, { required: ["type", "name"] })),
  panicDevices: arr(obj({ model: str({ description: "hyperv, isa or pvpanic." }) })),
  sound: obj({ name: str(), model: str({ description: "ich9 or ac97." }) }, { required: ["name"] }),
  tpm: obj({ enabled: bool(), persistent: bool() }, { description: "An emulated TPM (swtpm)." }),
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
  ioThreads: obj({ supplementalPoolThreadCount: int({ format: "int64" }) }),
  launchSecurity: obj({
    sev: obj({
      policy: obj({ encryptedState: bool() }),
      attestation: marker(),
      session: str(),
      dhCert: str(),
    }),
    snp: marker(),
    tdx: marker(),
  }),
  rebootPolicy: str({ description: "Reboot (the default) or Terminate." }),
};
