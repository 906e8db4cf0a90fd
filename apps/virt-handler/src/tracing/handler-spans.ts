/**
 * virt-handler's spans inside a VMI reconcile: one child span per launcher command, named by what it does
 * (`prepare migration target`, `start migration`, ...), and the reconcile span's migration attributes, including
 * the step of the migration it served (`monitor` while the source sends, `finalize` once the launcher reported
 * the result and the status records it).
 */

import type { VirtualMachineInstance } from "@kvt/api";
import type { DomainInfo } from "@kvt/launcher-rpc";
import { type Span, SpanStatusCode, trace } from "@opentelemetry/api";

const tracer = trace.getTracer("virt-handler");

const STEP_NAMES: Readonly<Record<string, string>> = {
  sync: "sync VirtualMachineInstance",
  shutdown: "shutdown VirtualMachineInstance",
  kill: "kill VirtualMachineInstance",
  "prepare-target": "prepare migration target",
  migrate: "start migration",
  "cancel-migration": "cancel migration",
};

/** Runs one launcher command as a child span of the active (reconcile) span. */
export async function commandSpan<T>(kind: string, vmi: VirtualMachineInstance, run: () => Promise<T>): Promise<T> {
  const migrationUid = vmi.status?.migrationState?.migrationUid;
  return await tracer.startActiveSpan(
    STEP_NAMES[kind] ?? `${kind} VirtualMachineInstance`,
    {
      attributes: {
        "k8s.namespace.name": vmi.metadata?.namespace ?? "",
        "kubevirt.vmi.name": vmi.metadata?.name ?? "",
        ...(migrationUid ? { "kubevirt.migration.uid": migrationUid } : {}),
      },
    },
    async (span) => {
      try {
        return await run();
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/** Tags a reconcile span with the VMI's migration and the step this handler's reconcile served. */
export function tagReconcile(
  span: Span,
  vmi: VirtualMachineInstance,
  info: DomainInfo | undefined,
  node: string,
): void {
  const state = vmi.status?.migrationState;
  if (!state?.migrationUid) return;
  const role = state.targetNode === node && vmi.status?.nodeName !== node ? "target" : "source";
  const m = info?.migration?.migrationUid === state.migrationUid ? info.migration : undefined;
  let step = "observe";
  if (m?.phase === "Running") step = "monitor";
  else if (m?.phase === "Succeeded" || m?.phase === "Failed") step = "finalize";
  else if (m?.phase === "Preparing" || m?.phase === "Ready") step = "prepare target";
  span.setAttributes({
    "kubevirt.migration.uid": state.migrationUid,
    "kubevirt.migration.role": role,
    "kubevirt.migration.step": step,
    "k8s.node.name": node,
  });
}
