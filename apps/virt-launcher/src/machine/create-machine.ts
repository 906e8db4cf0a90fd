/**
 * Builds the guest's Machine with the backend chosen for it (backend-choice.ts: KubeVirt's `useEmulation`,
 * never / whenNeeded / always, against what this host's KVM can run): the native VMM (./native/) or QEMU in TCG
 * mode (./qemu/). A guest that can run nowhere fails with the chooser's reason; one the chosen backend cannot
 * boot fails with the backend's. Both surface as MachineUnsupportedError, which the launcher answers with
 * BadRequest so the handler fails the VMI with that message.
 *
 * The QEMU backend is imported when a guest needs it: a launcher on KVM never loads it (nor the child-process,
 * crypto and ISO code it brings), which keeps every native launcher's start-up CPU and memory down.
 */

import type { DomainInterface } from "@kvt/launcher-rpc";
import type { Logger } from "@kvt/observability";
import {
  adoptPodNetwork,
  HANDOVER_FILE,
  isBridgePlan,
  nicNeedsQemu,
  POD_INTERFACE,
  type WiredPodNetwork,
  wirePodNetwork,
} from "@kvt/pod-network";
import { type HostVirt, nativeVmm, probeHostVirt, type Vmm } from "@kvt/vmm";
import type { BuiltMachine } from "../domain/domain-manager.ts";
import { guestNetworkOf } from "../network/port-forward.ts";
import { disksNeedQemu } from "../vmi/disks.ts";
import { chooseBackend, type UseEmulation } from "./backend-choice.ts";
import { type MachineDisk, type MachineSpec, MachineUnsupportedError } from "./machine.ts";
import { NativeMachine } from "./native/native-machine.ts";

/** Creates (does not start) the machine for `spec`. */
export type MachineFactory = (spec: MachineSpec) => Promise<BuiltMachine>;

/** What the factory decides with; tests inject the host and a fake VMM. */
export interface MachineFactoryOptions {
  readonly logger: Logger;
  readonly useEmulation: UseEmulation;
  readonly host?: HostVirt;
  readonly vmm?: Vmm;
  /**
   * The address an incoming migration listens on and hands to the source: the pod's IP on the pod network
   * (POD_IP), so the source launcher in another pod reaches it; default 127.0.0.1 (pods sharing the node's network).
   */
  readonly migrationHost?: string;
  /** The port an incoming migration listens on (default any; KubeVirt's 49152 on a pod network). */
  readonly migrationPort?: number;
  /**
   * This launcher runs in its pod's own network namespace (POD_IP set): wire the VMI's pod-network binding here.
   * Never on a launcher sharing a host's network (tests, a kubelet without a pod network).
   */
  readonly inPodNetwork?: boolean;
  /**
   * Who builds the binding in the pod: `self` (this launcher holds CAP_NET_ADMIN: the process-kubelet's root
   * launcher) or `node` (virt-handler plumbs it and leaves the result in `handoverFile`; this launcher only serves
   * DHCP: a real node's unprivileged launcher). Default `self`.
   */
  readonly podNetworkWiring?: "self" | "node";
  /** Where virt-handler leaves the plumbing's result (default @kvt/pod-network HANDOVER_FILE). */
  readonly handoverFile?: string;
  /** The pod's IP (POD_IP): a masquerade interface's address in status.interfaces (a bridge reports its own). */
  readonly podIp?: string;
}

/** The launcher's machine factory. */
export function machineFactory(options: MachineFactoryOptions): MachineFactory {
  const build = backendFactory(options);
  return async (unwired) => {
    const wired = options.inPodNetwork ? await withPodNics(unwired, options) : undefined;
    const spec = wired?.spec ?? unwired;
    const built = await build(spec);
    const interfaces = wiredInterfaces(spec, wired?.ipAddresses ?? options.podIp);
    if (interfaces.length === 0 || !spec.podNetwork) return built;
    // The launcher reaches a masquerade guest inside the pod; a bridged guest holds the pod's address itself.
    if (isBridgePlan(spec.podNetwork)) return { ...built, interfaces };
    return { ...built, interfaces, guestNetwork: guestNetworkOf(spec.podNetwork) };
  };
}

/**
 * The VMI's status.interfaces for the wired NICs, as KubeVirt reports a masquerade or bridge interface without a
 * guest agent: the pod's IPs (`podIps`; a bridge's are the ones it handed to the guest), the guest MAC, the pod
 * interface, infoSource "domain".
 */
