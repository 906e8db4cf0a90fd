import { describe, expect, it } from "vitest";
import { QUANTITY_ERRORS } from "../quantity.ts";
import { vm } from "../testdata/objects.ts";
import type { ValidationCause, VirtualMachineInstanceSpec } from "../types.ts";
import { validateVm } from "./vm-validation.ts";

const P = "spec.template.spec";
const D = `${P}.domain.devices.disks`;
const I = `${P}.domain.devices.interfaces`;
const V = `${P}.volumes`;
const N = `${P}.networks`;
const LABEL_ERR =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_ERR =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

type Case = [string, (s: VirtualMachineInstanceSpec) => void, [string, string, string][]];
const c = (type: string, message: string, field: string): [string, string, string] => [type, message, field];
const INV = "FieldValueInvalid";
const REQ = "FieldValueRequired";
const NS = "FieldValueNotSupported";
const DUP = "FieldValueDuplicate";
const dev = (s: VirtualMachineInstanceSpec) => s.domain.devices;
const disk = (s: VirtualMachineInstanceSpec, i: number) => dev(s).disks?.[i] ?? { name: "" };
const iface0 = (s: VirtualMachineInstanceSpec) => dev(s).interfaces?.[0] ?? { name: "" };
const vol = (s: VirtualMachineInstanceSpec, i: number) => s.volumes?.[i] ?? { name: "" };
const net2 = (s: VirtualMachineInstanceSpec, name: string, bridge = true) => {
  s.networks?.push({ name, multus: { networkName: "net-a" } });
  if (bridge) dev(s).interfaces?.push({ name, bridge: {} });
};

