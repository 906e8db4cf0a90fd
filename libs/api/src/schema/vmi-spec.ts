/**
 * VirtualMachineInstanceSpec (kubevirt.io/v1): the domain (CPU, memory, firmware, devices), volumes, networks and
 * scheduling. Field names, nesting and descriptions follow KubeVirt's `schema.go` and `types.go`.
 */
import { EVICTION_STRATEGIES, START_STRATEGIES } from "../constants.ts";
import { arr, bool, int, map, marker, obj, quantity, str, strEnum } from "./builder.ts";
import {
  downwardApiVolumeFileSchema,
  execActionSchema,
  httpGetActionSchema,
  podDnsConfigSchema,
  tcpSocketActionSchema,
  topologySpreadConstraintSchema,
} from "./k8s-core.ts";
import { affinitySchema, localObjectReferenceSchema, tolerationSchema } from "./meta.ts";
import {
  blockSizeSchema,
  devicesExtraProps,
  domainExtraProps,
  featuresSchema,
  numaSchema,
  realtimeSchema,
} from "./vmi-domain.ts";

const diskTarget = obj({
  bus: str({
    description: "Bus indicates the type of disk device to emulate. supported values: virtio, sata, scsi, usb.",
  }),
  readonly: bool({ description: "ReadOnly. Defaults to false." }),
  pciAddress: str({
    description:
      "If specified, the virtual disk will be placed on the guests pci address with the specified PCI address. For example: 0000:81:01.10",
  }),
});

const cdromTarget = obj({
  bus: str({ description: "Bus indicates the type of disk device to emulate. supported values: virtio, sata, scsi." }),
  readonly: bool({ description: "ReadOnly. Defaults to true." }),
  tray: str({
    description:
      'Tray indicates if the tray of the device is open or closed. Allowed values are "open" and "closed". Defaults to closed.',
  }),
});

/** One disk of the domain; it names the volume that backs it (`name` = a `spec.volumes[].name`). */
export const diskSchema = obj(
  {
    name: str({ description: "Name is the device name" }),
    disk: diskTarget,
    cdrom: cdromTarget,
    lun: obj({ bus: str(), readonly: bool(), reservation: bool() }),
    bootOrder: int({
      description:
        "BootOrder is an integer value > 0, used to determine ordering of boot devices. Lower values take precedence.",
    }),
    serial: str({ description: "Serial provides the ability to specify a serial number for the disk device." }),
    dedicatedIOThread: bool(),
    cache: str({
      description:
        "Cache specifies which kvm disk cache mode should be used. Supported values are: none, writethrough, writeback.",
    }),
    io: str({
      description:
        "IO specifies which QEMU disk IO mode should be used. Supported values are: native, default, threads.",
    }),
    tag: str(),
    shareable: bool(),
    errorPolicy: str(),
    blockSize: blockSizeSchema,
    changedBlockTracking: bool(),
  },
  { required: ["name"] },
);

/** One guest network interface; it names a `spec.networks[].name`. */
export const interfaceSchema = obj(
  {
    name: str({
      description:
        "Logical name of the interface as well as a reference to the associated networks. Must match the Name of a Network.",
    }),
    model: str({
      description: "Interface model. One of: e1000, e1000e, igb, ne2k_pci, pcnet, rtl8139, virtio. Defaults to virtio.",
    }),
    bridge: marker(),
    masquerade: marker(),
    sriov: marker(),
    passt: marker({ description: "Deprecated: use the passt network binding plugin (binding: {name: passt})." }),
    slirp: marker({ description: "Deprecated: removed in KubeVirt v1.3." }),
    macvtap: marker({ description: "Deprecated: use the macvtap network binding plugin." }),
    passtBinding: marker(),
    binding: obj({ name: str() }, { required: ["name"] }),
    dhcpOptions: obj({
      bootFileName: str(),
      tftpServerName: str(),
      ntpServers: arr(str()),
      privateOptions: arr(obj({ option: int(), value: str() }, { required: ["option", "value"] })),
    }),
    portRanges: arr(obj({ protocol: str(), start: int(), end: int() }, { required: ["protocol", "start", "end"] })),
    acpiIndex: int({ description: "The ACPI index of the guest NIC (predictable interface names); 1 and up." }),
    macAddress: str({ description: "Interface MAC address. For example: de:ad:00:00:be:af or DE-AD-00-00-BE-AF." }),
    ports: arr(
      obj(
        {
          name: str(),
          protocol: str({ description: 'Protocol for port. Must be UDP or TCP. Defaults to "TCP".' }),
          port: int(),
        },
        { required: ["port"] },
      ),
    ),
    pciAddress: str(),
    bootOrder: int(),
    tag: str(),
    state: str(),
  },
  { required: ["name"] },
);

