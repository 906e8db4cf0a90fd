/**
 * The virt-launcher Pod of a VMI (pure; KubeVirt `services/template.go`).
 *
 * Contract with the process-kubelet (tools/local-cluster) and apps/virt-launcher: the container image is
 * `kubevirt/virt-launcher`; the command `virt-launcher-monitor --namespace NS --name NAME --uid UID` is mapped by the
 * local process-kubelet to `apps/virt-launcher/src/main.ts` with those flags; the env carries POD_NAME, POD_UID,
 * NODE_NAME and POD_IP (status.podIP: the launcher runs in its pod's network namespace, and an incoming migration
 * listens there) through the downward API. The launcher reads its VMI from virt-handler's first sync (by uid). The
 * process-kubelet drops POD_IP for a pod it gave no sandbox; a launcher without CAP_NET_ADMIN (a real node's) takes
 * POD_IP for its migration address only and leaves the pod network's wiring alone (virt-launcher
 * network/launcher-network.ts).
 *
 * Resources: memory request = guest memory + launcher overhead ({@link launcherOverheadBytes}); CPU from the VMI's
 * requests (default 100m, as KubeVirt's cluster cpuRequest); the devices of virt-handler's device plugins as
 * KubeVirt's renderresources.go getRequiredResources asks for them ({@link virtualizationResources}): one
 * `devices.kubevirt.io/kvm` unless the cluster allows emulation (`developerConfiguration.useEmulation`: such a pod may
 * land on a node without KVM, and the launcher, told by KUBEVIRT_USE_EMULATION, runs the guest on QEMU there), one
 * `tun` when the VMI has interfaces or gets the default pod interface, one `vhost-net` when an interface is virtio and
 * emulation is not allowed. Scheduling constraints
 * (nodeSelector, affinity, tolerations, schedulerName, priorityClassName) come from the VMI, plus
 * `kubevirt.io/schedulable=true`.
 *
 * Volumes (KubeVirt's template.go, rendervolumes.go and hostdisk): each persistentVolumeClaim (and an ephemeral
 * volume's claim, read only) and each hostDisk's directory is a pod volume of the same name mounted at
 * `<VMI_DISKS_DIR>/<name>`, except a claim whose volumeMode is Block (KubeVirt's IsPVCBlockFromStore, read from the
 * claim as {@link PodTemplateOptions.claims} finds it): that one is a volumeDevice at `/dev/<name>` instead (the raw
 * device; the launcher uses it as the disk).
 *
 * The launcher's own directories are emptyDirs, as KubeVirt's VolumeRenderer declares them (names and paths
 * KubeVirt's; only those our launcher uses): `private` at VIRT_PRIVATE_DIR (/var/run/kubevirt-private: the launcher's
 * scratch and the console log `<vmi uid>/virt-serial0-log`, also mounted read-only into `guest-console-log`),
 * `sockets` at VIRT_SOCKETS_DIR (/var/run/kubevirt/sockets: the launcher's `launcher-sock`, which virt-handler
 * reaches through the kubelet's pods directory) and `ephemeral-disks` at EPHEMERAL_DISKS_DIR (emptyDisk images and
 * containerDisk overlays). KubeVirt's `public`, `libvirt-runtime`, `virt-bin-share-dir` and `container-disks` are
 * left out: nothing here runs libvirt or container-disk init containers.
 *
 * containerDisks (KubeVirt's ImageVolume feature; docs/decisions/0018-containerdisk-image-volumes.md): each
 * containerDisk volume is a pod image volume (`image: {reference, pullPolicy}`) of the same name, and
 * `firmware.kernelBoot.container`'s image one named KERNEL_BOOT_VOLUME, each mounted read-only at
 * IMAGE_VOLUMES_DIR `/<name>`: the kubelet pulls the image and mounts its files, the launcher reads the image's
 * `image.json`, kernel, initrd and `/disk/` from there (the process-kubelet maps the mount to its image store). Their
 * `imagePullSecret`s become the pod's imagePullSecrets.
 *
 * Config volumes (KubeVirt's rendervolumes.go withVMIConfigVolumes): each configMap, secret and downwardAPI volume of
 * the VMI is a pod volume of the same kind and name (configMap and secret keep `optional`; downwardAPI's `fields`
 * become its `items`), mounted read-only at CONFIG_MAP_SOURCE_DIR, SECRET_SOURCE_DIR or DOWNWARD_API_SOURCE_DIR
 * `/<name>` when a disk uses it; the launcher makes the ISO from those files. A serviceAccount volume sets the pod's
 * serviceAccountName, as KubeVirt does; where KubeVirt turns automountServiceAccountToken on and lets the
 * ServiceAccount admission plugin add its `kube-api-access-*` volume, this template renders that same projected
 * volume itself (token, `kube-root-ca.crt` ca.crt, namespace; {@link serviceAccountVolume}) at
 * SERVICE_ACCOUNT_SOURCE_DIR and turns automount off, so the pod does not depend on that plugin. The Secrets of
 * `accessCredentials` are mounted read-only at SECRET_SOURCE_DIR `/<secret>-access-cred` (withAccessCredentials).
 */
