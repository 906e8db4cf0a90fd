/**
 * The webhooks virt-api serves, by path (KubeVirt's paths), each a mutating or validating {@link Admitter}:
 *
 *   /virtualmachines-mutate                      VM create: firmware UUID
 *   /virtualmachines-validate                    VM create/update: runStrategy rules + template spec
 *   /virtualmachineinstances-mutate              VMI create: firmware UUID
 *   /virtualmachineinstances-validate-create     VMI create: spec rules
 *   /virtualmachineinstances-validate-update     VMI update: spec immutable, except for KubeVirt's service accounts
 *   /migration-mutate-create                     VMIM create: label kubevirt.io/vmi-name, finalizer
 *   /migration-validate-create                   VMIM create: VMI exists, not final, migratable, none in flight
 *   /migration-validate-update                   VMIM update: spec immutable
 *   /migration-policy-validate-create            MigrationPolicy create/update: value ranges
 */

import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import type { ClusterClient } from "../kube/cluster-client.ts";
import { isFinalPhase, type JsonPatchOp, type VirtualMachineInstanceMigration } from "../kube/types.ts";
import { type AdmissionRequest, type Admitter, ALLOW, cause, deny, show } from "./admission.ts";
import { validateVmiSpec } from "./vmi-rules.ts";

type Obj = Record<string, unknown>;
const RUN_STRATEGIES = ["Always", "Halted", "Manual", "RerunOnFailure", "Once"];
/** The label the migration mutator sets (`v1.MigrationSelectorLabel`). */
export const MIGRATION_SELECTOR_LABEL = "kubevirt.io/vmi-name";
/** The finalizer the migration mutator adds. */
export const MIGRATION_FINALIZER = "kubevirt.io/migrationJobFinalizer";

function get(value: unknown, ...path: string[]): unknown {
  let at = value;
  for (const key of path) at = typeof at === "object" && at !== null ? (at as Obj)[key] : undefined;
  return at;
}

/** Adds `firmware.uuid` under the domain at `domainPath` when missing (KubeVirt's VM/VMI mutators). */
function firmwareUuidPatch(domain: unknown, domainPath: string): JsonPatchOp[] {
  if (typeof domain !== "object" || domain === null) return [];
  const firmware = (domain as Obj).firmware;
  if (typeof firmware !== "object" || firmware === null) {
    return [{ op: "add", path: `${domainPath}/firmware`, value: { uuid: randomUUID() } }];
  }
  if ((firmware as Obj).uuid) return [];
  return [{ op: "add", path: `${domainPath}/firmware/uuid`, value: randomUUID() }];
}

/** `/virtualmachines-mutate` */
export const mutateVm: Admitter = (req) => {
  if (req.operation !== "CREATE") return Promise.resolve(ALLOW);
  const domain = get(req.object, "spec", "template", "spec", "domain");
  return Promise.resolve({ allowed: true, patch: firmwareUuidPatch(domain, "/spec/template/spec/domain") });
};

/** `/virtualmachineinstances-mutate` */
export const mutateVmi: Admitter = (req) => {
  if (req.operation !== "CREATE") return Promise.resolve(ALLOW);
  return Promise.resolve({
    allowed: true,
    patch: firmwareUuidPatch(get(req.object, "spec", "domain"), "/spec/domain"),
  });
};

