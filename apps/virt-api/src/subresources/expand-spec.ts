/**
 * The instancetype expansion subresources (KubeVirt `pkg/virt-api/rest/expand.go`, `pkg/instancetype/expand`):
 *
 *   GET /apis/subresources.kubevirt.io/v1/namespaces/<ns>/virtualmachines/<name>/expand-spec   the stored VM
 *   PUT /apis/subresources.kubevirt.io/v1/namespaces/<ns>/expand-vm-spec                        a VM in the body
 *
 * Both answer the VM with its instancetype and preference applied to the template (volumes given a disk and the
 * pod network an interface first, VMI defaults after) and the matchers and status refs removed. Errors: the GET
 * answers 500 and the PUT 400 with the lookup's or the conflicts' message, as KubeVirt does.
 */
import {
  applyInstancetypeToVmi,
  applyVmiSpecDefaults,
  DEFAULT_CLUSTER_CONFIG,
  type InstancetypeSpec,
  type PreferenceSpec,
  type VirtualMachine,
} from "@kvt/api";
import { type ApiError, badRequest, errorMessage, internalError } from "@kvt/kube";
import { findSpec, type InstancetypeReader } from "../webhooks/instancetype-admitters.ts";

type Obj = Record<string, unknown>;

/** KubeVirt's SetDefaultVolumeDisk and SetDefaultNetworkInterface, before the preference picks buses and models. */
function preDefault(spec: Obj): void {
  spec.domain ??= {};
  const domain = spec.domain as Obj;
  domain.devices ??= {};
  const devices = domain.devices as Obj;
  const disks = (devices.disks as Obj[] | undefined) ?? [];
  for (const v of (spec.volumes as Obj[] | undefined) ?? []) {
    if (!disks.some((d) => d.name === v.name)) disks.push({ name: v.name });
  }
  if (disks.length > 0) devices.disks = disks;
  const interfaces = devices.interfaces as Obj[] | undefined;
  const networks = spec.networks as Obj[] | undefined;
  if (devices.autoattachPodInterface !== false && !interfaces?.length && !networks?.length) {
    devices.interfaces = [{ name: "default", [DEFAULT_CLUSTER_CONFIG.defaultNetworkInterface]: {} }];
    spec.networks = [{ name: "default", pod: {} }];
  }
}

/** The expanded VM, or throws `fail(message)` (KubeVirt `expander.Expand`). */
export async function expandVm(
  reader: InstancetypeReader,
  vm: VirtualMachine,
  fail: (message: string) => ApiError,
): Promise<VirtualMachine> {
  if (!vm.spec?.instancetype && !vm.spec?.preference) return vm;
  let instancetype: InstancetypeSpec | undefined;
  let preference: PreferenceSpec | undefined;
  try {
    instancetype = await findSpec<InstancetypeSpec>(reader, vm, "instancetype");
    if (vm.spec.instancetype && !instancetype) throw new Error(notFoundMessage(vm, "instancetype"));
    preference = await findSpec<PreferenceSpec>(reader, vm, "preference");
    if (vm.spec.preference && !preference) throw new Error(notFoundMessage(vm, "preference"));
  } catch (error) {
    throw fail(errorMessage(error));
  }
  const expanded = structuredClone(vm);
  expanded.spec.template.metadata ??= {};
  expanded.spec.template.spec ??= { domain: { devices: {} } };
  const spec = expanded.spec.template.spec;
  preDefault(spec);
  const conflicts = applyInstancetypeToVmi(
    "spec.template.spec",
    instancetype,
    preference,
    spec,
    expanded.spec.template.metadata,
  );
  if (conflicts.length > 0) {
    throw fail(`VM field(s) ${conflicts.map((c) => c.field).join(", ")} conflicts with selected instance type`);
  }
  applyVmiSpecDefaults(spec);
  delete expanded.spec.instancetype;
  delete expanded.spec.preference;
  if (expanded.status) {
    delete expanded.status.instancetypeRef;
    delete expanded.status.preferenceRef;
  }
  return expanded;
}

function notFoundMessage(vm: VirtualMachine, role: "instancetype" | "preference"): string {
  const m = vm.spec[role];
  const kind = (m?.kind ?? "").toLowerCase();
  const cluster = kind === "" || kind.includes("cluster");
  const plural =
    role === "instancetype"
      ? cluster
        ? "virtualmachineclusterinstancetypes"
        : "virtualmachineinstancetypes"
      : cluster
        ? "virtualmachineclusterpreferences"
        : "virtualmachinepreferences";
  return `${plural}.instancetype.kubevirt.io "${m?.name ?? ""}" not found`;
}

/** `GET .../virtualmachines/<name>/expand-spec`: errors are 500s, as KubeVirt's `errors.NewInternalError`. */
export function expandStoredVm(reader: InstancetypeReader, vm: VirtualMachine): Promise<VirtualMachine> {
  return expandVm(reader, vm, (m) => internalError(m));
}

/** `PUT .../namespaces/<ns>/expand-vm-spec`: the body's VM, in `namespace`; errors are 400s. */
export async function expandPostedVm(
  reader: InstancetypeReader,
  body: unknown,
  namespace: string,
): Promise<VirtualMachine> {
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw badRequest("Object is not a valid VirtualMachine");
  }
  const vm = structuredClone(body) as VirtualMachine;
  const ns = vm.metadata?.namespace;
  if (ns && ns !== namespace) throw badRequest(`VM namespace must be empty or ${namespace}`);
  vm.metadata = { ...vm.metadata, namespace };
  if (!vm.spec?.template) throw badRequest("Object is not a valid VirtualMachine");
  return await expandVm(reader, vm, (m) => badRequest(m));
}
