/**
 * What the VM mutating webhook applies (KubeVirt `vm-mutator.go`): on CREATE a firmware UUID and serial, so every
 * VMI the VM ever creates carries the same UUID (licences bound to it survive restarts); on every request the
 * machine type. Plus the legacy UUID virt-controller derives for VMs created before the mutator did this.
 */
import { Buffer } from "node:buffer";
import { createRequire } from "node:module";
import { typeErrors } from "../strict-decode.ts";
import type { VirtualMachine } from "../types.ts";
import { DEFAULT_CLUSTER_CONFIG } from "../validation/validation-config.ts";
import type { DefaultingOptions } from "./vmi-defaults.ts";

/** Applies the VM defaults for a CREATE or an UPDATE; returns a copy. */
export function defaultVm(
  input: VirtualMachine,
  operation: "CREATE" | "UPDATE",
  opts: DefaultingOptions = {},
): VirtualMachine {
  const vm = structuredClone(input);
  const spec = vm.spec?.template?.spec;
  // Deleting VMs and template-less VMs are left alone (the latter fails validation).
  if (vm.metadata?.deletionTimestamp || !spec?.domain || typeErrors("VirtualMachine", vm).length > 0) return vm;
  const config = opts.config ?? DEFAULT_CLUSTER_CONFIG;
  const uuid = opts.uuid ?? (() => crypto.randomUUID());
  if (operation === "CREATE") {
    const fw = spec.domain.firmware ?? {};
    spec.domain.firmware = fw;
    fw.uuid ||= uuid();
    fw.serial ||= uuid();
  }
  spec.domain.machine = { ...spec.domain.machine, type: spec.domain.machine?.type || config.machineType };
  return vm;
}

const LEGACY_UUID_NAMESPACE = "6a1a24a1-4061-4607-8bf4-a3963d0c5895";

/** node:crypto, loaded at the first use: most processes that import this library never hash (virt-launcher). */
let cryptoModule: typeof import("node:crypto") | undefined;
function nodeCrypto(): typeof import("node:crypto") {
  cryptoModule ??= createRequire(import.meta.url)("node:crypto") as typeof import("node:crypto");
  return cryptoModule;
}

/** RFC 4122 UUIDv5 (SHA-1) of `name` in `namespace`. */
export function uuidV5(namespace: string, name: string): string {
  const ns = Buffer.from(namespace.replace(/-/g, ""), "hex");
  const hash = nodeCrypto().createHash("sha1").update(ns).update(name, "utf8").digest();
  hash[6] = ((hash[6] ?? 0) & 0x0f) | 0x50;
  hash[8] = ((hash[8] ?? 0) & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The firmware UUID virt-controller gives a VM that has none (KubeVirt `CalculateLegacyUUID`: UUIDv5 of the name). */
export function legacyFirmwareUuid(vmName: string): string {
  return uuidV5(LEGACY_UUID_NAMESPACE, vmName);
}