/** `/virtualmachines-validate` */
export const validateVm: Admitter = (req) => {
  const spec = get(req.object, "spec") as Obj | undefined;
  const causes = [];
  if (!spec?.template) {
    causes.push(cause("spec.template", "missing virtual machine template.", "FieldValueRequired"));
  }
  const running = spec?.running;
  const strategy = spec?.runStrategy;
  if (running !== undefined && running !== null && strategy !== undefined && strategy !== null) {
    causes.push(
      cause(
        "spec.running",
        "Running and RunStrategy are mutually exclusive. Note that Running is deprecated, please use RunStrategy instead",
      ),
    );
  } else if ((running === undefined || running === null) && (strategy === undefined || strategy === null)) {
    causes.push(cause("spec.runStrategy", "RunStrategy must be specified", "FieldValueRequired"));
  } else if (strategy !== undefined && strategy !== null && !RUN_STRATEGIES.includes(show(strategy))) {
    causes.push(cause("spec.runStrategy", `Invalid RunStrategy (${show(strategy)})`));
  }
  if (spec?.template) causes.push(...validateVmiSpec(get(spec.template, "spec"), "spec.template.spec"));
  return Promise.resolve(causes.length > 0 ? deny(...causes) : ALLOW);
};

/** `/virtualmachineinstances-validate-create` */
export const validateVmiCreate: Admitter = (req) => {
  const causes = validateVmiSpec(get(req.object, "spec"), "spec");
  return Promise.resolve(causes.length > 0 ? deny(...causes) : ALLOW);
};

/** Users whose VMI spec updates are allowed (KubeVirt's own service accounts). */
export function isKubevirtServiceAccount(username: string | undefined, kubevirtNamespace: string): boolean {
  return [
    "kubevirt-controller",
    "kubevirt-handler",
    "kubevirt-apiserver",
    "kubevirt-internal-virtualization-admin",
  ].some((sa) => username === `system:serviceaccount:${kubevirtNamespace}:${sa}`);
}

/** `/virtualmachineinstances-validate-update`: the spec is immutable for everyone but KubeVirt itself. */
export function validateVmiUpdate(kubevirtNamespace: string): Admitter {
  return (req) => {
    if (req.operation !== "UPDATE" || (req.subResource ?? "") !== "") return Promise.resolve(ALLOW);
    if (isKubevirtServiceAccount(req.userInfo?.username, kubevirtNamespace)) return Promise.resolve(ALLOW);
    if (!isDeepStrictEqual(get(req.object, "spec"), get(req.oldObject, "spec"))) {
      return Promise.resolve(deny(cause("spec", "update of VMI object is restricted", "FieldValueNotSupported")));
    }
    return Promise.resolve(ALLOW);
  };
}

/** `/migration-mutate-create` */
export const mutateMigration: Admitter = (req) => {
  if (req.operation !== "CREATE") return Promise.resolve(ALLOW);
  const meta = (get(req.object, "metadata") ?? {}) as Obj;
  const vmiName = get(req.object, "spec", "vmiName");
  const patch: JsonPatchOp[] = [];
  if (typeof vmiName === "string") {
    const labels = {
      ...((meta.labels as Record<string, string> | undefined) ?? {}),
      [MIGRATION_SELECTOR_LABEL]: vmiName,
    };
    patch.push({ op: meta.labels ? "replace" : "add", path: "/metadata/labels", value: labels });
  }
  const finalizers = Array.isArray(meta.finalizers) ? (meta.finalizers as string[]) : [];
  if (!finalizers.includes(MIGRATION_FINALIZER)) {
    patch.push({
      op: meta.finalizers ? "replace" : "add",
      path: "/metadata/finalizers",
      value: [...finalizers, MIGRATION_FINALIZER],
    });
  }
  return Promise.resolve({ allowed: true, patch });
};

function inFlight(
  list: VirtualMachineInstanceMigration[],
  self: string | undefined,
): VirtualMachineInstanceMigration | undefined {
  return list.find((m) => !isFinalPhase(m.status?.phase) && m.metadata.uid !== undefined && m.metadata.name !== self);
}