const kernelBoot = obj(
  {
    kernelArgs: str({ description: "Arguments to be passed to the kernel at boot time" }),
    container: obj(
      {
        image: str({ description: "Image that contains initrd / kernel files." }),
        imagePullSecret: str(),
        imagePullPolicy: str(),
        kernelPath: str({ description: "The fully-qualified path to the kernel image in the host OS" }),
        initrdPath: str({ description: "the fully-qualified path to the ramdisk image in the host OS" }),
      },
      { required: ["image"], description: "Container defines the container that containes kernel artifacts" },
    ),
  },
  { description: "Settings to set the kernel for booting." },
);

/** DomainSpec: the virtual hardware. */
export const domainSchema = obj(
  {
    resources: obj(
      {
        requests: map(quantity(), {
          description:
            'Requests is a description of the initial vmi resources.\nValid resource keys are "memory" and "cpu".',
        }),
        limits: map(quantity(), {
          description:
            'Limits describes the maximum amount of compute resources allowed.\nValid resource keys are "memory" and "cpu".',
        }),
        overcommitGuestOverhead: bool(),
      },
      { description: "Resources describes the Compute Resources required by this vmi." },
    ),
    cpu: obj(
      {
        cores: int({
          format: "int64",
          description: "Cores specifies the number of cores inside the vmi.\nMust be a value greater or equal 1.",
        }),
        sockets: int({
          format: "int64",
          description: "Sockets specifies the number of sockets inside the vmi.\nMust be a value greater or equal 1.",
        }),
        threads: int({
          format: "int64",
          description: "Threads specifies the number of threads inside the vmi.\nMust be a value greater or equal 1.",
        }),
        maxSockets: int({
          format: "int64",
          description: "MaxSockets specifies the maximum amount of sockets that can\nbe hotplugged",
        }),
        model: str({
          description:
            'Model specifies the CPU model inside the VMI.\nList of available models https://github.com/libvirt/libvirt/tree/master/src/cpu_map.\nIt is possible to specify special cases like "host-passthrough" to get the same CPU as the node\nand "host-model" to get CPU closest to the node one.\nDefaults to host-model.',
        }),
        dedicatedCpuPlacement: bool(),
        features: arr(obj({ name: str(), policy: str() }, { required: ["name"] })),
        isolateEmulatorThread: bool(),
        numa: numaSchema,
        realtime: realtimeSchema,
      },
      { description: "CPU allow specified the detailed CPU topology inside the vmi." },
    ),
    memory: obj(
      {
        guest: quantity({
          description:
            "Guest allows to specifying the amount of memory which is visible inside the Guest OS.\nThe Guest must lie between Requests and Limits from the resources section.\nDefaults to the requested memory in the resources section if not specified.",
        }),
        maxGuest: quantity({
          description: "MaxGuest allows to specify the maximum amount of memory which is visible inside the Guest OS.",
        }),
        hugepages: obj({ pageSize: str() }),
        reservedOverhead: obj({ addedOverhead: quantity(), memLock: str() }),
      },
      { description: "Memory allow specifying the VMI memory features." },
    ),
    machine: obj({
      type: str({ description: "QEMU machine type is the actual chipset of the VirtualMachineInstance." }),
    }),
    firmware: obj(
      {
        uuid: str({ description: "UUID reported by the vmi bios.\nDefaults to a random generated uid." }),
        serial: str({ description: "The system-serial-number in SMBIOS" }),
        bootloader: obj({ bios: obj({ useSerial: bool() }), efi: obj({ secureBoot: bool(), persistent: bool() }) }),
        kernelBoot,
        acpi: obj({ slicNameRef: str(), msdmNameRef: str() }),
      },
      { description: "Firmware." },
    ),
    features: featuresSchema,
    devices: obj(
      {
        disks: arr(diskSchema, {
          description: "Disks describes disks, cdroms and luns which are connected to the vmi.",
        }),
        interfaces: arr(interfaceSchema, {
          description: "Interfaces describe network interfaces which are added to the vmi.",
        }),
        autoattachSerialConsole: bool({
          description:
            "Whether to attach the default serial console or not.\nSerial console access will not be available if set to false. Defaults to true.",
        }),
        autoattachPodInterface: bool({ description: "Whether to attach a pod network interface. Defaults to true." }),
        autoattachGraphicsDevice: bool(),
        autoattachMemBalloon: bool(),
        logSerialConsole: bool(),
        networkInterfaceMultiqueue: bool(),
        blockMultiQueue: bool(),
        useVirtioTransitional: bool(),
        rng: marker(),
        ...devicesExtraProps,
      },
      { description: "Devices allows adding disks, network interfaces, and others" },
    ),
    ioThreadsPolicy: str(),
    ...domainExtraProps,
  },
  {
    required: ["devices"],
    description: "Specification of the desired behavior of the VirtualMachineInstance on the host.",
  },
);