export function wiredInterfaces(spec: MachineSpec, podIps: string | readonly string[] | undefined): DomainInterface[] {
  const plan = spec.podNetwork;
  const nic = spec.nics?.[0];
  if (!plan || !nic) return [];
  const ips = typeof podIps === "string" ? [podIps] : [...(podIps ?? [])];
  return [
    {
      name: plan.name,
      mac: nic.mac,
      ...(ips.length > 0 ? { ipAddress: ips[0], ipAddresses: ips } : {}),
      podInterfaceName: POD_INTERFACE,
      infoSource: "domain",
      queueCount: 1,
    },
  ];
}

/** Picks the backend for a (wired) spec and creates its machine. */
function backendFactory(options: MachineFactoryOptions): MachineFactory {
  return async (spec) => {
    const host = options.host ?? probeHostVirt();
    const needsQemu = disksNeedQemu(spec.disks ?? []) ?? nicNeedsQemu(spec.podNetwork);
    const choice = chooseBackend(options.useEmulation, host, {
      pvmSafe: spec.boot.pvmSafe,
      ...(needsQemu ? { needsQemu } : {}),
    });
    if (!choice.ok) throw new MachineUnsupportedError(`${choice.reason}: ${choice.message}`);
    options.logger.info({ backend: choice.backend, emulation: choice.emulation, host }, "backend chosen");
    const ready = await withWriteLayers(spec, choice.backend);
    if (choice.backend === "qemu") {
      const { QemuMachine } = await import("./qemu/qemu-machine.ts");
      return {
        machine: new QemuMachine(ready, {
          logger: options.logger,
          ...(options.migrationHost ? { migrationHost: options.migrationHost } : {}),
          ...(options.migrationPort ? { migrationPort: options.migrationPort } : {}),
        }),
        emulated: true,
        reason: choice.emulation?.message ?? "software emulation (QEMU TCG)",
      };
    }
    return {
      machine: new NativeMachine(
        ready,
        options.vmm ?? nativeVmm,
        options.logger,
        options.migrationHost,
        options.migrationPort,
      ),
      emulated: false,
      reason: "native VMM on KVM",
    };
  };
}

/** `spec` with its containerDisks' write layers made for `backend`; a bad image is a MachineUnsupportedError. */
async function withWriteLayers(spec: MachineSpec, backend: "native" | "qemu"): Promise<MachineSpec> {
  const disks = spec.disks ?? [];
  if (!disks.some((d) => d.copyFrom)) return spec;
  // The layer code (the disk-image reader: zlib, worker threads) loads only for a VMI with a containerDisk disk.
  const { makeWriteLayer } = await import("../volumes/container-disk-layer.ts");
  const out: MachineDisk[] = [];
  for (const disk of disks) {
    try {
      out.push(disk.copyFrom ? await makeWriteLayer(disk, backend) : disk);
    } catch (error) {
      const message =
        error instanceof Error && error.name === "DiskImageError"
          ? `its image is not usable: ${error.message}`
          : `cannot prepare ${disk.path}: ${(error as Error).message}`;
      throw new MachineUnsupportedError(`volume ${disk.name}: ${message}`, { cause: error });
    }
  }
  return { ...spec, disks: out };
}

/**
 * Wires the spec's pod-network binding in this pod (once per launcher) and adds the guest's NIC on its tap; with
 * the addresses status.interfaces reports when the binding knows them (bridge).
 */
async function withPodNics(
  spec: MachineSpec,
  options: MachineFactoryOptions,
): Promise<{ spec: MachineSpec; ipAddresses?: readonly string[] } | undefined> {
  const plan = spec.podNetwork;
  if (!plan) return undefined;
  const logger = options.logger;
  wired ??= (
    options.podNetworkWiring === "node"
      ? adoptPodNetwork(plan, options.handoverFile ?? HANDOVER_FILE, logger)
      : wirePodNetwork(plan, logger)
  ).catch((err: unknown) => {
    wired = undefined; // a later start tries again
    throw err;
  });
  const nic = await wired;
  return {
    spec: { ...spec, nics: [{ tap: nic.tap, mac: nic.mac, model: plan.model }] },
    ...(nic.ipAddresses ? { ipAddresses: nic.ipAddresses } : {}),
  };
}

/** The pod's wiring: one per launcher process (a VMI has one pod interface; a retry reuses it). */
let wired: Promise<WiredPodNetwork> | undefined;
