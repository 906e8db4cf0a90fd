/** VirtualMachine spec, status and object (kubevirt.io/v1). */
import { PRINTABLE_STATUSES, RUN_STRATEGIES, STATE_CHANGE_ACTIONS } from "../constants.ts";
import { instancetypeStatusRefSchema, matcherSchema } from "../instancetype/instancetype-schemas.ts";
import { arr, bool, int, map, obj, str, strEnum, time } from "./builder.ts";
import { dataVolumeTemplateSchema } from "./datavolume.ts";
import { conditionSchema, objectMetaSchema } from "./meta.ts";
import { changedBlockTrackingStatusSchema, pvcInfoSchema } from "./vmi-schemas.ts";
import { diskSchema, vmiSpecSchema } from "./vmi-spec.ts";

/** The VMI template of a VM: metadata (labels, annotations) plus a VMI spec. */
export const vmiTemplateSchema = obj(
  {
    metadata: objectMetaSchema,
    spec: vmiSpecSchema,
  },
  { description: "Template is the direct specification of VirtualMachineInstance" },
);

/** VirtualMachineSpec. */
export const vmSpecSchema = obj(
  {
    running: bool({
      description:
        'Running controls whether the associatied VirtualMachineInstance is created or not\nMutually exclusive with RunStrategy\nDeprecated: VirtualMachineInstance field "Running" is now deprecated, please use RunStrategy instead.',
    }),
    runStrategy: strEnum(RUN_STRATEGIES, {
      description:
        'Running state indicates the requested running state of the VirtualMachineInstance\nmutually exclusive with Running\nFollowing are allowed values:\n- "Always": VMI should always be running.\n- "Halted": VMI should never be running.\n- "Manual": VMI can be started/stopped using API endpoints.\n- "RerunOnFailure": VMI will initially be running and restarted if a failure occurs, but will not be restarted upon successful completion.\n- "Once": VMI will run once and not be restarted upon completion regardless if the completion is of phase Failure or Success.',
    }),
    template: vmiTemplateSchema,
    instancetype: matcherSchema,
    preference: {
      ...matcherSchema,
      description: "PreferenceMatcher references a set of preference that is used to fill fields in Template",
    },
    dataVolumeTemplates: arr(dataVolumeTemplateSchema, {
      description:
        "dataVolumeTemplates is a list of dataVolumes that the VirtualMachineInstance template can reference.",
    }),
    updateVolumesStrategy: str(),
  },
  { required: ["template"], description: "Spec contains the specification of VirtualMachineInstance created" },
);

/** One pending start/stop request (virt-api appends, virt-controller consumes element [0]). */
export const stateChangeRequestSchema = obj(
  {
    action: strEnum(STATE_CHANGE_ACTIONS, {
      description: "Indicates the type of action that is requested. e.g. Start or Stop",
    }),
    data: map(str(), { description: "Provides additional data in order to perform the Action" }),
    uid: str({
      description:
        "Indicates the UUID of an existing Virtual Machine Instance that this change request applies to -- if applicable",
    }),
  },
  { required: ["action"] },
);

/** VirtualMachineStatus. */
export const vmStatusSchema = obj(
  {
    created: bool({ description: "Created indicates if the virtual machine is created in the cluster" }),
    ready: bool({ description: "Ready indicates if the virtual machine is running and ready" }),
    printableStatus: strEnum(PRINTABLE_STATUSES, {
      description:
        "PrintableStatus is a human readable, high-level representation of the status of the virtual machine",
    }),
    conditions: arr(conditionSchema, {
      description: "Hold the state information of the VirtualMachine and its VirtualMachineInstance",
    }),
    stateChangeRequests: arr(stateChangeRequestSchema, {
      description:
        "StateChangeRequests indicates a list of actions that should be taken on a VMI\ne.g. stop a specific VMI then start a new one.",
    }),
    startFailure: obj(
      {
        consecutiveFailCount: int(),
        lastFailedVMIUID: str(),
        retryAfterTimestamp: time({ nullable: true }),
      },
      {
        nullable: true,
        description: "StartFailure tracks consecutive VMI startup failures for the purposes of\ncrash loop backoffs",
      },
    ),
    observedGeneration: int({
      format: "int64",
      description: "ObservedGeneration is the generation observed by the vmi when started.",
    }),
    desiredGeneration: int({
      format: "int64",
      description:
        "DesiredGeneration is the generation which is desired for the VMI.\nThis will be used in comparisons with ObservedGeneration to understand when\nthe VMI is out of sync. This will be changed at the same time as\nObservedGeneration to remove errors which could occur if Generation is\nupdated through an Update() before ObservedGeneration in Status.",
    }),
    runStrategy: strEnum(RUN_STRATEGIES, {
      description:
        "RunStrategy tracks the last recorded RunStrategy used by the VM.\nThis is needed to correctly process the next strategy (for now only the RerunOnFailure)",
    }),
    snapshotInProgress: str(),
    restoreInProgress: str(),
    volumeRequests: arr(
      obj({
        addVolumeOptions: obj(
          {
            name: str(),
            disk: diskSchema,
            volumeSource: obj({
              persistentVolumeClaim: obj(
                { claimName: str(), readOnly: bool(), hotpluggable: bool() },
                { required: ["claimName"] },
              ),
              dataVolume: obj({ name: str(), hotpluggable: bool() }, { required: ["name"] }),
            }),
            dryRun: arr(str()),
          },
          { required: ["name", "disk", "volumeSource"] },
        ),
        removeVolumeOptions: obj({ name: str(), dryRun: arr(str()) }, { required: ["name"] }),
      }),
      { description: "Hotplug requests (virtctl addvolume / removevolume) not yet applied to the VMI." },
    ),
    volumeSnapshotStatuses: arr(
      obj({ name: str(), enabled: bool(), reason: str() }, { required: ["name", "enabled"] }),
    ),
    volumeUpdateState: obj({
      volumeMigrationState: obj({
        migratedVolumes: arr(
          obj(
            { volumeName: str(), sourcePVCInfo: pvcInfoSchema, destinationPVCInfo: pvcInfoSchema },
            { required: ["volumeName"] },
          ),
        ),
      }),
    }),
    memoryDumpRequest: obj(
      {
        claimName: str(),
        phase: str(),
        remove: bool(),
        startTimestamp: time({ nullable: true }),
        endTimestamp: time({ nullable: true }),
        fileName: str(),
        message: str(),
      },
      { required: ["claimName", "phase"] },
    ),
    changedBlockTracking: changedBlockTrackingStatusSchema,
    instancetypeRef: {
      ...instancetypeStatusRefSchema,
      description: "InstancetypeRef captures the state of any referenced instance type from the VirtualMachine",
    },
    preferenceRef: {
      ...instancetypeStatusRefSchema,
      description: "PreferenceRef captures the state of any referenced preference from the VirtualMachine",
    },
  },
  {
    description:
      "Status holds the current state of the controller and brief information\nabout its associated VirtualMachineInstance",
  },
);

/** VirtualMachine. */
export const vmSchema = obj(
  {
    apiVersion: str(),
    kind: str(),
    metadata: objectMetaSchema,
    spec: vmSpecSchema,
    status: vmStatusSchema,
  },
  {
    required: ["spec"],
    description:
      "VirtualMachine handles the VirtualMachines that are not running\nor are in a stopped state\nThe VirtualMachine contains the template to create the\nVirtualMachineInstance. It also mirrors the running state of the created\nVirtualMachineInstance in its status.",
  },
);