const cases: Case[] = [
  // identity and resources
  [
    "hostname not a DNS label",
    (s) => {
      s.hostname = "Bad_Host";
    },
    [c(INV, `${P}.hostname does not conform to the kubernetes DNS_LABEL rules : ${LABEL_ERR}`, `${P}.hostname`)],
  ],
  [
    "subdomain not a DNS subdomain",
    (s) => {
      s.subdomain = "-sub";
    },
    [
      c(
        INV,
        `${P}.subdomain does not conform to the kubernetes DNS_SUBDOMAIN rules : ${SUBDOMAIN_ERR}`,
        `${P}.subdomain`,
      ),
    ],
  ],
  [
    "negative memory request",
    (s) => {
      s.domain.resources = { requests: { memory: "-64M" } };
    },
    [
      c(
        INV,
        `${P}.domain.resources.requests.memory '-64M': must be greater than or equal to 0.`,
        `${P}.domain.resources.requests.memory`,
      ),
    ],
  ],
  [
    "memory request below 1M",
    (s) => {
      s.domain.resources = { requests: { memory: "512k" } };
    },
    [
      c(
        INV,
        `${P}.domain.resources.requests.memory '512k': must be greater than or equal to 1M.`,
        `${P}.domain.resources.requests.memory`,
      ),
    ],
  ],
  [
    "memory request above limit",
    (s) => {
      s.domain.resources = { requests: { memory: "128M" }, limits: { memory: "64M" } };
    },
    [
      c(
        INV,
        `${P}.domain.resources.requests.memory '128M' is greater than ${P}.domain.resources.limits.memory '64M'`,
        `${P}.domain.resources.requests.memory`,
      ),
    ],
  ],
  [
    "negative memory limit",
    (s) => {
      s.domain.resources = { requests: { memory: "64M" }, limits: { memory: "-1Gi" } };
    },
    [
      c(
        INV,
        `${P}.domain.resources.limits.memory '-1Gi': must be greater than or equal to 0.`,
        `${P}.domain.resources.limits.memory`,
      ),
    ],
  ],
  [
    "memory request not a quantity",
    (s) => {
      s.domain.resources = { requests: { memory: "64Q" } };
    },
    [
      c(
        INV,
        `${P}.domain.resources.requests.memory '64Q': ${QUANTITY_ERRORS.formatWrong}`,
        `${P}.domain.resources.requests.memory`,
      ),
    ],
  ],
  [
    "guest memory with a bad suffix",
    (s) => {
      s.domain.memory = { guest: "1Gb" };
    },
    [c(INV, `${P}.domain.memory.guest '1Gb': ${QUANTITY_ERRORS.formatWrong}`, `${P}.domain.memory.guest`)],
  ],
  [
    "negative cpu request",
    (s) => {
      s.domain.resources = { requests: { memory: "64M", cpu: "-1" } };
    },
    [
      c(
        INV,
        `${P}.domain.resources.requests.cpu '-1': must be greater than or equal to 0.`,
        `${P}.domain.resources.requests.cpu`,
      ),
    ],
  ],
  [
    "cpu request above limit",
    (s) => {
      s.domain.resources = { requests: { memory: "64M", cpu: "2" }, limits: { cpu: "1" } };
    },
    [
      c(
        INV,
        `${P}.domain.resources.requests.cpu '2' is greater than ${P}.domain.resources.limits.cpu '1'`,
        `${P}.domain.resources.requests.cpu`,
      ),
    ],
  ],
  [
    "dedicated CPUs with a fractional request",
    (s) => {
      s.domain.cpu = { dedicatedCpuPlacement: true };
      s.domain.resources = { requests: { memory: "64M", cpu: "1500m" } };
    },
    [
      c(INV, "provided resources CPU requests must be an interger", `${P}.domain.resources.requests.cpu`),
      // KubeVirt's rule above still applies; this platform also refuses dedicated CPUs (unsupported-hardware.ts).
      c(
        NS,
        `${P}.domain.cpu.dedicatedCpuPlacement is not supported: this platform's machine backends (native VMM, QEMU TCG) provide no dedicated CPU placement`,
        `${P}.domain.cpu.dedicatedCpuPlacement`,
      ),
    ],
  ],
  [
    "unknown start strategy",
    (s) => {
      (s as { startStrategy?: string }).startStrategy = "Running";
    },
    [c(INV, `${P}.startStrategy is set with an unrecognized option: Running`, `${P}.startStrategy`)],
  ],
  [
    "unknown eviction strategy",
    (s) => {
      (s as { evictionStrategy?: string }).evictionStrategy = "Sometimes";
    },
    [c(INV, `${P}.evictionStrategy is set with an unrecognized option: Sometimes`, `${P}.evictionStrategy`)],
  ],
  [
    "negative grace period",
    (s) => {
      s.terminationGracePeriodSeconds = -1;
    },
    [
      c(
        INV,
        `${P}.terminationGracePeriodSeconds '-1': must be greater than or equal to 0.`,
        `${P}.terminationGracePeriodSeconds`,
      ),
    ],
  ],
  [
    "kernel args without a kernel",
    (s) => {
      s.domain.firmware = { kernelBoot: { kernelArgs: "console=ttyS0" } };
    },
    [
      c(
        INV,
        "kernel arguments cannot be provided without an external kernel",
        `${P}.domain.firmware.kernelBoot.kernelArgs`,
      ),
    ],
  ],
  [
    "kernel container without image or paths",
    (s) => {
      s.domain.firmware = { kernelBoot: { container: { image: "" } } };
    },
    [
      c(
        REQ,
        `${P}.domain.firmware.kernelBoot.container must be defined with an image`,
        `${P}.domain.firmware.kernelBoot.container.image`,
      ),
      c(
        REQ,
        `${P}.domain.firmware.kernelBoot.container must be defined with at least one of the following: kernelPath, initrdPath`,
        `${P}.domain.firmware.kernelBoot.container`,
      ),
    ],
  ],
  // networks and interfaces
  [
    "two pod networks",
    (s) => {
      s.networks?.push({ name: "second", pod: {} });
      dev(s).interfaces?.push({ name: "second", masquerade: {} });
    },
    [c(DUP, `more than one interface is connected to a pod network in ${P}.interfaces`, `${P}.interfaces`)],
  ],
  [
    "network without a type",
    (s) => {
      s.networks = [{ name: "default" }];
      dev(s).interfaces = [{ name: "default", bridge: {} }];
    },
    [c(REQ, "should have a network type", `${N}[0]`)],
  ],
  [
    "multus network without networkName",
    (s) => {
      net2(s, "net2");
      const n = s.networks?.[1];
      if (n?.multus) n.multus.networkName = "";
    },
    [c(REQ, "CNI delegating plugin must have a networkName", `${N}[1]`)],
  ],
  [
    "interface with two bindings",
    (s) => {
      iface0(s).bridge = {};
    },
    [c(INV, "logical default interface must have exactly one binding method or binding plugin", `${I}[0]`)],
  ],
  [
    "interface with no binding",
    (s) => {
      delete iface0(s).masquerade;
    },
    [c(INV, "logical default interface must have exactly one binding method or binding plugin", `${I}[0]`)],
  ],
  [
    "masquerade on a multus network",
    (s) => {
      s.networks = [{ name: "default", multus: { networkName: "net-a" } }];
    },
    [c(INV, "Masquerade interface only implemented with pod network", `${I}[0].name`)],
  ],
  [
    "DHCP private options duplicated and out of range, an NTP server not IPv4",
    (s) => {
      iface0(s).dhcpOptions = {
        privateOptions: [
          { option: 240, value: "a" },
          { option: 240, value: "b" },
          { option: 223, value: "c" },
        ],
        ntpServers: ["10.0.0.1", "ntp.example.org"],
      };
    },
    [
      c(INV, "Found Duplicates: you have provided duplicate DHCPPrivateOptions", P),
      c(INV, "provided DHCPPrivateOptions are out of range, must be in range 224 to 254", P),
      c(INV, "NTP servers must be a list of valid IPv4 addresses.", `${I}[0].dhcpOptions.ntpServers[1]`),
    ],
  ],
  [
    "duplicate network names",
    (s) => {
      s.networks?.push({ name: "default", multus: { networkName: "net-a" } });
      iface0(s).masquerade = undefined;
      iface0(s).bridge = {};
    },
    [c(DUP, 'Network with name "default" already exists, every network must have a unique name', `${N}[1].name`)],
  ],
  [
    "network without an interface",
    (s) => {
      net2(s, "extra", false);
    },
    [c(REQ, `${N}[1].name 'extra' not found.`, `${N}[1].name`)],
  ],
  [
    "two interfaces on one network",
    (s) => {
      dev(s).interfaces?.push({ name: "default", masquerade: {} });
    },
    [c(DUP, "Only one interface can be connected to one specific network", `${I}[1].name`)],
  ],
  [
    "interface without a network",
    (s) => {
      dev(s).interfaces?.push({ name: "other", bridge: {} });
    },
    [c(INV, `${I}[1].name 'other' not found.`, `${I}[1].name`)],
  ],
  [
    "interface name with a space",
    (s) => {
      iface0(s).name = "de fault";
      if (s.networks?.[0]) s.networks[0].name = "de fault";
    },
    [
      c(
        INV,
        "Network interface name can only contain alphabetical characters, numbers, dashes (-) or underscores (_)",
        `${I}[0].name`,
      ),
    ],
  ],
  [
    "unknown interface model",
    (s) => {
      iface0(s).model = "rtl9999";
    },
    [c(NS, `interface ${I}[0].name uses model rtl9999 that is not supported.`, `${I}[0].model`)],
  ],
  [
    "malformed MAC address",
    (s) => {
      iface0(s).macAddress = "zz:00:00:00:00:01";
    },
    [c(INV, `interface ${I}[0].name has malformed MAC address (zz:00:00:00:00:01).`, `${I}[0].macAddress`)],
  ],
  [
    "port 0",
    (s) => {
      iface0(s).ports = [{ port: 0 }];
    },
    [c(REQ, "Port field is mandatory.", `${I}[0].ports[0].port`)],
  ],
  [
    "port out of range",
    (s) => {
      iface0(s).ports = [{ port: 70000 }];
    },
    [c(INV, "Port field must be in range 0 < x < 65536.", `${I}[0].ports[0].port`)],
  ],
  [
    "unknown port protocol",
    (s) => {
      iface0(s).ports = [{ port: 22, protocol: "SCTP" }];
    },
    [c(INV, "Unknown protocol, only TCP or UDP allowed", `${I}[0].ports[0].protocol`)],
  ],
  [
    "duplicate port names",
    (s) => {
      iface0(s).ports = [
        { name: "ssh", port: 22 },
        { name: "ssh", port: 2222 },
      ];
    },
    [c(DUP, "Duplicate name of the port: ssh", `${I}[0].ports[1].name`)],
  ],
  // disks
  [
    "disk naming a missing volume",
    (s) => {
      disk(s, 1).name = "nosuchvolume";
      dev(s).disks?.push({ name: "cloudinitdisk" });
    },
    [c(INV, `${D}[1].Name 'nosuchvolume' not found.`, `${D}[1].name`)],
  ],
  [
    "duplicate disk names",
    (s) => {
      dev(s).disks?.push({ name: "containerdisk", disk: { bus: "virtio" } });
    },
    [c(INV, `${D}[2] and ${D}[0] must not have the same Name.`, `${D}[2].name`)],
  ],
  [
    "disk with two targets",
    (s) => {
      disk(s, 0).cdrom = { bus: "sata" };
    },
    [c(INV, `${D}[0] can only have a single target type defined`, `${D}[0]`)],
  ],
  [
    "boot order 0",
    (s) => {
      disk(s, 0).bootOrder = 0;
    },
    [c(INV, `${D}[0] must have a boot order > 0, if supplied`, `${D}[0].bootOrder`)],
  ],
  [
    "duplicate boot order",
    (s) => {
      disk(s, 0).bootOrder = 1;
      disk(s, 1).bootOrder = 1;
    },
    [c(INV, `Boot order for ${D}[1].bootOrder already set for a different device.`, `${D}[1].bootOrder`)],
  ],
  [
    "interface boot order taken by a disk",
    (s) => {
      disk(s, 0).bootOrder = 1;
      iface0(s).bootOrder = 1;
    },
    [c(INV, `Boot order for ${I}[0].bootOrder already set for a different device.`, `${I}[0].bootOrder`)],
  ],
  [
    "IDE bus",
    (s) => {
      disk(s, 0).disk = { bus: "ide" };
    },
    [c(INV, "IDE bus is not supported", `${D}[0].disk.bus`)],
  ],
  [
    "unknown bus",
    (s) => {
      disk(s, 0).disk = { bus: "floppy" };
    },
    [
      c(
        INV,
        `${D}[0] is set with an unrecognized bus floppy, must be one of: [virtio scsi sata usb]`,
        `${D}[0].disk.bus`,
      ),
    ],
  ],
  [
    "virtio CD-ROM",
    (s) => {
      disk(s, 0).disk = undefined;
      disk(s, 0).cdrom = { bus: "virtio" };
    },
    [c(INV, "Bus type virtio is invalid for CD-ROM device", `${D}[0].cdrom.bus`)],
  ],
  [
    "read-only SATA disk",
    (s) => {
      disk(s, 0).disk = { bus: "sata", readonly: true };
    },
    [c(INV, "sata hard-disks do not support read-only.", `${D}[0].disk.bus`)],
  ],
  [
    "serial with a space",
    (s) => {
      disk(s, 0).serial = "a b";
    },
    [c(INV, `${D}[0] must be made up of the following characters [A-Za-z0-9_.+-], if specified`, `${D}[0].serial`)],
  ],
  [
    "unknown cache mode",
    (s) => {
      disk(s, 0).cache = "unsafe";
    },
    [c(INV, `${D}[0].cache has invalid value unsafe`, `${D}[0].cache`)],
  ],
  [
    "unknown IO mode",
    (s) => {
      disk(s, 0).io = "fast";
    },
    [c(NS, `Disk IO mode for ${D} is not supported. Supported modes are: native, threads.`, `${D}[0].io`)],
  ],
  [
    "disk name not a DNS label",
    (s) => {
      disk(s, 0).name = "Disk_A";
      vol(s, 0).name = "Disk_A";
    },
    [c(INV, LABEL_ERR, `${D}[0].name`)],
  ],
  [
    "LUN on a container disk",
    (s) => {
      disk(s, 0).disk = undefined;
      disk(s, 0).lun = {};
    },
    [c(INV, `${D}[0].lun can only be mapped to a DataVolume or PersistentVolumeClaim volume.`, `${D}[0].lun`)],
  ],
  // volumes
  [
    "volume without a disk",
    (s) => {
      dev(s).disks?.pop();
    },
    [c(INV, `${P}.domain.volumes[1].name 'cloudinitdisk' not found.`, `${V}[1].name`)],
  ],
  [
    "duplicate volume names",
    (s) => {
      s.volumes?.push({ name: "containerdisk", emptyDisk: { capacity: "1Gi" } });
    },
    [c(INV, `${V}[2] and ${V}[0] must not have the same Name.`, `${V}[2].name`)],
  ],
  [
    "volume with two sources",
    (s) => {
      vol(s, 0).emptyDisk = { capacity: "1Gi" };
    },
    [c(INV, `${V}[0] must have exactly one source type set`, `${V}[0]`)],
  ],
  [
    "volume with no source",
    (s) => {
      delete vol(s, 0).containerDisk;
    },
    [c(INV, `${V}[0] must have exactly one source type set`, `${V}[0]`)],
  ],
  [
    "container disk without image",
    (s) => {
      vol(s, 0).containerDisk = { image: "" };
    },
    [c(REQ, `${V}[0].containerDisk.image is a required field`, `${V}[0].containerDisk.image`)],
  ],
  [
    "cloud-init userDataBase64 not base64",
    (s) => {
      vol(s, 1).cloudInitNoCloud = { userDataBase64: "not base64!" };
    },
    [
      c(
        INV,
        `${V}[1].cloudInitNoCloud.userDataBase64.cloudInitNoCloud.userDataBase64 is not a valid base64 value.`,
        `${V}[1].cloudInitNoCloud.userDataBase64`,
      ),
    ],
  ],
  [
    "cloud-init with two user data sources",
    (s) => {
      vol(s, 1).cloudInitNoCloud = { userData: "a", userDataBase64: "YQ==" };
    },
    [c(INV, `${V}[1].cloudInitNoCloud must have only one userdatasource set.`, `${V}[1].cloudInitNoCloud`)],
  ],
  [
    "cloud-init user data over 2048 bytes",
    (s) => {
      vol(s, 1).cloudInitNoCloud = { userData: "x".repeat(2049) };
    },
    [
      c(
        INV,
        `${V}[1].cloudInitNoCloud userdata exceeds 2048 byte limit. Should use UserDataSecretRef for larger data.`,
        `${V}[1].cloudInitNoCloud`,
      ),
    ],
  ],
  [
    "cloud-init with nothing",
    (s) => {
      vol(s, 1).cloudInitNoCloud = {};
    },
    [
      c(
        INV,
        `${V}[1].cloudInitNoCloud must have at least one userdatasource or one networkdatasource set.`,
        `${V}[1].cloudInitNoCloud`,
      ),
    ],
  ],
  [
    "config drive with two network data sources",
    (s) => {
      vol(s, 1).cloudInitNoCloud = undefined;
      vol(s, 1).cloudInitConfigDrive = { userData: "a", networkData: "n", networkDataSecretRef: { name: "s" } };
    },
    [c(INV, `${V}[1].cloudInitConfigDrive must have only one networkdata source set.`, `${V}[1].cloudInitConfigDrive`)],
  ],
  [
    "configMap without name",
    (s) => {
      vol(s, 1).cloudInitNoCloud = undefined;
      vol(s, 1).configMap = {};
    },
    [c(INV, `${V}[1].configMap.name is a required field`, `${V}[1].configMap.name`)],
  ],
  [
    "secret without secretName",
    (s) => {
      vol(s, 1).cloudInitNoCloud = undefined;
      vol(s, 1).secret = {};
    },
    [c(INV, `${V}[1].secret.secretName is a required field`, `${V}[1].secret.secretName`)],
  ],
  [
    "empty disk of capacity 0",
    (s) => {
      vol(s, 1).cloudInitNoCloud = undefined;
      vol(s, 1).emptyDisk = { capacity: "0" };
    },
    [c(INV, `${V}[1].emptyDisk.capacity must be a positive quantity`, `${V}[1].emptyDisk.capacity`)],
  ],
];

describe("validateVm(): each invalid template field gives exactly KubeVirt's cause", () => {
  it("the valid template has no causes", () => {
    expect(validateVm(vm())).toEqual([]);
  });

  it.each(cases)("%s", (_name, mutate, expected) => {
    const obj = vm();
    const spec = obj.spec.template?.spec;
    if (!spec) throw new Error("fixture without template spec");
    mutate(spec);
    const want: ValidationCause[] = expected.map(([type, message, field]) => ({ type, message, field }));
    expect(validateVm(obj)).toEqual(want);
  });

  it(`has at least 40 invalid cases (${cases.length})`, () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
  });
});
