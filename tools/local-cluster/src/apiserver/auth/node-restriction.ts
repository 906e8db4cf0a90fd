/**
 * kube-apiserver's NodeRestriction admission plugin, for the writes RBAC cannot narrow by node: a kubelet
 * (`system:node:<node>` in `system:nodes`) may create, change or delete only its own Node object, and change the
 * status of or delete only pods bound to its node. Denials are kube-apiserver's 403s:
 *
 *   nodes "node02" is forbidden: node "node01" is not allowed to modify node "node02"
 *   pods "p" is forbidden: node "node01" can only update pod status for pods with spec.nodeName set to itself
 */
import type { AdmissionAttributes, ValidatingAdmission } from "../admission/types.ts";
import { forbidden } from "../errors.ts";
import { isObject, type KubeObject } from "../types.ts";
import { nodeOf } from "./node-authorizer.ts";

function boundTo(pod: KubeObject | null): unknown {
  return isObject(pod?.spec) ? pod.spec.nodeName : undefined;
}

/** The NodeRestriction plugin. */
export function nodeRestrictionAdmission(): ValidatingAdmission {
  return {
    name: "NodeRestriction",
    validate: (a: AdmissionAttributes): Promise<void> => {
      const node = nodeOf(a.userInfo);
      if (node === undefined || a.group !== "") return Promise.resolve();
      const qr = { group: "", resource: a.resource };
      if (a.resource === "nodes" && a.name !== node)
        throw forbidden(qr, a.name, `node "${node}" is not allowed to modify node "${a.name}"`);
      if (a.resource !== "pods") return Promise.resolve();
      const pod = a.oldObject ?? a.object;
      if (a.operation === "DELETE" && boundTo(pod) !== node)
        throw forbidden(qr, a.name, `node "${node}" can only delete pods with spec.nodeName set to itself`);
      if (a.operation === "UPDATE" && a.subResource === "status" && boundTo(pod) !== node)
        throw forbidden(
          qr,
          a.name,
          `node "${node}" can only update pod status for pods with spec.nodeName set to itself`,
        );
      return Promise.resolve();
    },
  };
}
