/**
 * KubeVirt's feature gates (`pkg/virt-config/featuregate`): each gate has a state, and the KubeVirt CR's
 * `spec.configuration.developerConfiguration` turns gates on (`featureGates`) or off (`disabledFeatureGates`).
 *
 *   General Availability   always on; listing it is redundant (a warning says so)
 *   Beta                   on unless listed in disabledFeatureGates
 *   Alpha                  off unless listed in featureGates
 *   Deprecated             listing it only earns a warning
 *   Discontinued           listing it earns a warning; a VMI still using the feature's API is refused
 *
 * Unknown names are ignored, as KubeVirt ignores them.
 */
import type { DeveloperConfiguration } from "../types.ts";

/** A gate's state, spelled as KubeVirt prints it. */
export type FeatureGateState = "Alpha" | "Beta" | "General Availability" | "Deprecated" | "Discontinued";

/** Gate names the admission rules check. */
export const GATE = {
  hostDisk: "HostDisk",
  hostDevices: "HostDevices",
  sidecar: "Sidecar",
  ignition: "ExperimentalIgnitionSupport",
  downwardMetrics: "DownwardMetrics",
  vsock: "VSOCK",
  rebootPolicy: "RebootPolicy",
  reservedOverheadMemlock: "ReservedOverheadMemlock",
  numa: "NUMA",
  declarativeHotplugVolumes: "DeclarativeHotplugVolumes",
  decentralizedLiveMigration: "DecentralizedLiveMigration",
  passt: "Passt",
  macvtap: "Macvtap",
} as const;

const ALPHA = [
  "CPUManager",
  "ExperimentalIgnitionSupport",
  "HypervStrictCheck",
  "Sidecar",
  "HostDevices",
  "HostDisk",
  "DownwardMetrics",
  "Root",
  "WorkloadEncryptionTDX",
  "VSOCK",
  "AlignCPUs",
  "EnableVirtioFsStorageVolumes",
  "PCINUMAAwareTopology",
  "NetworkDevicesWithDRA",
  "ObjectGraph",
  "UtilityVolumes",
  "ConfigurableHypervisor",
  "IncrementalBackup",
  "ContainerPathVolumes",
  "ReservedOverheadMemlock",
  "VGPULiveMigration",
  "VMStatsCollector",
  "OCIExport",
  "Plugins",
  "GraceIOVirtualization",
  "IOMMUFD",
  "FirmwareAutoSelection",
  "MigrationStallDetection",
  "MigrationDowntimeTuning",
  "CrossArchitectureVirtualization",
  "PortRangesSpec",
] as const;

const BETA = [
  "ImageVolume",
  "Snapshot",
  "WorkloadEncryptionSEV",
  "KubevirtSeccompProfile",
  "NodeRestriction",
  "GPUsWithDRA",
  "HostDevicesWithDRA",
  "DecentralizedLiveMigration",
  "DeclarativeHotplugVolumes",
  "PasstBinding",
  "PodSecondaryInterfaceNamingUpgrade",
  "ExternalNetResourceInjection",
  "RebootPolicy",
  "Template",
  "OptOutRoleAggregation",
] as const;

const GA = [
  "LiveMigration",
  "SRIOVLiveMigration",
  "NonRoot",
  "PSA",
  "CPUNodeDiscovery",
  "NUMA",
  "CommonInstancetypesDeploymentGate",
  "GPU",
  "HotplugNICs",
  "BochsDisplayForEFIGuests",
  "VMLiveUpdateFeatures",
  "NetworkBindingPlugins",
  "DynamicPodInterfaceNaming",
  "VolumesUpdateStrategy",
  "VolumeMigration",
  "DisableCustomSELinuxPolicy",
  "AutoResourceLimitsGate",
  "ClusterProfiler",
  "VMPersistentState",
  "VMExport",
  "PersistentReservation",
  "InstancetypeReferencePolicy",
  "EnableVirtioFsConfigVolumes",
  "ExpandDisks",
  "PanicDevices",
  "LiveUpdateNADRef",
  "VideoConfig",
  "SecureExecution",
  "MigrationPriorityQueue",
  "VmiMemoryOverheadReport",
  "LibvirtHooksServerAndClient",
] as const;

