/**
 * What the cluster says about one VMI, as a user would gather it with kubectl, for a failed test's output: CI keeps
 * only its log, and the cluster's data dir goes with the run.
 *
 *   kubectl get vmi,vmim,pods -o wide        the objects and where they run
 *   the VMI's migrationState and conditions  how far a move got
 *   kubectl get events (involvedObject)      what the controllers said
 *   kubectl logs <launcher> --tail N         each launcher pod's last lines (compute container)
 */
import { onTestFailed } from "vitest";
import { kubectl } from "./cli.ts";
import { launcherPods } from "./objects.ts";

/** The report for VMI `name` (uid `uid`: its launcher pods); never throws, each part says why it is missing. */
export async function vmiDiagnostics(kubeconfig: string, name: string, uid: string, tail = 30): Promise<string> {
  const part = async (title: string, args: readonly string[]): Promise<string> => {
    const r = await kubectl(kubeconfig, args).catch((e: unknown) => ({ code: 1, stdout: "", stderr: String(e) }));
    return `--- ${title} (kubectl ${args.join(" ")})\n${(r.code === 0 ? r.stdout : r.stderr).trimEnd()}`;
  };
  const parts = [
    await part("objects", ["get", "vmi,vmim,pods", "-o", "wide"]),
    await part("the VMI's migration state and conditions", [
      ...["get", "vmi", name, "-o"],
      "jsonpath={.status.migrationState}{'\\n'}{.status.conditions}",
    ]),
    await part("events", ["get", "events", "--field-selector", `involvedObject.name=${name}`]),
  ];
  const pods = await launcherPods(kubeconfig, uid).catch(() => []);
  for (const p of pods)
    parts.push(await part(`launcher ${p.metadata.name}`, ["logs", p.metadata.name, "--tail", `${tail}`]));
  return parts.join("\n");
}

/** In a test: when it fails, print {@link vmiDiagnostics} of VMI `name` (its uid read then from `uid()`). */
export function diagnoseOnFailure(kubeconfig: string, name: string, uid: () => string): void {
  onTestFailed(async () => {
    process.stdout.write(`\n=== diagnostics of VMI ${name} ===\n${await vmiDiagnostics(kubeconfig, name, uid())}\n`);
  });
}