const cloudInit = (what: string) =>
  obj(
    {
      userData: str({ description: "UserData contains cloud-init inline userdata." }),
      userDataBase64: str({ description: "UserDataBase64 contains cloud-init userdata as a base64 encoded string." }),
      secretRef: localObjectReferenceSchema,
      networkData: str({ description: "NetworkData contains cloud-init inline network configuration data." }),
      networkDataBase64: str({
        description: "NetworkDataBase64 contains cloud-init network configuration data as a base64 encoded string.",
      }),
      networkDataSecretRef: localObjectReferenceSchema,
    },
    { description: `${what} represents a cloud-init volume source.` },
  );

/** One volume: exactly one source (containerDisk, cloudInitNoCloud, ...) plus the name disks refer to. */
export const volumeSchema = obj(
  {
    name: str({ description: "Volume's name.\nMust be a DNS_LABEL and unique within the vmi." }),
    containerDisk: obj(
      {
        image: str({ description: "Image is the name of the image with the embedded disk." }),
        imagePullSecret: str(),
        imagePullPolicy: str({
          description:
            "Image pull policy: Always, Never, IfNotPresent. Defaults to Always if :latest tag is specified, or IfNotPresent otherwise.",
        }),
        path: str({ description: "Path defines the path to disk file in the container" }),
      },
      { required: ["image"], description: "ContainerDisk references a docker image, embedding a qcow or raw disk." },
    ),
    cloudInitNoCloud: cloudInit("CloudInitNoCloud"),
    cloudInitConfigDrive: cloudInit("CloudInitConfigDrive"),
    emptyDisk: obj(
      { capacity: quantity({ description: "Capacity of the sparse disk." }) },
      { required: ["capacity"], description: "EmptyDisk represents a temporary disk which shares the vmis lifecycle." },
    ),
    persistentVolumeClaim: obj(
      { claimName: str(), readOnly: bool(), hotpluggable: bool() },
      {
        required: ["claimName"],
        description:
          "PersistentVolumeClaimVolumeSource represents a reference to a PersistentVolumeClaim in the same namespace.",
      },
    ),
    ephemeral: obj(
      { persistentVolumeClaim: obj({ claimName: str(), readOnly: bool() }, { required: ["claimName"] }) },
      {
        description:
          'Ephemeral is a special volume source that "wraps" specified source and provides copy-on-write image on top of it.',
      },
    ),
    dataVolume: obj({ name: str(), hotpluggable: bool() }, { required: ["name"] }),
    hostDisk: obj({ path: str(), type: str(), capacity: quantity(), shared: bool() }, { required: ["path", "type"] }),
    configMap: obj(
      { name: str(), optional: bool(), volumeLabel: str() },
      { description: "ConfigMapSource represents a reference to a ConfigMap in the same namespace." },
    ),
    secret: obj(
      { secretName: str(), optional: bool(), volumeLabel: str() },
      { description: "SecretVolumeSource represents a reference to a secret data in the same namespace." },
    ),
    serviceAccount: obj({ serviceAccountName: str() }),
    downwardAPI: obj({ fields: arr(downwardApiVolumeFileSchema), volumeLabel: str() }),
    downwardMetrics: marker(),
    memoryDump: obj({ claimName: str(), readOnly: bool(), hotpluggable: bool() }, { required: ["claimName"] }),
    sysprep: obj(
      { configMap: localObjectReferenceSchema, secret: localObjectReferenceSchema },
      { description: "Sysprep answer files (autounattend.xml / unattend.xml) for Windows guests." },
    ),
    containerPath: obj({ path: str(), readOnly: bool() }, { required: ["path"] }),
  },
  { required: ["name"] },
);

