/**
 * The KubeVirt components' ServiceAccounts, roles and bindings in the local cluster are the release's: the files
 * tools/release generates in deploy/ (one definition; the release's staleness test keeps them equal to the code),
 * applied as `kubectl apply` would (create, or replace what is there), plus the users' roles it ships.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { KubeObject, RestTransport } from "@kvt/kube";
import { parseAllDocuments } from "yaml";
import { createOrReplaceAll } from "./create-or-replace.ts";

/** The deploy/ files with RBAC objects, in apply order. */
export const RELEASE_RBAC_FILES: readonly string[] = [
  "deploy/virt-api/rbac.yaml",
  "deploy/virt-controller/rbac.yaml",
  "deploy/virt-handler/rbac.yaml",
  "deploy/user-roles.yaml",
];

/** Every object of the release's RBAC files under `projectRoot`. */
export function releaseRbacObjects(projectRoot: string): KubeObject[] {
  return RELEASE_RBAC_FILES.flatMap((f) =>
    parseAllDocuments(readFileSync(join(projectRoot, f), "utf8"))
      .map((d) => d.toJS() as KubeObject | null)
      .filter((o): o is KubeObject => o !== null && typeof o === "object" && typeof o.kind === "string"),
  );
}

/** Creates or replaces each of the release's RBAC objects (the namespace `kubevirt` must exist). */
export async function applyReleaseRbac(transport: RestTransport, projectRoot: string): Promise<void> {
  // A ServiceAccount has nothing to converge, and its token secrets stay.
  await createOrReplaceAll(transport, releaseRbacObjects(projectRoot), (obj) => ({
    replace: obj.kind !== "ServiceAccount",
  }));
}