import {
  ANNOTATION,
  API_VERSION,
  blockDevicePath,
  CONFIG_MAP_SOURCE_DIR,
  DEFAULT_GRACE_PERIOD_SECONDS,
  DOWNWARD_API_SOURCE_DIR,
  EPHEMERAL_DISKS_DIR,
  EPHEMERAL_DISKS_VOLUME,
  imageVolumePath,
  isPvcBlock,
  KERNEL_BOOT_VOLUME,
  KIND,
  KVM_DEVICE_RESOURCE,
  LABEL,
  type PersistentVolumeClaimInfo,
  PRIVATE_VOLUME,
  parseQuantity,
  Quantity,
  SECRET_SOURCE_DIR,
  SERVICE_ACCOUNT_SOURCE_DIR,
  SOCKETS_VOLUME,
  TUN_DEVICE_RESOURCE,
  VHOST_NET_DEVICE_RESOURCE,
  VIRT_PRIVATE_DIR,
  VIRT_SOCKETS_DIR,
  type VirtualMachineInstance,
  VMI_DISKS_DIR,
  type Volume,
  volumeStatuses,
} from "@kvt/api";
import type { Container, Pod, PodVolume } from "@kvt/kube";

/** The launcher image. */
export const LAUNCHER_IMAGE = "kubevirt/virt-launcher";
/** The launcher command the process-kubelet maps to apps/virt-launcher. */
export const LAUNCHER_COMMAND = "/usr/bin/virt-launcher-monitor";
/** The sidecar that follows the launcher's serial console log (the process-kubelet maps virt-tail to it). */
export const CONSOLE_LOG_CONTAINER = "guest-console-log";
/** The command of the console-log sidecar (KubeVirt's virt-tail). */
export const VIRT_TAIL_COMMAND = "/usr/bin/virt-tail";
/** Label the VMI's name under on its pods (KubeVirt `vm.kubevirt.io/name`). */
export const VM_NAME_LABEL = "vm.kubevirt.io/name";
/** Fixed part of the launcher's memory overhead: the runtime, the VMM and its buffers. */
export const LAUNCHER_BASE_OVERHEAD_BYTES = 96 * 2 ** 20;
/** Seconds the pod's grace period exceeds the VMI's, so the launcher can finish a graceful shutdown. */
export const POD_GRACE_EXTRA_SECONDS = 15;

/**
 * The guest memory of a VMI in bytes: memory.guest, else requests.memory, else limits.memory. Throws a TypeError
 * when none is set, a QuantityError (apimachinery's message) when it is malformed.
 */
export function guestMemoryBytes(vmi: VirtualMachineInstance): number {
  const d = vmi.spec.domain;
  const q = d.memory?.guest ?? d.resources?.requests?.memory ?? d.resources?.limits?.memory;
  if (q === undefined) throw new TypeError(`VMI ${vmi.metadata?.name} sets no guest memory`);
  return Number(parseQuantity(q).value());
}

/** `bytes` (rounded up) as the canonical BinarySI quantity the API server would print: "1025Mi", "1Gi". */
function bytesQuantity(bytes: number): string {
  return Quantity.of(BigInt(Math.ceil(bytes)), "BinarySI").toString();
}

/** Launcher memory overhead: a fixed part plus page tables and dirty bitmaps (1/256 of the guest memory). */
export function launcherOverheadBytes(guestBytes: number): number {
  return LAUNCHER_BASE_OVERHEAD_BYTES + Math.ceil(guestBytes / 256);
}

