/**
 * instancetype.kubevirt.io/v1beta1 (KubeVirt `staging/src/kubevirt.io/api/instancetype/v1beta1/types.go`): the
 * sizing kinds VirtualMachineInstancetype / VirtualMachineClusterInstancetype (what a VM's resources are) and the
 * preference kinds VirtualMachinePreference / VirtualMachineClusterPreference (defaults a VM may override).
 * Namespaced and cluster kinds share one spec each. Types KubeVirt embeds from kubevirt.io/v1 (NUMA, realtime,
 * GPUs, host devices, launch security, timers, Hyper-V, ...) are the VMI schema's own.
 */
import { arr, bool, int, map, marker, obj, quantity, str, strEnum } from "../schema/builder.ts";
import { objectMetaSchema } from "../schema/meta.ts";
import {
  apicSchema,
  blockSizeSchema,
  clockOffsetSchema,
  enabledSchema,
  gpuSchema,
  hostDeviceSchema,
  hypervSchema,
  ioThreadsSchema,
  kvmFeatureSchema,
  launchSecuritySchema,
  numaSchema,
  realtimeSchema,
  timerSchema,
  tpmSchema,
  vgpuOptionsSchema,
} from "../schema/vmi-domain.ts";

/** `spec.cpu.preferredCPUTopology` values (the `prefer*` spellings are deprecated but still accepted). */
export const PREFERRED_CPU_TOPOLOGIES = [
  "sockets",
  "cores",
  "threads",
  "spread",
  "any",
  "preferSockets",
  "preferCores",
  "preferThreads",
  "preferSpread",
  "preferAny",
] as const;

/** `spec.cpu.spreadOptions.across` values. */
export const SPREAD_ACROSS = ["SocketsCoresThreads", "SocketsCores", "CoresThreads"] as const;

/** CPUInstancetype. */
export const cpuInstancetypeSchema = obj(
  {
    guest: int({ format: "int32", description: "Required number of vCPUs to expose to the guest." }),
    model: str({ description: "Model specifies the CPU model inside the VMI." }),
    dedicatedCPUPlacement: bool({
      description: "DedicatedCPUPlacement requests the scheduler to place the VirtualMachineInstance on a node",
    }),
    numa: { ...numaSchema, description: "NUMA allows specifying settings for the guest NUMA topology" },
    isolateEmulatorThread: bool({ description: "IsolateEmulatorThread requests one more dedicated pCPU" }),
    realtime: {
      ...realtimeSchema,
      description: "Realtime instructs the virt-launcher to tune the VMI for lower latency",
    },
    maxSockets: int({ format: "int32", description: "MaxSockets specifies the maximum amount of sockets" }),
  },
  { required: ["guest"], description: "Required CPU related attributes of the instancetype." },
);

/** MemoryInstancetype. */
export const memoryInstancetypeSchema = obj(
  {
    guest: quantity({ description: "Required amount of memory which is visible inside the guest OS." }),
    hugepages: obj({ pageSize: str() }, { description: "Optionally enables the use of hugepages" }),
    overcommitPercent: int({
      description: "OvercommitPercent is the percentage of the guest memory which will be overcommitted.",
    }),
    maxGuest: quantity({ description: "MaxGuest allows to specify the maximum amount of memory" }),
  },
  { required: ["guest"], description: "Required Memory related attributes of the instancetype." },
);

/** VirtualMachineInstancetypeSpec. */
export const instancetypeSpecSchema = obj(
  {
    nodeSelector: map(str(), { description: "NodeSelector is a selector which must be true for the vmi to fit" }),
    schedulerName: str({ description: "If specified, the VMI will be dispatched by specified scheduler." }),
    cpu: cpuInstancetypeSchema,
    memory: memoryInstancetypeSchema,
    gpus: arr(gpuSchema, { description: "Optionally defines any GPU devices associated with the instancetype." }),
    hostDevices: arr(hostDeviceSchema, {
      description: "Optionally defines any HostDevices associated with the instancetype.",
    }),
    ioThreadsPolicy: str({ description: "Optionally defines the IOThreadsPolicy to be used by the instancetype." }),
    ioThreads: {
      ...ioThreadsSchema,
      description: "Optionally specifies the IOThreads options to be used by the instancetype.",
    },
    launchSecurity: {
      ...launchSecuritySchema,
      description: "Optionally defines the LaunchSecurity to be used by the instancetype.",
    },
    annotations: map(str(), {
      description: "Optionally defines the required Annotations to be used by the instance type",
    }),
  },
  {
    required: ["cpu", "memory"],
    description:
      "VirtualMachineInstancetypeSpec is a description of the VirtualMachineInstancetype or VirtualMachineClusterInstancetype.",
  },
);

const cpuPreferencesSchema = obj({
  preferredCPUTopology: strEnum(PREFERRED_CPU_TOPOLOGIES, {
    description:
      "PreferredCPUTopology optionally defines the preferred guest visible CPU topology, defaults to PreferSockets.",
  }),
  spreadOptions: obj({ across: strEnum(SPREAD_ACROSS), ratio: int() }),
  preferredCPUFeatures: arr(obj({ name: str(), policy: str() }, { required: ["name"] })),
});