/** One network the interfaces attach to: the pod network or a Multus NetworkAttachmentDefinition. */
export const networkSchema = obj(
  {
    name: str({ description: "Network name.\nMust be a DNS_LABEL and unique within the vm.\nFor example: default" }),
    pod: obj(
      { vmNetworkCIDR: str(), vmIPv6NetworkCIDR: str() },
      { description: "Represents the stock pod network interface." },
    ),
    multus: obj(
      {
        networkName: str({
          description:
            "References to a NetworkAttachmentDefinition CRD object. Format: <networkName>, <namespace>/<networkName>.",
        }),
        default: bool(),
      },
      { required: ["networkName"], description: "Represents the multus cni network." },
    ),
    resourceClaim: obj({ claimName: str(), requestName: str() }),
  },
  { required: ["name"] },
);

/** A liveness or readiness probe: a guest-agent ping, a command run by the agent, or an HTTP/TCP check. */
export const probeSchema = obj({
  exec: execActionSchema,
  httpGet: httpGetActionSchema,
  tcpSocket: tcpSocketActionSchema,
  guestAgentPing: marker(),
  initialDelaySeconds: int(),
  timeoutSeconds: int(),
  periodSeconds: int(),
  successThreshold: int(),
  failureThreshold: int(),
});

const secretSource = obj({ secret: obj({ secretName: str() }, { required: ["secretName"] }) });

/** One access credential: SSH public keys or a user password, taken from a Secret and propagated into the guest. */
export const accessCredentialSchema = obj({
  sshPublicKey: obj(
    {
      source: secretSource,
      propagationMethod: obj({
        configDrive: marker(),
        noCloud: marker(),
        qemuGuestAgent: obj({ users: arr(str()) }, { required: ["users"] }),
      }),
    },
    { required: ["source", "propagationMethod"] },
  ),
  userPassword: obj(
    { source: secretSource, propagationMethod: obj({ qemuGuestAgent: marker() }) },
    { required: ["source", "propagationMethod"] },
  ),
});

/** VirtualMachineInstanceSpec. */
export const vmiSpecSchema = obj(
  {
    domain: domainSchema,
    volumes: arr(volumeSchema, { description: "List of volumes that can be mounted by disks belonging to the vmi." }),
    networks: arr(networkSchema, { description: "List of networks that can be attached to a vm's virtual interface." }),
    nodeSelector: map(str(), {
      description: "NodeSelector is a selector which must be true for the vmi to fit on a node.",
    }),
    affinity: affinitySchema,
    tolerations: arr(tolerationSchema, { description: "If toleration is specified, obey all the toleration rules." }),
    topologySpreadConstraints: arr(topologySpreadConstraintSchema, {
      listType: "map",
      mapKeys: ["topologyKey", "whenUnsatisfiable"],
    }),
    evictionStrategy: strEnum(EVICTION_STRATEGIES, {
      description: "EvictionStrategy describes the strategy to follow when a node drain occurs.",
    }),
    startStrategy: strEnum(START_STRATEGIES, {
      description: 'StartStrategy can be set to "Paused" if Virtual Machine should be started in paused state.',
    }),
    terminationGracePeriodSeconds: int({
      format: "int64",
      description:
        "Grace period observed after signalling a VirtualMachineInstance to stop after which the VirtualMachineInstance is force terminated.",
    }),
    hostname: str({
      description:
        "Specifies the hostname of the vmi\nIf not specified, the hostname will be set to the name of the vmi, if dhcp or cloud-init is configured properly.",
    }),
    subdomain: str({
      description:
        'If specified, the fully qualified vmi hostname will be "<hostname>.<subdomain>.<pod namespace>.svc.<cluster domain>".',
    }),
    priorityClassName: str(),
    schedulerName: str(),
    serviceAccountName: str(),
    architecture: str(),
    livenessProbe: probeSchema,
    readinessProbe: probeSchema,
    dnsPolicy: str({ description: "ClusterFirstWithHostNet, ClusterFirst, Default or None." }),
    dnsConfig: podDnsConfigSchema,
    accessCredentials: arr(accessCredentialSchema, {
      description: "Secrets whose SSH keys or passwords are injected into the guest.",
    }),
    resourceClaims: arr(
      obj({ name: str(), resourceClaimName: str(), resourceClaimTemplateName: str() }, { required: ["name"] }),
      { listType: "map", mapKeys: ["name"], description: "DRA resource claims the GPUs and host devices use." },
    ),
    utilityVolumes: arr(
      obj({ name: str(), claimName: str(), readOnly: bool(), type: str() }, { required: ["name", "claimName"] }),
      { listType: "map", mapKeys: ["name"] },
    ),
  },
  {
    required: ["domain"],
    description: "VirtualMachineInstance Spec contains the VirtualMachineInstance specification.",
  },
);
