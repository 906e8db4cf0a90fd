/**
 * The KubeVirt components' ServiceAccounts, roles and bindings in the local cluster are the release's: the files
 * tools/release generates in deploy/ (one definition; the release's staleness test keeps them equal to the code),
 * applied as `kubectl apply` would (create, or replace what is there), plus the users' roles it ships.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type KubeConfig, type KubernetesObject, KubernetesObjectApi } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";

/** The deploy/ files with RBAC objects, in apply order. */
export const RELEASE_RBAC_FILES: readonly string[] = [
  "deploy/virt-api/rbac.yaml",
  "deploy/virt-controller/rbac.yaml",
  "deploy/virt-handler/rbac.yaml",
  "deploy/user-roles.yaml",
];

/** Every object of the release's RBAC files under `projectRoot`. */
export function releaseRbacObjects(projectRoot: string): KubernetesObject[] {
  return RELEASE_RBAC_FILES.flatMap((f) =>
    parseAllDocuments(readFileSync(join(projectRoot, f), "utf8"))
      .map((d) => d.toJS() as KubernetesObject | null)
      .filter((o): o is KubernetesObject => o !== null && typeof o === "object" && typeof o.kind === "string"),
  );
}

/** Creates or replaces each of the release's RBAC objects (the namespace `kubevirt` must exist). */
export async function applyReleaseRbac(kubeConfig: KubeConfig, projectRoot: string): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kubeConfig);
  for (const obj of releaseRbacObjects(projectRoot)) {
    try {
      await api.create(obj);
    } catch (err) {
      if ((err as { code?: number }).code !== 409) throw err;
      if (obj.kind === "ServiceAccount") continue; // nothing to converge, and its token secrets stay
      const have = await api.read({
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        metadata: { name: obj.metadata?.name ?? "", namespace: obj.metadata?.namespace },
      });
      await api.replace({ ...obj, metadata: { ...obj.metadata, resourceVersion: have.metadata?.resourceVersion } });
    }
  }
}