/** Options beyond the VMI (the migration target pod uses them). */
export interface PodTemplateOptions {
  /** Extra labels (e.g. `kubevirt.io/migrationJobUID`). */
  readonly labels?: Record<string, string>;
  /** Extra nodeSelector terms (a migration's addedNodeSelector). */
  readonly nodeSelector?: Record<string, string>;
  /** Replaces the affinity (the target pod adds anti-affinity to the source node). */
  readonly affinity?: unknown;
  /**
   * The cluster's `developerConfiguration.useEmulation`: no KVM device request, and the launcher may fall back to
   * QEMU where KVM cannot run the guest. Default false (KubeVirt's).
   */
  readonly allowEmulation?: boolean;
  /** The image of the launcher's containers (virt-controller's `--launcher-image`); default {@link LAUNCHER_IMAGE}. */
  readonly launcherImage?: string;
  /**
   * The claims of the VMI's namespace by name, as the controller's cache has them (volumeMode decides between a
   * mount and a device). Absent, or a claim not found: the claim's volumeStatus entry, else Filesystem.
   */
  readonly claims?: (name: string) => PersistentVolumeClaimInfo | undefined;
}

/** The launcher containers' image: `--launcher-image`'s, else {@link LAUNCHER_IMAGE}. */
function launcherImageOf(options: PodTemplateOptions): string {
  return options.launcherImage ?? LAUNCHER_IMAGE;
}

/** The launcher's KUBEVIRT_USE_EMULATION for the cluster setting (apps/virt-launcher backend-choice.ts). */
export function launcherUseEmulation(allowEmulation: boolean): "whenNeeded" | "never" {
  return allowEmulation ? "whenNeeded" : "never";
}

/**
 * The device plugin resources the launcher needs, one of each (KubeVirt's getRequiredResources): `tun` when the VMI
 * has interfaces or does not turn the default pod interface off (RequiresTunDevice), `vhost-net` when an interface is
 * virtio (the default model) and emulation is not allowed (RequiresVirtioNetDevice: with emulation allowed the NIC is
 * emulated in user space), and the hypervisor device `kvm` unless emulation is allowed.
 */
export function virtualizationResources(vmi: VirtualMachineInstance, allowEmulation: boolean): string[] {
  const devices = vmi.spec.domain.devices;
  const interfaces = devices.interfaces ?? [];
  const out: string[] = [];
  if (interfaces.length > 0 || devices.autoattachPodInterface !== false) out.push(TUN_DEVICE_RESOURCE);
  const virtio = interfaces.some((i) => i.model === undefined || i.model === "" || i.model === "virtio");
  if (virtio && !allowEmulation) out.push(VHOST_NET_DEVICE_RESOURCE);
  if (!allowEmulation) out.push(KVM_DEVICE_RESOURCE);
  return out;
}

