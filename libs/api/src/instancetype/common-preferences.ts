/**
 * The VirtualMachineClusterPreferences of KubeVirt's common-instancetypes bundle (release v1.7.0), 54 of them, built
 * the way the upstream kustomize tree composes them: an OS base (linux, windows, legacy) plus components.
 *
 *   linux base     vm.kubevirt.io/os linux; virtio disk bus and interface model; a virtio RNG
 *   requirements   minimum vCPUs/memory (+ required-cpu/-memory labels)
 *   arch           preferred and required architecture (+ arch labels); amd64 adds secure-boot EFI with SMM
 *   efi            EFI without secure boot (debian, oraclelinux, linux.efi)
 *   ioThread       a dedicated IO thread per disk (RHEL 9/10, CentOS Stream)
 *   desktop        an autoattached virtio tablet
 *   dpdk           8 vCPUs spread 4:1 across sockets/cores/threads, multi-queue NICs
 *   windows base   vm.kubevirt.io/os windows; SATA + e1000e; sockets topology; UTC clock with Hyper-V timers;
 *                  ACPI, APIC and the Hyper-V enlightenments; an input device; 3600 s grace period
 *   .virtio        virtio disk, NIC, tablet and video for a Windows guest with the virtio drivers
 *
 * A preference only supplies defaults; what a VM then asks for is admitted like any other VM (a Windows 11 VM gets
 * `preferredTPM`, which this platform refuses at admission with the reason).
 */
import { INSTANCETYPE_API_VERSION } from "./instancetype-constants.ts";
import type { PreferenceSpec } from "./instancetype-types.ts";

/** One preference of the bundle, before its common metadata is added. */
export interface PreferenceEntry {
  readonly name: string;
  readonly displayName: string;
  readonly icon: string;
  readonly tags: string;
  readonly osType: "linux" | "windows" | "legacy";
  readonly labels: Record<string, string>;
  readonly spec: PreferenceSpec;
}

type Plain = Record<string, unknown>;
/** A component: spec fields and labels it adds. */
interface Part {
  readonly spec?: Plain;
  readonly labels?: Record<string, string>;
}

const isPlain = (v: unknown): v is Plain => typeof v === "object" && v !== null && !Array.isArray(v);

function merge(a: Plain, b: Plain): Plain {
  const out: Plain = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] = isPlain(prev) && isPlain(v) && Object.keys(v).length > 0 ? merge(prev, v) : structuredClone(v);
  }
  return out;
}

const requirements = (cpu: number, memory: string): Part => ({
  spec: { requirements: { cpu: { guest: cpu }, memory: { guest: memory } } },
  labels: { "instancetype.kubevirt.io/required-cpu": String(cpu), "instancetype.kubevirt.io/required-memory": memory },
});

const SECURE_BOOT: Part = {
  spec: { features: { preferredSmm: {} }, firmware: { preferredEfi: { secureBoot: true } } },
};
const EFI: Part = { spec: { firmware: { preferredEfi: { secureBoot: false } } } };
const IO_THREAD: Part = { spec: { devices: { preferredDiskDedicatedIoThread: true } } };
const DESKTOP: Part = {
  spec: {
    devices: { preferredAutoattachInputDevice: true, preferredInputBus: "virtio", preferredInputType: "tablet" },
  },
};
const MULTI_QUEUE: Part = { spec: { devices: { preferredNetworkInterfaceMultiQueue: true } } };
const DPDK: Part = {
  spec: { cpu: { preferredCPUTopology: "spread", spreadOptions: { across: "SocketsCoresThreads", ratio: 4 } } },
};

/** Preferred and required architecture; amd64 guests also get secure-boot EFI with SMM. */
function arch(a: "amd64" | "arm64" | "s390x"): Part[] {
  const part: Part = {
    spec: { preferredArchitecture: a, requirements: { architecture: a } },
    labels: {
      "instancetype.kubevirt.io/arch": a,
      "instancetype.kubevirt.io/preferred-architecture": a,
      "instancetype.kubevirt.io/required-architecture": a,
    },
  };
  return a === "amd64" ? [part, SECURE_BOOT] : [part];
}

