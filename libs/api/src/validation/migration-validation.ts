/**
 * Validation of VirtualMachineInstanceMigrations (KubeVirt `migration-create-admitter.go`, `migration-update-admitter.go`).
 *
 * Create: vmiName required (cause); then, as plain 400 errors like KubeVirt: priority only from virt-controller,
 * the VMI must exist, not be final, not be LiveMigratable=False, and no other migration of it may be in flight;
 * a cross-cluster migration (sendTo/receive) is refused (see `decentralizedRefusal`).
 */
import { isDeepStrictEqual } from "node:util";
import { LABEL, VMI_CONDITION } from "../constants.ts";
import { featureGateEnabled, GATE } from "../semantics/feature-gates.ts";
import { typeErrors } from "../strict-decode.ts";
import type {
  DeveloperConfiguration,
  MigrationPolicy,
  ValidationCause,
  VirtualMachineInstance,
  VirtualMachineInstanceMigration,
} from "../types.ts";
import { type AdmissionDenial, CAUSE_TYPE, cause, denialFromCauses, denialFromError, FieldPath } from "./causes.ts";
import { readQuantity } from "./quantities.ts";

/** What the create check needs to know about the cluster. */
export interface MigrationCreateContext {
  /** The VMI named by `spec.vmiName`, or undefined when it does not exist. */
  vmi: VirtualMachineInstance | undefined;
  /** The migrations in the namespace labelled `kubevirt.io/vmi-name=<vmiName>`. */
  migrationsOfVmi: readonly VirtualMachineInstanceMigration[];
  /** True when virt-controller makes the request. */
  isVirtController?: boolean;
  /** The KubeVirt CR's developerConfiguration (feature gates; none: KubeVirt's defaults). */
  developerConfiguration?: DeveloperConfiguration;
}

const isFinalPhase = (p: string | undefined): boolean => p === "Succeeded" || p === "Failed";

/** The reason a migration may not be created, or undefined when it may. */
export function admitMigrationCreate(
  m: VirtualMachineInstanceMigration,
  ctx: MigrationCreateContext,
): AdmissionDenial | undefined {
  const typeCauses = typeErrors("VirtualMachineInstanceMigration", m);
  if (typeCauses.length > 0) return denialFromCauses(typeCauses);
  if (!m.spec?.vmiName) return denialFromCauses([cause(CAUSE_TYPE.required, "vmiName is missing", "spec.vmiName")]);
  if (m.spec.priority !== undefined && !ctx.isVirtController) {
    return denialFromCauses([
      cause(
        "FieldValueForbidden",
        "Migration priority queue, only virt-controller is allowed to set priority field",
        "spec.migrationPriority",
      ),
    ]);
  }
  const ns = m.metadata?.namespace ?? "";
  if (!ctx.vmi) return denialFromError(`the VMI "${ns}/${m.spec.vmiName}" does not exist`);
  if (isFinalPhase(ctx.vmi.status?.phase)) return denialFromError("Cannot migrate VMI in finalized state.");
  const migratable = ctx.vmi.status?.conditions?.find((c) => c.type === VMI_CONDITION.LiveMigratable);
  if (migratable?.status === "False") {
    return denialFromError(
      `Cannot migrate VMI, Reason: ${migratable.reason ?? ""}, Message: ${migratable.message ?? ""}`,
    );
  }
  const inFlight = ctx.migrationsOfVmi.find(
    (o) => o.metadata?.uid !== m.metadata?.uid && !isFinalPhase(o.status?.phase),
  );
  if (inFlight) {
    return denialFromError(
      `in-flight migration detected. Active migration job (${inFlight.metadata?.uid ?? ""}) is currently already in progress for VMI ${inFlight.spec?.vmiName ?? ""}.`,
    );
  }
  return decentralizedRefusal(m, ctx.developerConfiguration);
}

/**
 * `spec.sendTo` / `spec.receive` (a cross-cluster, decentralized migration): KubeVirt's gate and migrationID checks,
 * then refused as a feature this platform does not provide (its migrations stay inside one cluster), rather than
 * run as an ordinary migration that ignores them.
 */
