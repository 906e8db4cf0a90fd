/** VirtualMachineInstance status and object (kubevirt.io/v1). */
import { MIGRATION_METHODS, VMI_PHASES } from "../constants.ts";
import { arr, bool, int, map, obj, quantity, str, strEnum, time } from "./builder.ts";
import { conditionSchema, objectMetaSchema } from "./meta.ts";
import { migrationStateSchema } from "./migration-schemas.ts";
import { vmiSpecSchema } from "./vmi-spec.ts";

/** One entry of `status.interfaces` (the guest's addresses). */
export const vmiInterfaceStatusSchema = obj({
  name: str({ description: "Name of the interface, corresponds to name of the network assigned to the interface" }),
  ipAddress: str({ description: "IP address of a Virtual Machine interface. It is always the first item of\nIPs" }),
  ipAddresses: arr(str()),
  mac: str({ description: "Hardware address of a Virtual Machine interface" }),
  interfaceName: str({ description: "The interface name inside the Virtual Machine" }),
  podInterfaceName: str(),
  infoSource: str(),
  queueCount: int(),
  linkState: str(),
});

/** PersistentVolumeClaimInfo: what a volume's claim looked like when the VMI used it. */
export const pvcInfoSchema = obj({
  claimName: str(),
  accessModes: arr(str()),
  volumeMode: str(),
  capacity: map(quantity()),
  requests: map(quantity()),
  preallocated: bool(),
  filesystemOverhead: str(),
});

/** ChangedBlockTrackingStatus (VM and VMI status). */
export const changedBlockTrackingStatusSchema = obj(
  {
    state: str(),
    backupStatus: obj({
      backupName: str(),
      checkpointName: str(),
      backupMsg: str(),
      completed: bool(),
      failed: bool(),
      quiesceStatus: str(),
      startTimestamp: time({ nullable: true }),
      endTimestamp: time({ nullable: true }),
      volumes: arr(obj({ volumeName: str() }, { required: ["volumeName"] })),
    }),
  },
  { required: ["state"] },
);

const checksum = obj({ checksum: int({ format: "int64" }) });

/** One entry of `status.volumeStatus`. */
export const volumeStatusSchema = obj(
  {
    name: str(),
    target: str(),
    phase: str(),
    reason: str(),
    message: str(),
    persistentVolumeClaimInfo: pvcInfoSchema,
    hotplugVolume: obj({ attachPodName: str(), attachPodUID: str() }),
    size: int({ format: "int64" }),
    memoryDumpVolume: obj({
      claimName: str(),
      targetFileName: str(),
      startTimestamp: time({ nullable: true }),
      endTimestamp: time({ nullable: true }),
    }),
    containerDiskVolume: checksum,
  },
  { required: ["name", "target"] },
);

/** VirtualMachineInstanceStatus. */
export const vmiStatusSchema = obj(
  {
    nodeName: str({ description: "NodeName is the name where the VirtualMachineInstance is currently running." }),
    reason: str({
      description:
        "A brief CamelCase message indicating details about why the VMI is in this state. e.g. 'NodeUnresponsive'",
    }),
    conditions: arr(conditionSchema, {
      description: "Conditions are specific points in VirtualMachineInstance's pod runtime.",
    }),
    phase: strEnum(VMI_PHASES, {
      description:
        "Phase is the status of the VirtualMachineInstance in kubernetes world. It is not the VirtualMachineInstance status, but partially correlates to it.",
    }),
    phaseTransitionTimestamps: arr(
      obj({ phase: strEnum(VMI_PHASES), phaseTransitionTimestamp: time({ nullable: true }) }),
      {
        description: "PhaseTransitionTimestamp is the timestamp of when the last phase change occurred",
      },
    ),
    interfaces: arr(vmiInterfaceStatusSchema, {
      description: "Interfaces represent the details of available network interfaces.",
    }),
    guestOSInfo: obj(
      {
        name: str(),
        kernelRelease: str(),
        version: str(),
        prettyName: str(),
        versionId: str(),
        kernelVersion: str(),
        machine: str(),
        id: str(),
      },
      { description: "Guest OS Information" },
    ),
    migrationState: migrationStateSchema,
    migrationMethod: strEnum(MIGRATION_METHODS, {
      description: "Represents the method using which the vmi can be migrated: live migration or block migration",
    }),
    migrationTransport: str({ description: "This represents the migration transport" }),
    qosClass: str(),
    launcherContainerImageVersion: str({
      description: "LauncherContainerImageVersion indicates what container image is currently active for the vmi.",
    }),
    evacuationNodeName: str({
      description:
        "EvacuationNodeName is used to track the eviction process of a VMI. It stores the name of the node that we want\nto evacuate. It is meant to be used by KubeVirt core components only and can't be set or modified by users.",
    }),
    activePods: map(str(), {
      description:
        "ActivePods is a mapping of pod UID to node name.\nIt is possible for multiple pods to be running for a single VMI during migration.",
    }),
    volumeStatus: arr(volumeStatusSchema),
    kernelBootStatus: obj({ kernelInfo: checksum, initrdInfo: checksum }),
    fsFreezeStatus: str(),
    topologyHints: obj({ tscFrequency: int({ format: "int64" }) }),
    migratedVolumes: arr(
      obj(
        { volumeName: str(), sourcePVCInfo: pvcInfoSchema, destinationPVCInfo: pvcInfoSchema },
        { required: ["volumeName"] },
      ),
    ),
    changedBlockTracking: changedBlockTrackingStatusSchema,
    virtualMachineRevisionName: str(),
    runtimeUser: int({ format: "int64" }),
    VSOCKCID: int({ format: "int64" }),
    selinuxContext: str(),
    machine: obj({ type: str() }),
    currentCPUTopology: obj({
      cores: int({ format: "int64" }),
      sockets: int({ format: "int64" }),
      threads: int({ format: "int64" }),
    }),
    memory: obj({
      guestAtBoot: quantity(),
      guestCurrent: quantity(),
      guestRequested: quantity(),
      memoryOverhead: quantity(),
    }),
  },
  {
    description:
      "Status is the high level overview of how the VirtualMachineInstance is doing. It contains information available to controllers and users.",
  },
);

/** VirtualMachineInstance. */
export const vmiSchema = obj(
  {
    apiVersion: str(),
    kind: str(),
    metadata: objectMetaSchema,
    spec: vmiSpecSchema,
    status: vmiStatusSchema,
  },
  {
    required: ["spec"],
    description:
      "VirtualMachineInstance is *the* VirtualMachineInstance Definition. It represents a virtual machine in the runtime environment of kubernetes.",
  },
);