/** Renders the launcher pod for `vmi`. Throws a TypeError when the VMI has no guest memory. */
export function renderLauncherPod(vmi: VirtualMachineInstance, options: PodTemplateOptions = {}): Pod {
  const name = vmi.metadata?.name ?? "";
  const namespace = vmi.metadata?.namespace ?? "default";
  const uid = vmi.metadata?.uid ?? "";
  const guest = guestMemoryBytes(vmi);
  const overhead = launcherOverheadBytes(guest);
  const res = vmi.spec.domain.resources;
  const allowEmulation = options.allowEmulation === true;
  const requests: Record<string, string> = {
    memory: bytesQuantity(guest + overhead),
    cpu: String(res?.requests?.cpu ?? "100m"),
  };
  const limits: Record<string, string> = {};
  // Extended resources are requested through limits; requests say the same, as the API server's defaulting would.
  for (const resource of virtualizationResources(vmi, allowEmulation)) requests[resource] = limits[resource] = "1";
  if (res?.limits?.memory !== undefined)
    limits.memory = bytesQuantity(Number(parseQuantity(res.limits.memory).value()) + overhead);
  if (res?.limits?.cpu !== undefined) limits.cpu = String(res.limits.cpu);
  const annotations: Record<string, string> = {
    [ANNOTATION.domain]: name,
    [ANNOTATION.memoryOverheadBytes]: String(overhead),
  };
  const traceparent = vmi.metadata?.annotations?.[ANNOTATION.traceparent];
  if (traceparent) annotations[ANNOTATION.traceparent] = traceparent;
  const spec = vmi.spec;
  const storage = launcherStorage(vmi, options.claims);
  const pod: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      generateName: `virt-launcher-${name}-`,
      namespace,
      labels: {
        ...vmi.metadata?.labels,
        [LABEL.app]: "virt-launcher",
        [LABEL.createdBy]: uid,
        [VM_NAME_LABEL]: name,
        ...options.labels,
      },
      annotations,
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: KIND.VirtualMachineInstance,
          name,
          uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      containers: [
        {
          name: "compute",
          image: launcherImageOf(options),
          command: [LAUNCHER_COMMAND, "--namespace", namespace, "--name", name, "--uid", uid],
          env: [
            { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
            { name: "POD_UID", valueFrom: { fieldRef: { fieldPath: "metadata.uid" } } },
            { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
            // Where an incoming migration listens (the launcher's contract, main.ts); the process-kubelet sets it too.
            { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
            { name: "KUBEVIRT_USE_EMULATION", value: launcherUseEmulation(allowEmulation) },
          ],
          resources: { requests, limits },
          ...containerStorage(storage),
        },
        guestConsoleLogContainer(uid, launcherImageOf(options)),
      ],
      volumes: storage.volumes,
      nodeSelector: { ...spec.nodeSelector, ...options.nodeSelector, [LABEL.schedulable]: "true" },
      restartPolicy: "Never",
      terminationGracePeriodSeconds:
        (spec.terminationGracePeriodSeconds ?? DEFAULT_GRACE_PERIOD_SECONDS) + POD_GRACE_EXTRA_SECONDS,
    },
  };
  const podSpec = pod.spec!;
  const affinity = options.affinity ?? spec.affinity;
  if (affinity) podSpec.affinity = affinity;
  if (spec.tolerations) podSpec.tolerations = spec.tolerations;
  if (spec.schedulerName) podSpec.schedulerName = spec.schedulerName;
  if (spec.priorityClassName) podSpec.priorityClassName = spec.priorityClassName;
  if (spec.hostname) podSpec.hostname = spec.hostname;
  if (spec.subdomain) podSpec.subdomain = spec.subdomain;
  const account = spec.volumes?.find((v) => v.serviceAccount)?.serviceAccount?.serviceAccountName;
  if (account) podSpec.serviceAccountName = account;
  Object.assign(podSpec, imagePullSecrets(vmi));
  podSpec.automountServiceAccountToken = false;
  return pod;
}

/**
 * KubeVirt's `guest-console-log` container: `virt-tail` follows the console log the launcher writes in the `private`
 * volume it mounts read-only (`/var/run/kubevirt-private/<vmi uid>/virt-serial0-log`), so `kubectl logs <pod> -c
 * guest-console-log` shows the guest's serial console. Tiny resources, as KubeVirt sets them.
 */
export function guestConsoleLogContainer(
  uid: string,
  image: string = LAUNCHER_IMAGE,
): NonNullable<Pod["spec"]>["containers"][number] {
  return {
    name: CONSOLE_LOG_CONTAINER,
    image,
    command: [VIRT_TAIL_COMMAND, "--logfile", consoleLogPath(uid)],
    resources: { requests: { cpu: "5m", memory: "35M" }, limits: { cpu: "15m", memory: "60M" } },
    volumeMounts: [{ name: PRIVATE_VOLUME, mountPath: VIRT_PRIVATE_DIR, readOnly: true }],
  };
}

/** The guest's serial console log inside the pod (KubeVirt's `<VirtPrivateDir>/<vmi uid>/virt-serial0-log`). */
export function consoleLogPath(uid: string): string {
  return `${VIRT_PRIVATE_DIR}/${uid}/virt-serial0-log`;
}

/** The emptyDirs of the launcher itself and where the compute container mounts them, in KubeVirt's order. */
function launcherDirs(): {
  volumes: PodVolume[];
  mounts: NonNullable<Container["volumeMounts"]>;
} {
  return {
    volumes: [PRIVATE_VOLUME, SOCKETS_VOLUME, EPHEMERAL_DISKS_VOLUME].map((name) => ({ name, emptyDir: {} })),
    mounts: [
      { name: PRIVATE_VOLUME, mountPath: VIRT_PRIVATE_DIR },
      { name: EPHEMERAL_DISKS_VOLUME, mountPath: EPHEMERAL_DISKS_DIR },
      { name: SOCKETS_VOLUME, mountPath: VIRT_SOCKETS_DIR },
    ],
  };
}

/** The pod volumes, compute-container mounts and devices for the VMI's volumes (see the header). */
export function launcherStorage(
  vmi: VirtualMachineInstance,
  claims?: PodTemplateOptions["claims"],
): {
  volumes: PodVolume[];
  mounts: NonNullable<Container["volumeMounts"]>;
  devices: NonNullable<Container["volumeDevices"]>;
} {
  const { volumes, mounts } = launcherDirs();
  const devices: NonNullable<Container["volumeDevices"]> = [];
  const statusInfo = new Map(volumeStatuses(vmi.status).map((s) => [s.name, s.persistentVolumeClaimInfo]));
  const onDisk = new Set((vmi.spec.domain.devices.disks ?? []).map((d) => d.name));
  for (const v of vmi.spec.volumes ?? []) {
    if (v.containerDisk) {
      const { image, imagePullPolicy } = v.containerDisk;
      volumes.push({ name: v.name, image: imageVolumeSource(image, imagePullPolicy) });
      mounts.push({ name: v.name, mountPath: imageVolumePath(v.name), readOnly: true });
      continue;
    }
    const config = configVolume(v);
    if (config) {
      volumes.push(config.volume);
      // KubeVirt mounts config volumes only for disks; the token volume rides on automount, always mounted.
      if (onDisk.has(v.name) || v.serviceAccount)
        mounts.push({ name: v.name, mountPath: config.mountPath, readOnly: true });
      continue;
    }
    const claim = v.persistentVolumeClaim ?? v.ephemeral?.persistentVolumeClaim;
    const readOnly = v.ephemeral !== undefined || claim?.readOnly === true;
    if (claim) {
      volumes.push({
        name: v.name,
        persistentVolumeClaim: { claimName: claim.claimName, ...(readOnly ? { readOnly } : {}) },
      });
      const info = claims?.(claim.claimName) ?? statusInfo.get(v.name);
      if (isPvcBlock(info?.volumeMode)) {
        devices.push({ name: v.name, devicePath: blockDevicePath(v.name) });
        continue;
      }
    } else if (v.hostDisk) {
      const dir = v.hostDisk.path.replace(/\/[^/]*$/, "") || "/";
      volumes.push({
        name: v.name,
        hostPath: { path: dir, type: v.hostDisk.type === "DiskOrCreate" ? "DirectoryOrCreate" : "Directory" },
      });
    } else {
      continue;
    }
    mounts.push({ name: v.name, mountPath: `${VMI_DISKS_DIR}/${v.name}`, ...(readOnly ? { readOnly } : {}) });
  }
  const kernelBoot = vmi.spec.domain.firmware?.kernelBoot?.container;
  if (kernelBoot?.image) {
    volumes.push({ name: KERNEL_BOOT_VOLUME, image: imageVolumeSource(kernelBoot.image, kernelBoot.imagePullPolicy) });
    mounts.push({ name: KERNEL_BOOT_VOLUME, mountPath: imageVolumePath(KERNEL_BOOT_VOLUME), readOnly: true });
  }
  for (const secretName of accessCredentialSecrets(vmi)) {
    const name = `${secretName}-access-cred`;
    volumes.push({ name, secret: { secretName } });
    mounts.push({ name, mountPath: `${SECRET_SOURCE_DIR}/${name}`, readOnly: true });
  }
  return { volumes, mounts, devices };
}

/**
 * A containerDisk's image volume source: the VMI's pull policy, else Kubernetes' default for an image (Always for
 * `:latest` or no tag, IfNotPresent otherwise), which the API server would set anyway.
 */
function imageVolumeSource(reference: string, pullPolicy: string | undefined): NonNullable<PodVolume["image"]> {
  const policy =
    pullPolicy === "Always" || pullPolicy === "IfNotPresent" || pullPolicy === "Never"
      ? pullPolicy
      : imageTagOf(reference) === "latest"
        ? "Always"
        : "IfNotPresent";
  return { reference, pullPolicy: policy };
}

/** The tag of an image reference (`latest` when it names none; a digest reference has none). */
function imageTagOf(reference: string): string | undefined {
  if (reference.includes("@")) return undefined;
  const lastPart = reference.slice(reference.lastIndexOf("/") + 1);
  const colon = lastPart.indexOf(":");
  return colon < 0 ? "latest" : lastPart.slice(colon + 1);
}

/**
 * The pod's imagePullSecrets (absent when none): those of the VMI's containerDisks and kernelBoot container, each
 * once, in order.
 */
function imagePullSecrets(vmi: VirtualMachineInstance): { imagePullSecrets?: { name: string }[] } {
  const names = (vmi.spec.volumes ?? []).map((v) => v.containerDisk?.imagePullSecret);
  names.push(vmi.spec.domain.firmware?.kernelBoot?.container?.imagePullSecret);
  const unique = [...new Set(names.filter((n): n is string => typeof n === "string" && n !== ""))];
  return unique.length > 0 ? { imagePullSecrets: unique.map((name) => ({ name })) } : {};
}

/** The compute container's volumeMounts, and its volumeDevices when there are any. */
function containerStorage(
  storage: ReturnType<typeof launcherStorage>,
): Pick<Container, "volumeMounts" | "volumeDevices"> {
  return storage.devices.length > 0
    ? { volumeMounts: storage.mounts, volumeDevices: storage.devices }
    : { volumeMounts: storage.mounts };
}

/**
 * The Secrets of `spec.accessCredentials` (KubeVirt's withAccessCredentials): each is mounted read-only at
 * `<SECRET_SOURCE_DIR>/<secret>-access-cred`, where the launcher reads the SSH keys it puts in the cloud-init
 * meta-data. A Secret named twice is mounted once.
 */
export function accessCredentialSecrets(vmi: VirtualMachineInstance): string[] {
  const names = (vmi.spec.accessCredentials ?? []).map(
    (c) => c.sshPublicKey?.source?.secret?.secretName ?? c.userPassword?.source?.secret?.secretName ?? "",
  );
  return [...new Set(names.filter((n) => n !== ""))];
}

/** Seconds a projected service account token lives (the ServiceAccount admission plugin's 3607). */
export const SERVICE_ACCOUNT_TOKEN_SECONDS = 3607;

/**
 * The projected volume the ServiceAccount admission plugin gives a pod (`kube-api-access-*`): the token, the
 * cluster's CA from the `kube-root-ca.crt` ConfigMap, and the pod's namespace, files mode 0644.
 */
export function serviceAccountVolume(name: string): PodVolume {
  return {
    name,
    projected: {
      defaultMode: 0o644,
      sources: [
        { serviceAccountToken: { path: "token", expirationSeconds: SERVICE_ACCOUNT_TOKEN_SECONDS } },
        { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
        {
          downwardAPI: {
            items: [{ path: "namespace", fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } }],
          },
        },
      ],
    },
  };
}

/** A downwardAPI VMI volume's `fields` (KubeVirt DownwardAPIVolumeSource; the schema keeps it free-form). */
type DownwardApiFields = NonNullable<NonNullable<PodVolume["downwardAPI"]>["items"]>;

/** The pod volume and mount path of a configMap, secret, downwardAPI or serviceAccount VMI volume, else undefined. */
function configVolume(v: Volume): { volume: PodVolume; mountPath: string } | undefined {
  if (v.configMap) {
    const { name = "", optional } = v.configMap;
    return {
      volume: { name: v.name, configMap: { name, ...(optional !== undefined ? { optional } : {}) } },
      mountPath: `${CONFIG_MAP_SOURCE_DIR}/${v.name}`,
    };
  }
  if (v.secret) {
    const { secretName = "", optional } = v.secret;
    return {
      volume: { name: v.name, secret: { secretName, ...(optional !== undefined ? { optional } : {}) } },
      mountPath: `${SECRET_SOURCE_DIR}/${v.name}`,
    };
  }
  if (v.downwardAPI) {
    const fields = (v.downwardAPI as { fields?: DownwardApiFields }).fields ?? [];
    return {
      volume: { name: v.name, downwardAPI: { items: structuredClone(fields) } },
      mountPath: `${DOWNWARD_API_SOURCE_DIR}/${v.name}`,
    };
  }
  if (v.serviceAccount) return { volume: serviceAccountVolume(v.name), mountPath: SERVICE_ACCOUNT_SOURCE_DIR };
  return undefined;
}