const devicePreferencesSchema = obj({
  preferredAutoattachGraphicsDevice: bool(),
  preferredAutoattachMemBalloon: bool(),
  preferredAutoattachPodInterface: bool(),
  preferredAutoattachSerialConsole: bool(),
  preferredAutoattachInputDevice: bool(),
  preferredDisableHotplug: bool(),
  preferredVirtualGPUOptions: vgpuOptionsSchema,
  preferredSoundModel: str(),
  preferredUseVirtioTransitional: bool(),
  preferredInputBus: str(),
  preferredInputType: str(),
  preferredDiskBus: str({
    description: "PreferredDiskBus optionally defines the preferred bus for Disk Disk devices.",
  }),
  preferredLunBus: str(),
  preferredCdromBus: str(),
  preferredDiskDedicatedIoThread: bool(),
  preferredDiskCache: str(),
  preferredDiskIO: str(),
  preferredDiskBlockSize: blockSizeSchema,
  preferredInterfaceModel: str({
    description: "PreferredInterfaceModel optionally defines the preferred model to be used by Interface devices.",
  }),
  preferredRng: marker(),
  preferredBlockMultiQueue: bool(),
  preferredNetworkInterfaceMultiQueue: bool(),
  preferredTPM: tpmSchema,
  preferredInterfaceMasquerade: marker(),
  preferredPanicDeviceModel: str(),
  preferredVideoType: str(),
});

const featurePreferencesSchema = obj({
  preferredAcpi: enabledSchema,
  preferredApic: apicSchema,
  preferredHyperv: hypervSchema,
  preferredKvm: kvmFeatureSchema,
  preferredPvspinlock: enabledSchema,
  preferredSmm: enabledSchema,
});

const firmwarePreferencesSchema = obj({
  preferredUseBios: bool(),
  preferredUseBiosSerial: bool(),
  preferredUseEfi: bool(),
  preferredUseSecureBoot: bool(),
  preferredEfi: obj({ secureBoot: bool(), persistent: bool() }),
});

/** VirtualMachinePreferenceSpec. */
export const preferenceSpecSchema = obj(
  {
    clock: obj({ preferredClockOffset: clockOffsetSchema, preferredTimer: timerSchema }),
    cpu: cpuPreferencesSchema,
    devices: devicePreferencesSchema,
    features: featurePreferencesSchema,
    firmware: firmwarePreferencesSchema,
    machine: obj({ preferredMachineType: str() }),
    volumes: obj({ preferredStorageClassName: str() }),
    preferredSubdomain: str(),
    preferredTerminationGracePeriodSeconds: int({ format: "int64" }),
    requirements: obj({
      cpu: obj({ guest: int() }, { required: ["guest"] }),
      memory: obj({ guest: quantity() }, { required: ["guest"] }),
      architecture: str(),
    }),
    annotations: map(str()),
    preferSpreadSocketToCoreRatio: int(),
    preferredArchitecture: str(),
    preferredLaunchSecurity: launchSecuritySchema,
  },
  {
    description:
      "VirtualMachinePreferenceSpec is a description of the VirtualMachinePreference or VirtualMachineClusterPreference.",
  },
);

/** A VirtualMachineInstancetype or VirtualMachineClusterInstancetype (one shape, two scopes). */
export const instancetypeSchema = obj(
  { apiVersion: str(), kind: str(), metadata: objectMetaSchema, spec: instancetypeSpecSchema },
  {
    required: ["spec"],
    description:
      "VirtualMachineInstancetype resource contains quantitative and resource related VirtualMachine configuration\nthat can be used by multiple VirtualMachine resources.",
  },
);

/** A VirtualMachinePreference or VirtualMachineClusterPreference. */
export const preferenceSchema = obj(
  { apiVersion: str(), kind: str(), metadata: objectMetaSchema, spec: preferenceSpecSchema },
  {
    required: ["spec"],
    description: "VirtualMachinePreference resource contains optional preferences related to the VirtualMachine.",
  },
);

/** The VM's `spec.instancetype` / `spec.preference` (InstancetypeMatcher / PreferenceMatcher). */
export const matcherSchema = obj(
  {
    name: str({
      description: "Name is the name of the VirtualMachineInstancetype or VirtualMachineClusterInstancetype",
    }),
    kind: str({
      description:
        'Kind specifies which instancetype resource is referenced.\nAllowed values are: "VirtualMachineInstancetype" and "VirtualMachineClusterInstancetype".\nIf not specified, "VirtualMachineClusterInstancetype" is used by default.',
    }),
    revisionName: str({
      description:
        "RevisionName specifies a ControllerRevision containing a specific copy of the\nVirtualMachineInstancetype or VirtualMachineClusterInstancetype to be used.",
    }),
    inferFromVolume: str({
      description:
        "InferFromVolume lists the name of a volume that should be used to infer or discover the instancetype",
    }),
    inferFromVolumeFailurePolicy: str(),
  },
  { description: "InstancetypeMatcher references a instancetype that is used to fill fields in Template" },
);

/** The VM's `status.instancetypeRef` / `status.preferenceRef` (InstancetypeStatusRef). */
export const instancetypeStatusRefSchema = obj({
  name: str(),
  kind: str(),
  controllerRevisionRef: obj({ name: str({ description: "Name of the ControllerRevision" }) }),
  inferFromVolume: str(),
  inferFromVolumeFailurePolicy: str(),
});
