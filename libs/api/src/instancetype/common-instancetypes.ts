/**
 * The part of KubeVirt's common-instancetypes bundle (github.com/kubevirt/common-instancetypes) that the local
 * cluster installs by default, as virt-operator deploys it: the U ("Universal", general purpose) and O
 * ("Overcommitted": the U sizes but 2xmedium, memory overcommitPercent 50) series of VirtualMachineClusterInstancetypes
 * and the `linux` and `cirros` VirtualMachineClusterPreferences.
 *
 * | name        | vCPUs | memory |      | name        | vCPUs | memory |
 * | ----------- | ----- | ------ | ---- | ----------- | ----- | ------ |
 * | u1.nano     | 1     | 512Mi  |      | u1.large    | 2     | 8Gi    |
 * | u1.micro    | 1     | 1Gi    |      | u1.xlarge   | 4     | 16Gi   |
 * | u1.small    | 1     | 2Gi    |      | u1.2xlarge  | 8     | 32Gi   |
 * | u1.medium   | 1     | 4Gi    |      | u1.4xlarge  | 16    | 64Gi   |
 * | u1.2xmedium | 2     | 4Gi    |      | u1.8xlarge  | 32    | 128Gi  |
 */
import { INSTANCETYPE_API_VERSION } from "./instancetype-constants.ts";
import type { InstancetypeSpec, PreferenceSpec } from "./instancetype-types.ts";

/** One object of the bundle. */
export interface BundledObject {
  apiVersion: string;
  kind: "VirtualMachineClusterInstancetype" | "VirtualMachineClusterPreference";
  metadata: { name: string; labels: Record<string, string>; annotations?: Record<string, string> };
  spec: InstancetypeSpec | PreferenceSpec;
}

const U1_SIZES: readonly [size: string, cpu: number, memory: string][] = [
  ["nano", 1, "512Mi"],
  ["micro", 1, "1Gi"],
  ["small", 1, "2Gi"],
  ["medium", 1, "4Gi"],
  ["2xmedium", 2, "4Gi"],
  ["large", 2, "8Gi"],
  ["xlarge", 4, "16Gi"],
  ["2xlarge", 8, "32Gi"],
  ["4xlarge", 16, "64Gi"],
  ["8xlarge", 32, "128Gi"],
];

/** One series of the bundle: its annotations, class labels and what every size of it adds to cpu/memory. */
interface Series {
  readonly prefix: string;
  readonly description: string;
  readonly displayName: string;
  readonly useCaseExamples?: string;
  readonly className: string;
  readonly icon: string;
  readonly memory?: Partial<InstancetypeSpec["memory"]>;
  readonly sizes: readonly string[];
}

const U1: Series = {
  prefix: "u1",
  description:
    'The U Series is quite neutral and provides resources for\ngeneral purpose applications.\n\n*U* is the abbreviation for "Universal", hinting at the universal\nattitude towards workloads.\n\nVMs of instance types will share physical CPU cores on a\ntime-slice basis with other VMs.',
  displayName: "General Purpose",
  useCaseExamples: "Client, Desktop, VDI",
  className: "general.purpose",
  icon: "pficon-server-group",
  sizes: U1_SIZES.map(([size]) => size),
};

const O1: Series = {
  prefix: "o1",
  description:
    'The O Series is based on the U Series, with the only difference\nbeing that memory is overcommitted.\n\n*O* is the abbreviation for "Overcommitted".',
  displayName: "Overcommitted",
  className: "overcommitted",
  icon: "pficon-virtual-machine",
  memory: { overcommitPercent: 50 },
  sizes: U1_SIZES.map(([size]) => size).filter((size) => size !== "2xmedium"),
};

function sized(series: Series, size: string, cpu: number, memory: string): BundledObject {
  return {
    apiVersion: INSTANCETYPE_API_VERSION,
    kind: "VirtualMachineClusterInstancetype",
    metadata: {
      name: `${series.prefix}.${size}`,
      annotations: {
        "instancetype.kubevirt.io/description": series.description,
        "instancetype.kubevirt.io/displayName": series.displayName,
        ...(series.useCaseExamples ? { "instancetype.kubevirt.io/useCaseExamples": series.useCaseExamples } : {}),
      },
      labels: {
        "instancetype.kubevirt.io/class": series.className,
        "instancetype.kubevirt.io/icon-pf": series.icon,
        "instancetype.kubevirt.io/version": "1",
        "instancetype.kubevirt.io/vendor": "kubevirt.io",
        "instancetype.kubevirt.io/cpu": String(cpu),
        "instancetype.kubevirt.io/memory": memory,
        "instancetype.kubevirt.io/size": size,
        "instancetype.kubevirt.io/common-instancetypes-version": "local",
      },
    },
    spec: { cpu: { guest: cpu }, memory: { guest: memory, ...series.memory } },
  };
}

function series(s: Series): BundledObject[] {
  return U1_SIZES.filter(([size]) => s.sizes.includes(size)).map(([size, cpu, memory]) => sized(s, size, cpu, memory));
}

/** The `linux` preference: virtio disks and interfaces, a virtio RNG; cirros adds its minimum size. */
function linuxPreference(name: string, extra: PreferenceSpec = {}, labels: Record<string, string> = {}): BundledObject {
  return {
    apiVersion: INSTANCETYPE_API_VERSION,
    kind: "VirtualMachineClusterPreference",
    metadata: {
      name,
      annotations: {
        "openshift.io/provider-display-name": "KubeVirt",
        "openshift.io/documentation-url": "https://github.com/kubevirt/common-instancetypes",
        "openshift.io/support-url": "https://github.com/kubevirt/common-instancetypes/issues",
      },
      labels: {
        "instancetype.kubevirt.io/os-type": "linux",
        "instancetype.kubevirt.io/vendor": "kubevirt.io",
        "instancetype.kubevirt.io/common-instancetypes-version": "local",
        ...labels,
      },
    },
    spec: {
      annotations: { "vm.kubevirt.io/os": "linux" },
      devices: { preferredDiskBus: "virtio", preferredInterfaceModel: "virtio", preferredRng: {} },
      ...extra,
    },
  };
}

/** The bundle, freshly built (callers may mutate it). */
export function commonInstancetypes(): BundledObject[] {
  return [
    ...series(U1),
    ...series(O1),
    linuxPreference("linux"),
    linuxPreference(
      "cirros",
      { requirements: { cpu: { guest: 1 }, memory: { guest: "256Mi" } } },
      { "instancetype.kubevirt.io/required-cpu": "1", "instancetype.kubevirt.io/required-memory": "256Mi" },
    ),
  ];
}
