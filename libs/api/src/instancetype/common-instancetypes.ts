/**
 * KubeVirt's common-instancetypes bundle (github.com/kubevirt/common-instancetypes, release v1.7.0) as the local
 * cluster installs it by default, the way virt-operator deploys it: its seven series of
 * VirtualMachineClusterInstancetypes (65 sizes) and its 54 VirtualMachineClusterPreferences (common-preferences.ts).
 *
 *   series  class              sizes (vCPUs / memory)                                     extra spec
 *   u1      general.purpose    nano 1/512Mi micro 1/1Gi small 1/2Gi medium 1/4Gi           -
 *                              2xmedium 2/4Gi large 2/8Gi xlarge 4/16Gi 2xlarge 8/32Gi
 *                              4xlarge 16/64Gi 8xlarge 32/128Gi
 *   o1      overcommitted      the u1 sizes but 2xmedium                                  memory.overcommitPercent 50
 *   cx1     compute.exclusive  medium 1/2Gi large 2/4Gi xlarge 4/8Gi 2xlarge 8/16Gi       dedicated CPUs, isolated
 *                              4xlarge 16/32Gi 8xlarge 32/64Gi                            emulator thread, NUMA
 *                              (each also as <size>1gi)                                   passthrough, maxSockets =
 *                                                                                         vCPUs, ioThreadsPolicy auto,
 *                                                                                         hugepages 2Mi (1Gi)
 *   m1      memory.intensive   large 2/16Gi xlarge 4/32Gi 2xlarge 8/64Gi 4xlarge 16/128Gi  hugepages 2Mi (1Gi)
 *                              8xlarge 32/256Gi (each also as <size>1gi)
 *   d1      dedicated.vcpu     the u1 sizes                                               dedicated CPUs, isolated
 *                                                                                         emulator thread, ioThreads auto
 *   n1      network            medium 4/4Gi large 4/8Gi xlarge 8/16Gi 2xlarge 16/32Gi     dedicated CPUs, isolated
 *                              4xlarge 32/64Gi 8xlarge 64/128Gi                           emulator thread, hugepages 1Gi,
 *                                                                                         CRI-O balancing off
 *   rt1     realtime           the u1 sizes but nano and 2xmedium                         n1's + NUMA passthrough and
 *                                                                                         realtime
 *
 * The cx1, m1, d1, n1 and rt1 series ask for hugepages or dedicated CPUs, which this platform's machine backends
 * cannot give a guest: they are installed so KubeVirt manifests that name them resolve, and a VM using one is refused
 * at admission naming each such field (validation/unsupported-hardware.ts), never started without them.
 */
import { commonPreferenceEntries, preferenceObject } from "./common-preferences.ts";
import { INSTANCETYPE_API_VERSION } from "./instancetype-constants.ts";
import type { InstancetypeSpec, PreferenceSpec } from "./instancetype-types.ts";

/** The common-instancetypes release whose objects this bundle reproduces (its `common-instancetypes-version` label). */
export const COMMON_INSTANCETYPES_VERSION = "v1.7.0";

/** One object of the bundle. */
export interface BundledObject {
  apiVersion: string;
  kind: "VirtualMachineClusterInstancetype" | "VirtualMachineClusterPreference";
  metadata: { name: string; labels: Record<string, string>; annotations?: Record<string, string> };
  spec: InstancetypeSpec | PreferenceSpec;
}

/** A size of a series: its suffix, vCPUs, guest memory and (hugepage series) the page size. */
type Size = readonly [size: string, cpu: number, memory: string, pageSize?: string];