const LINUX: Part = {
  spec: {
    annotations: { "vm.kubevirt.io/os": "linux" },
    devices: { preferredDiskBus: "virtio", preferredInterfaceModel: "virtio", preferredRng: {} },
  },
};

function compose(parts: readonly Part[]): { spec: PreferenceSpec; labels: Record<string, string> } {
  let spec: Plain = {};
  let labels: Record<string, string> = {};
  for (const p of parts) {
    spec = merge(spec, p.spec ?? {});
    labels = { ...labels, ...p.labels };
  }
  return { spec, labels };
}

function linux(name: string, displayName: string, icon: string, tags: string, parts: readonly Part[]): PreferenceEntry {
  return { name, displayName, icon, tags, osType: "linux", ...compose([LINUX, ...parts]) };
}

/** Red Hat Enterprise Linux 7 to 10, with the desktop, DPDK and realtime flavours. */
function rhelPreferences(): PreferenceEntry[] {
  const hidden = (t: string): string => `hidden,kubevirt,${t}`;
  const rhel = (v: string, parts: readonly Part[], display = `Red Hat Enterprise Linux ${v}`, extraTag = "") =>
    linux(`rhel.${v}`, display, "icon-rhel", hidden(`linux,rhel${extraTag}`), parts);
  const rhelArch = (v: string, a: "amd64" | "arm64" | "s390x") =>
    linux(
      a === "amd64" ? `rhel.${v}` : `rhel.${v}.${a}`,
      `Red Hat Enterprise Linux ${v} (${a})`,
      "icon-rhel",
      hidden("linux,rhel"),
      [IO_THREAD, requirements(1, "1.5Gi"), ...arch(a)],
    );
  const rhel9 = [IO_THREAD, ...arch("amd64")];
  return [
    rhelArch("10", "amd64"),
    rhelArch("10", "arm64"),
    rhelArch("10", "s390x"),
    rhel("7", [requirements(1, "1Gi")]),
    { ...rhel("7", [requirements(1, "1Gi"), DESKTOP]), name: "rhel.7.desktop" },
    rhel("8", [requirements(1, "1.5Gi")]),
    { ...rhel("8", [requirements(1, "1.5Gi"), DESKTOP]), name: "rhel.8.desktop" },
    { ...rhel("8", [requirements(8, "1.5Gi"), DPDK, MULTI_QUEUE], undefined, ",dpdk"), name: "rhel.8.dpdk" },
    rhelArch("9", "amd64"),
    rhelArch("9", "arm64"),
    {
      ...rhel("9", [...rhel9, requirements(1, "1.5Gi"), DESKTOP], "Red Hat Enterprise Linux 9 Desktop (amd64)"),
      name: "rhel.9.desktop",
    },
    {
      ...rhel(
        "9",
        [...rhel9, requirements(8, "1.5Gi"), DPDK, MULTI_QUEUE],
        "Red Hat Enterprise Linux 9 DPDK (amd64)",
        ",dpdk",
      ),
      name: "rhel.9.dpdk",
    },
    {
      ...rhel(
        "9",
        [
          ...rhel9,
          requirements(4, "4Gi"),
          MULTI_QUEUE,
          {
            spec: {
              cpu: { preferredCPUTopology: "spread", spreadOptions: { across: "SocketsCoresThreads" } },
              devices: {
                preferredAutoattachGraphicsDevice: false,
                preferredAutoattachMemBalloon: false,
                preferredAutoattachSerialConsole: true,
              },
            },
          },
        ],
        "Red Hat Enterprise Linux 9 Realtime (amd64)",
        ",realtime",
      ),
      name: "rhel.9.realtime",
    },
    rhelArch("9", "s390x"),
  ];
}