/** `/migration-validate-create`; reads the VMI and the other VMIMs through `client`. */
export function validateMigrationCreate(client: ClusterClient): Admitter {
  return async (req: AdmissionRequest) => {
    const vmiName = get(req.object, "spec", "vmiName");
    if (typeof vmiName !== "string" || vmiName === "") {
      return deny(cause("spec.vmiName", "vmiName is missing", "FieldValueInvalid"));
    }
    if (get(req.object, "spec", "priority") !== undefined) {
      return deny(
        cause(
          "spec.priority",
          "Migration priority queue, only virt-controller is allowed to set priority field",
          "FieldValueNotSupported",
        ),
      );
    }
    const namespace = req.namespace ?? "";
    const vmi = await client.getVmi(namespace, vmiName);
    if (!vmi) return { allowed: false, code: 400, message: `the VMI "${namespace}/${vmiName}" does not exist` };
    if (isFinalPhase(vmi.status?.phase))
      return { allowed: false, code: 400, message: "Cannot migrate VMI in finalized state." };
    const notMigratable = (vmi.status?.conditions ?? []).find(
      (c) => c.type === "LiveMigratable" && c.status === "False",
    );
    if (notMigratable) {
      return {
        allowed: false,
        code: 400,
        message: `Cannot migrate VMI, Reason: ${notMigratable.reason ?? ""}, Message: ${notMigratable.message ?? ""}`,
      };
    }
    const others = inFlight(await client.listVmims(namespace, `${MIGRATION_SELECTOR_LABEL} in (${vmiName})`), req.name);
    if (others) {
      return {
        allowed: false,
        code: 400,
        message: `in-flight migration detected. Active migration job (${others.metadata.uid ?? ""}) is currently already in progress for VMI ${vmiName}.`,
      };
    }
    return ALLOW;
  };
}

/** `/migration-validate-update`: the spec never changes after creation. */
export const validateMigrationUpdate: Admitter = (req) => {
  if (!isDeepStrictEqual(get(req.object, "spec"), get(req.oldObject, "spec"))) {
    return Promise.resolve(deny(cause("spec", "update of Migration object's spec is restricted", "FieldValueInvalid")));
  }
  return Promise.resolve(ALLOW);
};

/** `/migration-policy-validate-create` (create and update). */
export const validateMigrationPolicy: Admitter = (req) => {
  const spec = (get(req.object, "spec") ?? {}) as Obj;
  const causes = [];
  const downtime = spec.maxDowntimeMs;
  if (downtime !== undefined && !(typeof downtime === "number" && downtime >= 1 && downtime <= 2_000_000)) {
    causes.push(cause("spec.maxDowntimeMs", "spec.maxDowntimeMs must be between 1 and 2000000"));
  }
  const timeout = spec.completionTimeoutPerGiB;
  if (timeout !== undefined && !(typeof timeout === "number" && timeout >= 0)) {
    causes.push(cause("spec.completionTimeoutPerGiB", "spec.completionTimeoutPerGiB must not be negative"));
  }
  const bandwidth = spec.bandwidthPerMigration;
  if (
    bandwidth !== undefined &&
    (typeof bandwidth === "string" ? bandwidth.startsWith("-") : typeof bandwidth !== "number" || bandwidth < 0)
  ) {
    causes.push(cause("spec.bandwidthPerMigration", "spec.bandwidthPerMigration must not be negative"));
  }
  return Promise.resolve(causes.length > 0 ? deny(...causes) : ALLOW);
};

/** Every webhook path with its admitter. */
export function webhookRoutes(client: ClusterClient, kubevirtNamespace: string): Record<string, Admitter> {
  return {
    "/virtualmachines-mutate": mutateVm,
    "/virtualmachines-validate": validateVm,
    "/virtualmachineinstances-mutate": mutateVmi,
    "/virtualmachineinstances-validate-create": validateVmiCreate,
    "/virtualmachineinstances-validate-update": validateVmiUpdate(kubevirtNamespace),
    "/migration-mutate-create": mutateMigration,
    "/migration-validate-create": validateMigrationCreate(client),
    "/migration-validate-update": validateMigrationUpdate,
    "/migration-policy-validate-create": validateMigrationPolicy,
  };
}