const U1_SIZES: readonly Size[] = [
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

/** Every size twice: on 2Mi pages, and as `<size>1gi` on 1Gi pages. */
function withHugepages(sizes: readonly (readonly [string, number, string])[]): Size[] {
  return [
    ...sizes.map(([size, cpu, memory]): Size => [size, cpu, memory, "2Mi"]),
    ...sizes.map(([size, cpu, memory]): Size => [`${size}1gi`, cpu, memory, "1Gi"]),
  ];
}

const CX1_SIZES = withHugepages([
  ["medium", 1, "2Gi"],
  ["large", 2, "4Gi"],
  ["xlarge", 4, "8Gi"],
  ["2xlarge", 8, "16Gi"],
  ["4xlarge", 16, "32Gi"],
  ["8xlarge", 32, "64Gi"],
]);

const M1_SIZES = withHugepages([
  ["large", 2, "16Gi"],
  ["xlarge", 4, "32Gi"],
  ["2xlarge", 8, "64Gi"],
  ["4xlarge", 16, "128Gi"],
  ["8xlarge", 32, "256Gi"],
]);

/** One series of the bundle: its annotations, labels, sizes and what every size of it adds to the spec. */
interface Series {
  readonly prefix: string;
  readonly description: string;
  readonly displayName: string;
  readonly className: string;
  readonly icon: string;
  /** Series labels beyond class/icon/version/vendor (cx1's feature flags). */
  readonly labels?: Record<string, string>;
  readonly sizes: readonly Size[];
  /** The spec of one size: what the series adds around its cpu.guest and memory.guest. */
  readonly spec: (cpu: number, memory: string, pageSize: string | undefined) => InstancetypeSpec;
}

const plainSpec = (cpu: number, memory: string): InstancetypeSpec => ({
  cpu: { guest: cpu },
  memory: { guest: memory },
});

const U1: Series = {
  prefix: "u1",
  description:
    'The U Series is quite neutral and provides resources for\ngeneral purpose applications.\n\n*U* is the abbreviation for "Universal", hinting at the universal\nattitude towards workloads.\n\nVMs of instance types will share physical CPU cores on a\ntime-slice basis with other VMs.',
  displayName: "General Purpose",
  className: "general.purpose",
  icon: "pficon-server-group",
  sizes: U1_SIZES,
  spec: plainSpec,
};

const O1: Series = {
  prefix: "o1",
  description:
    'The O Series is based on the U Series, with the only difference\nbeing that memory is overcommitted.\n\n*O* is the abbreviation for "Overcommitted".',
  displayName: "Overcommitted",
  className: "overcommitted",
  icon: "pficon-virtual-machine",
  sizes: U1_SIZES.filter(([size]) => size !== "2xmedium"),
  spec: (cpu, memory) => ({ cpu: { guest: cpu }, memory: { guest: memory, overcommitPercent: 50 } }),
};

const CX1: Series = {
  prefix: "cx1",
  description: [
    "The CX Series provides exclusive compute resources for compute",
    "intensive applications.",
    "",
    '*CX* is the abbreviation of "Compute Exclusive".',
    "",
    "The exclusive resources are given to the compute threads of the",
    "VM. In order to ensure this, some additional cores (depending",
    "on the number of disks and NICs) will be requested to offload",
    "the IO threading from cores dedicated to the workload.",
    "In addition, in this series, the NUMA topology of the used",
    "cores is provided to the VM.",
    "",
    "The amount of spec.cpu.maxSockets is set to the same as",
    "guest cpus. This avoids KubeVirt's default behavior of",
    "providing extra CPUs for hotplugging, which can exceed the",
    "amount of available CPUs on a node and cause the VM to fail.",
    "",
    "Requirements for CX series instance types:",
    "- CPU manager has to be enabled.",
    "- Huge pages have to be available on the nodes.",
  ].join("\n"),
  displayName: "Compute Exclusive",
  className: "compute.exclusive",
  icon: "pficon-registry",
  labels: {
    "instancetype.kubevirt.io/dedicatedCPUPlacement": "true",
    "instancetype.kubevirt.io/isolateEmulatorThread": "true",
    "instancetype.kubevirt.io/numa": "true",
  },
  sizes: CX1_SIZES,
  spec: (cpu, memory, pageSize) => ({
    cpu: {
      guest: cpu,
      maxSockets: cpu,
      dedicatedCPUPlacement: true,
      isolateEmulatorThread: true,
      numa: { guestMappingPassthrough: {} },
    },
    memory: { guest: memory, ...(pageSize ? { hugepages: { pageSize } } : {}) },
    ioThreadsPolicy: "auto",
  }),
};

const M1: Series = {
  prefix: "m1",
  description:
    'The M Series provides resources for memory intensive\napplications.\n\n*M* is the abbreviation of "Memory".',
  displayName: "Memory Intensive",
  className: "memory.intensive",
  icon: "fa-memory",
  sizes: M1_SIZES,
  spec: (cpu, memory, pageSize) => ({
    cpu: { guest: cpu },
    memory: { guest: memory, ...(pageSize ? { hugepages: { pageSize } } : {}) },
  }),
};

const D1: Series = {
  prefix: "d1",
  description: [
    "The D Series is designed for consistent and predictable performance,",
    "providing resources for general purpose applications.",
    "",
    '*D* is the abbreviation for "Dedicated", reflecting the use of',
    "dedicated CPU placement for workloads.",
    "",
    "VMs of this instance type are assigned exclusive physical CPU cores,",
    "avoiding CPU sharing and time-slice contention with other VMs.",
  ].join("\n"),
  displayName: "Dedicated vCPU",
  className: "dedicated.vcpu",
  icon: "pficon-server-group",
  labels: {
    "instancetype.kubevirt.io/dedicatedCPUPlacement": "true",
    "instancetype.kubevirt.io/isolateEmulatorThread": "true",
  },
  sizes: U1_SIZES,
  spec: (cpu, memory) => ({
    cpu: { guest: cpu, dedicatedCPUPlacement: true, isolateEmulatorThread: true },
    memory: { guest: memory },
    ioThreadsPolicy: "auto",
  }),
};

/** CRI-O annotations that turn CPU load balancing, CPU quota and IRQ balancing off for the pod (n1, rt1). */
const NO_CPU_BALANCING = {
  "cpu-load-balancing.crio.io": "disable",
  "cpu-quota.crio.io": "disable",
  "irq-load-balancing.crio.io": "disable",
};

const on1Gi = (sizes: readonly Size[]): Size[] => sizes.map(([size, cpu, memory]): Size => [size, cpu, memory, "1Gi"]);

const N1: Series = {
  prefix: "n1",
  description: [
    "The N Series provides resources for network intensive DPDK",
    "applications, like VNFs.",
    "",
    '*N* is the abbreviation for "Network".',
    "",
    "This series of instancetypes requires nodes capable",
    "of running DPDK workloads and being marked with the respective",
    "node-role.kubevirt.io/worker-dpdk label as such.",
  ].join("\n"),
  displayName: "Network",
  className: "network",
  icon: "pficon-network",
  labels: {
    "instancetype.kubevirt.io/dedicatedCPUPlacement": "true",
    "instancetype.kubevirt.io/isolateEmulatorThread": "true",
  },
  sizes: on1Gi([
    ["medium", 4, "4Gi"],
    ["large", 4, "8Gi"],
    ["xlarge", 8, "16Gi"],
    ["2xlarge", 16, "32Gi"],
    ["4xlarge", 32, "64Gi"],
    ["8xlarge", 64, "128Gi"],
  ]),
  spec: (cpu, memory, pageSize) => ({
    annotations: { ...NO_CPU_BALANCING },
    cpu: { guest: cpu, dedicatedCPUPlacement: true, isolateEmulatorThread: true },
    memory: { guest: memory, ...(pageSize ? { hugepages: { pageSize } } : {}) },
  }),
};

const RT1: Series = {
  prefix: "rt1",
  description: [
    "The RT Series provides resources for realtime applications, like Oslat.",
    "",
    '*RT* is the abbreviation for "realtime".',
    "",
    "This series of instance types requires nodes capable of running",
    "realtime applications.",
  ].join("\n"),
  displayName: "Realtime",
  className: "realtime",
  icon: "pficon-server-group",
  labels: {
    "instancetype.kubevirt.io/dedicatedCPUPlacement": "true",
    "instancetype.kubevirt.io/isolateEmulatorThread": "true",
    "instancetype.kubevirt.io/numa": "true",
    "instancetype.kubevirt.io/realtime": "true",
  },
  sizes: on1Gi(U1_SIZES.filter(([size]) => size !== "nano" && size !== "2xmedium")),
  spec: (cpu, memory, pageSize) => ({
    annotations: { ...NO_CPU_BALANCING },
    cpu: {
      guest: cpu,
      dedicatedCPUPlacement: true,
      isolateEmulatorThread: true,
      numa: { guestMappingPassthrough: {} },
      realtime: {},
    },
    memory: { guest: memory, ...(pageSize ? { hugepages: { pageSize } } : {}) },
  }),
};

function sized(series: Series, [size, cpu, memory, pageSize]: Size): BundledObject {
  return {
    apiVersion: INSTANCETYPE_API_VERSION,
    kind: "VirtualMachineClusterInstancetype",
    metadata: {
      name: `${series.prefix}.${size}`,
      annotations: {
        "instancetype.kubevirt.io/description": series.description,
        "instancetype.kubevirt.io/displayName": series.displayName,
      },
      labels: {
        "instancetype.kubevirt.io/class": series.className,
        "instancetype.kubevirt.io/icon-pf": series.icon,
        "instancetype.kubevirt.io/version": "1",
        "instancetype.kubevirt.io/vendor": "kubevirt.io",
        ...series.labels,
        "instancetype.kubevirt.io/cpu": String(cpu),
        "instancetype.kubevirt.io/memory": memory,
        "instancetype.kubevirt.io/size": size,
        ...(pageSize ? { "instancetype.kubevirt.io/hugepages": pageSize } : {}),
        "instancetype.kubevirt.io/common-instancetypes-version": COMMON_INSTANCETYPES_VERSION,
      },
    },
    spec: series.spec(cpu, memory, pageSize),
  };
}

/** The bundle, freshly built (callers may mutate it). */
export function commonInstancetypes(): BundledObject[] {
  return [
    ...[U1, O1, CX1, M1, D1, N1, RT1].flatMap((series) => series.sizes.map((size) => sized(series, size))),
    ...commonPreferenceEntries().map((e) => preferenceObject(e, COMMON_INSTANCETYPES_VERSION)),
  ];
}
