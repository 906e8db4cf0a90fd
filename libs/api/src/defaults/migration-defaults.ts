/** What the migration mutating webhook applies on CREATE (KubeVirt `migration-create-mutator.go`). */
import { FINALIZER, LABEL } from "../constants.ts";
import type { VirtualMachineInstanceMigration } from "../types.ts";

/** Adds the `kubevirt.io/vmi-name` selector label and the migration finalizer; returns a copy. */
export function defaultMigration(input: VirtualMachineInstanceMigration): VirtualMachineInstanceMigration {
  const m = structuredClone(input);
  const meta = m.metadata ?? {};
  m.metadata = meta;
  meta.labels = { ...meta.labels, [LABEL.migrationSelector]: m.spec?.vmiName ?? "" };
  // KubeVirt appends unconditionally; we keep the list free of duplicates so re-admission is idempotent.
  if (!meta.finalizers?.includes(FINALIZER.migration))
    meta.finalizers = [...(meta.finalizers ?? []), FINALIZER.migration];
  return m;
}