function linuxPreferences(): PreferenceEntry[] {
  const hidden = (t: string): string => `hidden,kubevirt,${t}`;
  const centos = (v: string, parts: readonly Part[] = [], suffix = "", extraTag = "") =>
    linux(`centos.stream${v}${suffix}`, `CentOS Stream ${v}`, "icon-centos", hidden(`linux,centos-stream${extraTag}`), [
      IO_THREAD,
      requirements(1, "1.5Gi"),
      ...parts,
    ]);
  const fedora = (a: "amd64" | "arm64" | "s390x") =>
    linux(a === "amd64" ? "fedora" : `fedora.${a}`, `Fedora (${a})`, "icon-fedora", hidden("fedora"), [
      requirements(1, "2Gi"),
      ...arch(a),
    ]);
  return [
    linux("alpine", "Alpine", "icon-alpine", hidden("alpine"), [requirements(1, "512Mi")]),
    centos("10"),
    centos("10", [DESKTOP], ".desktop"),
    centos("9"),
    centos("9", [DESKTOP], ".desktop"),
    linux("centos.stream9.dpdk", "CentOS Stream 9", "icon-centos", hidden("linux,centos-stream,dpdk"), [
      IO_THREAD,
      requirements(8, "1.5Gi"),
      DPDK,
      MULTI_QUEUE,
    ]),
    linux("cirros", "Cirros", "icon-cirros", hidden("cirros"), [requirements(1, "256Mi")]),
    linux("debian", "Debian", "icon-debian", hidden("debian"), [requirements(1, "512Mi"), EFI]),
    fedora("amd64"),
    fedora("arm64"),
    fedora("s390x"),
    linux("linux", "Linux Guest", "icon-linux", hidden("linux"), []),
    linux("linux.efi", "Linux EFI Guest", "icon-linux", hidden("linux-efi"), [EFI]),
    linux(
      "linux.virtiotransitional",
      "Linux Virtio Transitional Guest",
      "icon-linux",
      hidden("linux-virtio-transitional"),
      [{ spec: { devices: { preferredUseVirtioTransitional: true } } }],
    ),
    linux("opensuse.leap", "OpenSUSE Leap", "icon-opensuse-leap", hidden("opensuse.leap"), [requirements(1, "2Gi")]),
    linux("opensuse.tumbleweed", "OpenSUSE Tumbleweed", "icon-opensuse-tumbleweed", hidden("opensuse.tumbleweed"), [
      requirements(1, "2Gi"),
    ]),
    linux("oraclelinux", "Oracle Linux", "icon-oracle", hidden("oraclelinux"), [requirements(2, "4Gi"), EFI]),
    ...rhelPreferences(),
    linux("sles", "SUSE Linux Enterprise Server", "icon-sles", hidden("sles"), [requirements(1, "2Gi")]),
    linux("ubuntu", "Ubuntu", "icon-ubuntu", hidden("ubuntu"), [requirements(1, "2Gi")]),
  ];
}

const WINDOWS: Part = {
  spec: {
    annotations: { "vm.kubevirt.io/os": "windows" },
    clock: {
      preferredClockOffset: { utc: {} },
      preferredTimer: {
        hpet: { present: false },
        hyperv: {},
        pit: { tickPolicy: "delay" },
        rtc: { tickPolicy: "catchup" },
      },
    },
    cpu: { preferredCPUTopology: "sockets" },
    devices: { preferredAutoattachInputDevice: true, preferredDiskBus: "sata", preferredInterfaceModel: "e1000e" },
    features: {
      preferredAcpi: {},
      preferredApic: {},
      preferredHyperv: {
        frequencies: {},
        ipi: {},
        reenlightenment: {},
        relaxed: {},
        reset: {},
        runtime: {},
        spinlocks: { spinlocks: 8191 },
        synic: {},
        synictimer: { direct: {} },
        tlbflush: {},
        vapic: {},
        vpindex: {},
      },
    },
    preferredTerminationGracePeriodSeconds: 3600,
  },
};

const WINDOWS_VIRTIO: Part = {
  spec: {
    devices: {
      preferredDiskBus: "virtio",
      preferredInterfaceModel: "virtio",
      preferredInputBus: "virtio",
      preferredInputType: "tablet",
      preferredVideoType: "virtio",
    },
  },
};
const TPM: Part = {
  spec: { devices: { preferredTPM: { persistent: true } }, firmware: { preferredEfi: { persistent: true } } },
};
const NO_PCI_HOLE64: Part = { spec: { annotations: { "kubevirt.io/disablePCIHole64": "true" } } };
const nic = (model: string): Part => ({ spec: { devices: { preferredInterfaceModel: model } } });