/** Deprecated and discontinued gates with the message KubeVirt gives for them. */
const RETIRED: Record<string, { state: "Deprecated" | "Discontinued"; message: string }> = {
  DockerSELinuxMCSWorkaround: {
    state: "Deprecated",
    message: "DockerSELinuxMCSWorkaround has been deprecated since v1.4.",
  },
  MultiArchitecture: { state: "Deprecated", message: "MultiArchitecture has been deprecated since v1.8.0" },
  DisableMDEVConfiguration: {
    state: "Deprecated",
    message: "DisableMDEVConfiguration has been deprecated since v1.8.0",
  },
  HotplugVolumes: {
    state: "Deprecated",
    message: "HotplugVolumes has been deprecated since v1.9.0 and has been replaced by DeclarativeHotplugVolumes",
  },
  ExperimentalVirtiofsSupport: {
    state: "Discontinued",
    message:
      "Virtiofs ExperimentalVirtiofsSupport feature gate is discontinued since v1.7. Please use EnableVirtioFsConfigVolumes or EnableVirtioFsPVC feature gates instead",
  },
  Passt: {
    state: "Discontinued",
    message: "Passt network binding is discontinued since v1.3. Please refer to Kubevirt user guide for alternatives.",
  },
  Macvtap: {
    state: "Discontinued",
    message:
      "Macvtap network binding is discontinued since v1.3. Please refer to Kubevirt user guide for alternatives.",
  },
  PasstIPStackMigration: {
    state: "Discontinued",
    message:
      "Seamless migration with passt network binding plugin is no longer supported since KubeVirt v1.8. Please use the passt core binding instead.",
  },
};

/** KubeVirt's warning for listing a gate that is GA, deprecated or discontinued without a message of its own. */
function redundantGateWarning(name: string, state: FeatureGateState): string {
  return `feature gate ${name} is deprecated (feature state is "${state}"), therefore it can be safely removed and is redundant. For more info, please look at: https://github.com/kubevirt/kubevirt/blob/main/docs/deprecation.md`;
}

/** The state of gate `name`, undefined for a name KubeVirt does not know. */
export function featureGateState(name: string): FeatureGateState | undefined {
  if ((ALPHA as readonly string[]).includes(name)) return "Alpha";
  if ((BETA as readonly string[]).includes(name)) return "Beta";
  if ((GA as readonly string[]).includes(name)) return "General Availability";
  return RETIRED[name]?.state;
}

/** KubeVirt's `IsEnabled`: GA always; a listed gate; a beta gate not disabled. */
export function featureGateEnabled(name: string, config: DeveloperConfiguration | undefined): boolean {
  const state = featureGateState(name);
  if (state === undefined) return false;
  if (state === "General Availability") return true;
  if (config?.featureGates?.includes(name)) return true;
  if (config?.disabledFeatureGates?.includes(name)) return false;
  return state === "Beta";
}

/** The warnings KubeVirt gives for the gates a KubeVirt CR lists: GA, deprecated and discontinued ones. */
export function featureGateWarnings(config: DeveloperConfiguration | undefined): string[] {
  const out: string[] = [];
  for (const name of config?.featureGates ?? []) {
    const state = featureGateState(name);
    if (state === undefined || state === "Alpha" || state === "Beta") continue;
    out.push(RETIRED[name]?.message ?? redundantGateWarning(name, state));
  }
  return out;
}

/** The message of a retired gate (what a VMI using a discontinued gate's API is refused with). */
export function retiredGateMessage(name: string): string | undefined {
  return RETIRED[name]?.message;
}