function decentralizedRefusal(
  m: VirtualMachineInstanceMigration,
  dev: DeveloperConfiguration | undefined,
): AdmissionDenial | undefined {
  const { sendTo, receive } = m.spec ?? {};
  if (!sendTo && !receive) return undefined;
  if (!featureGateEnabled(GATE.decentralizedLiveMigration, dev)) {
    const message = "DecentralizedLiveMigration feature gate is not enabled in kubevirt resource";
    return denialFromCauses([{ type: CAUSE_TYPE.notSupported, message, field: "" }]);
  }
  if (sendTo && receive && sendTo.migrationID !== receive.migrationID) {
    const message = `sendTo migrationID ${sendTo.migrationID} does not match receive migrationID ${receive.migrationID}`;
    return denialFromCauses([{ type: CAUSE_TYPE.invalid, message, field: "" }]);
  }
  const f = sendTo ? "spec.sendTo" : "spec.receive";
  return denialFromCauses([
    cause(CAUSE_TYPE.notSupported, `${f} is not supported: this platform has no cross-cluster live migration`, f),
  ]);
}

/** The reason a migration update is refused: the spec is immutable and the selector label stays while in flight. */
export function admitMigrationUpdate(
  m: VirtualMachineInstanceMigration,
  old: VirtualMachineInstanceMigration,
): AdmissionDenial | undefined {
  if (!isDeepStrictEqual(m.spec, old.spec)) {
    return denialFromCauses([
      cause(CAUSE_TYPE.notSupported, "update of Migration object's spec is restricted", "spec"),
    ]);
  }
  if (!isFinalPhase(old.status?.phase)) {
    const before = old.metadata?.labels?.[LABEL.migrationSelector];
    const after = m.metadata?.labels?.[LABEL.migrationSelector];
    if (before !== undefined && after === undefined) {
      return denialFromCauses([
        cause(CAUSE_TYPE.invalid, "selector label can't be removed from an in-flight migration", "metadata.labels"),
      ]);
    }
    if (before !== undefined && after !== before) {
      return denialFromCauses([
        cause(CAUSE_TYPE.invalid, "selector label can't be modified on an in-flight migration", "metadata.labels"),
      ]);
    }
  }
  return undefined;
}

/** The largest switchover downtime QEMU accepts, in milliseconds. */
export const MAX_DOWNTIME_MS_LIMIT = 2_000_000;

/**
 * A MigrationPolicy (KubeVirt `migrationpolicy-admitter.go`): completionTimeoutPerGiB and bandwidthPerMigration not
 * negative, bandwidth a valid quantity, maxDowntimeMs within 1..2000000. KubeVirt only lets maxDowntimeMs change
 * behind its stall-detection/downtime-tuning gates; downtime control is ours by design, so it is always allowed here.
 */
export function validateMigrationPolicy(policy: MigrationPolicy): ValidationCause[] {
  const typeCauses = typeErrors("MigrationPolicy", policy);
  if (typeCauses.length > 0) return typeCauses;
  const causes: ValidationCause[] = [];
  const spec = policy.spec;
  if (!spec || typeof spec !== "object") return [cause(CAUSE_TYPE.required, "spec is a required field", "spec")];
  if (!spec.selectors) causes.push(cause(CAUSE_TYPE.required, "spec.selectors is a required field", "spec.selectors"));
  if (spec.completionTimeoutPerGiB !== undefined && spec.completionTimeoutPerGiB < 0) {
    causes.push(cause(CAUSE_TYPE.invalid, "must not be negative", "spec.completionTimeoutPerGiB"));
  }
  if (spec.maxDowntimeMs !== undefined && (spec.maxDowntimeMs < 1 || spec.maxDowntimeMs > MAX_DOWNTIME_MS_LIMIT)) {
    causes.push(cause(CAUSE_TYPE.invalid, `must be between 1 and ${MAX_DOWNTIME_MS_LIMIT}`, "spec.maxDowntimeMs"));
  }
  if (spec.bandwidthPerMigration !== undefined) {
    const f = new FieldPath("spec.bandwidthPerMigration");
    const q = readQuantity(spec.bandwidthPerMigration, f, causes);
    if (q && q.unscaled < 0n) causes.push(cause(CAUSE_TYPE.invalid, "must not be negative", String(f)));
  }
  return causes;
}