/** A Windows version: its name suffix, display name, minimum size, extra parts, and whether a .virtio twin exists. */
type WindowsVersion = readonly [
  suffix: string,
  display: string,
  cpu: number,
  memory: string,
  parts: Part[],
  virtio: boolean,
];

const WINDOWS_VERSIONS: readonly WindowsVersion[] = [
  ["10", "Microsoft Windows 10", 1, "2Gi", [SECURE_BOOT], true],
  ["11", "Microsoft Windows 11", 2, "4Gi", [SECURE_BOOT, TPM], true],
  ["2k12", "Microsoft Windows Server 2012/2012 R2", 1, "512Mi", [], true],
  ["2k16", "Microsoft Windows Server 2016", 1, "2Gi", [SECURE_BOOT], true],
  ["2k19", "Microsoft Windows Server 2019", 1, "2Gi", [SECURE_BOOT], true],
  ["2k22", "Microsoft Windows Server 2022", 1, "2Gi", [SECURE_BOOT, TPM], true],
  ["2k25", "Microsoft Windows Server 2025", 1, "2Gi", [SECURE_BOOT, TPM], true],
  ["2k3", "Microsoft Windows Server 2003", 1, "256Mi", [NO_PCI_HOLE64, nic("rtl8139")], false],
  ["2k8", "Microsoft Windows Server 2008/2008 R2", 1, "512Mi", [nic("e1000")], true],
  ["7", "Microsoft Windows 7", 1, "2Gi", [], true],
  ["xp", "Microsoft Windows XP", 1, "128Mi", [NO_PCI_HOLE64], false],
];

function windowsPreferences(): PreferenceEntry[] {
  return WINDOWS_VERSIONS.flatMap(([suffix, display, cpu, memory, parts, virtio]) => {
    const base = [WINDOWS, requirements(cpu, memory), ...parts];
    const entry = (name: string, displayName: string, extra: Part[]): PreferenceEntry => ({
      name,
      displayName,
      icon: "icon-windows",
      tags: "hidden,kubevirt,windows",
      osType: "windows",
      ...compose([...base, ...extra]),
    });
    const plain = entry(`windows.${suffix}`, display, []);
    return virtio ? [plain, entry(`windows.${suffix}.virtio`, `${display} (virtio)`, [WINDOWS_VIRTIO])] : [plain];
  });
}

const LEGACY: PreferenceEntry = {
  name: "legacy",
  displayName: "Legacy Guest",
  icon: "icon-other",
  tags: "hidden,kubevirt,legacy",
  osType: "legacy",
  labels: {},
  spec: {
    annotations: { "vm.kubevirt.io/os": "legacy" },
    devices: { preferredDiskBus: "sata", preferredInterfaceModel: "e1000" },
  },
};

/** Every preference of the bundle, in name order. */
export function commonPreferenceEntries(): PreferenceEntry[] {
  return [...linuxPreferences(), LEGACY, ...windowsPreferences()].sort((a, b) => a.name.localeCompare(b.name));
}

/** A preference as the cluster object, with the bundle's common labels and annotations. */
export function preferenceObject(
  e: PreferenceEntry,
  version: string,
): {
  apiVersion: string;
  kind: "VirtualMachineClusterPreference";
  metadata: { name: string; labels: Record<string, string>; annotations: Record<string, string> };
  spec: PreferenceSpec;
} {
  return {
    apiVersion: INSTANCETYPE_API_VERSION,
    kind: "VirtualMachineClusterPreference",
    metadata: {
      name: e.name,
      annotations: {
        "openshift.io/provider-display-name": "KubeVirt",
        "openshift.io/documentation-url": "https://github.com/kubevirt/common-instancetypes",
        "openshift.io/support-url": "https://github.com/kubevirt/common-instancetypes/issues",
        tags: e.tags,
        iconClass: e.icon,
        "openshift.io/display-name": e.displayName,
      },
      labels: {
        "instancetype.kubevirt.io/os-type": e.osType,
        "instancetype.kubevirt.io/vendor": "kubevirt.io",
        "instancetype.kubevirt.io/common-instancetypes-version": version,
        ...e.labels,
      },
    },
    spec: structuredClone(e.spec),
  };
}
