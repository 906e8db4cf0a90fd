/**
 * kube-apiserver's OwnerReferencesPermissionEnforcement admission plugin (plugin/pkg/admission/gc), which OpenShift
 * and hardened clusters enable with `--enable-admission-plugins`. The local cluster always runs it, so the
 * `<owner>/finalizers` rules KubeVirt's controllers carry are needed here as they are there:
 *
 *   CREATE or UPDATE that changes metadata.ownerReferences (pods/status excepted: its strategy keeps them)
 *     -> UPDATE only: may the user `delete` the object?                 no -> 403 "cannot set an ownerRef on a
 *                                                                              resource you can't delete: ..."
 *     -> each reference that newly has blockOwnerDeletion=true: may the user `update` <owner resource>/finalizers
 *        of the owner (by name; in the object's namespace when the owner is namespaced)?
 *                                                                        no -> 403 "cannot set blockOwnerDeletion if
 *                                                  an ownerReference refers to a resource you can't set finalizers on"
 *        an owner kind the server does not serve                           -> 403 "... cannot find RESTMapping ..."
 *
 * Its checks are authorization decisions of their own: they go to the authorization audit as `source: "admission"`.
 */
import { recordingAuthorizer } from "../auth/authorization-audit.ts";
import type { Attributes, Authorizer } from "../auth/rbac.ts";
import { forbidden } from "../errors.ts";
import type { ResourceRegistry } from "../resources/registry.ts";
import { jsonEqual, type KubeObject, type OwnerReference } from "../types.ts";
import type { AdmissionAttributes, ValidatingAdmission } from "./types.ts";

function ownerRefs(obj: KubeObject | null): OwnerReference[] {
  const refs = obj?.metadata?.ownerReferences;
  return Array.isArray(refs) ? refs : [];
}

/** gc_admission.go isChangingOwnerReference: any reference added, removed or changed. */
function changesOwnerReferences(obj: KubeObject | null, old: KubeObject | null): boolean {
  const now = ownerRefs(obj);
  if (old === null) return now.length > 0;
  const before = ownerRefs(old);
  return now.length !== before.length || now.some((r, i) => !jsonEqual(r, before[i]));
}

/** References that block their owner's deletion now and did not before (new, or blockOwnerDeletion turned on). */
function newBlockingRefs(obj: KubeObject | null, old: KubeObject | null): OwnerReference[] {
  const before = new Map(ownerRefs(old).map((r) => [r.uid, r]));
  return ownerRefs(obj).filter((r) => r.blockOwnerDeletion === true && before.get(r.uid)?.blockOwnerDeletion !== true);
}

/** Go's `%v, %v` of the authorizer's reason and its (nil) error, as the plugin's messages end. */
function because(reason: string): string {
  return `${reason}, <nil>`;
}

/** The OwnerReferencesPermissionEnforcement plugin, asking `authorizer` about owners that `registry` serves. */
export function ownerReferencesAdmission(
  registry: Pick<ResourceRegistry, "byKind">,
  authorizer: Authorizer,
): ValidatingAdmission {
  const decide = (attrs: Attributes) => recordingAuthorizer(authorizer, { source: "admission" }).authorize(attrs);
  const check = (a: AdmissionAttributes): void => {
    if (a.operation !== "CREATE" && a.operation !== "UPDATE") return;
    if (a.group === "" && a.resource === "pods" && a.subResource === "status") return;
    if (!changesOwnerReferences(a.object, a.oldObject)) return;
    const qr = { group: a.group, resource: a.resource };
    const user = { username: a.userInfo.username, groups: [...a.userInfo.groups] };
    const namespace = a.namespace || undefined;
    if (a.operation === "UPDATE") {
      const d = decide({
        user,
        verb: "delete",
        resourceRequest: true,
        apiGroup: a.group,
        apiVersion: a.version,
        resource: a.resource,
        subresource: a.subResource || undefined,
        namespace,
        name: a.name,
      });
      if (!d.allowed)
        throw forbidden(qr, a.name, `cannot set an ownerRef on a resource you can't delete: ${because(d.reason)}`);
    }
    for (const ref of newBlockingRefs(a.object, a.oldObject)) {
      const owner = registry.byKind(ref.apiVersion, ref.kind);
      if (!owner)
        throw forbidden(
          qr,
          a.name,
          `cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion ${ref.apiVersion} Kind ${ref.kind}: no matches for kind "${ref.kind}" in version "${ref.apiVersion}"`,
        );
      const d = decide({
        user,
        verb: "update",
        resourceRequest: true,
        apiGroup: owner.group,
        apiVersion: ref.apiVersion.includes("/") ? ref.apiVersion.split("/")[1] : ref.apiVersion,
        resource: owner.resource,
        subresource: "finalizers",
        namespace: owner.namespaced ? namespace : undefined,
        name: ref.name,
      });
      if (!d.allowed)
        throw forbidden(
          qr,
          a.name,
          `cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: ${because(d.reason)}`,
        );
    }
  };
  return {
    name: "OwnerReferencesPermissionEnforcement",
    // A denial is a rejected promise, as the admission chain expects.
    validate: (a: AdmissionAttributes): Promise<void> => Promise.resolve().then(() => check(a)),
  };
}
