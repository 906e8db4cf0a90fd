/**
 * kube-apiserver's Node authorizer, for the objects a kubelet reads on behalf of its pods: a kubelet (user
 * `system:node:<node>` in group `system:nodes`) may get a Secret, ConfigMap, PersistentVolumeClaim or ServiceAccount
 * (and request that account's token) only when a pod bound to its node references it, and a PersistentVolume only
 * when such a claim is bound to it; it may never list or watch those kinds. Everything else, and every other user,
 * goes to the next authorizer (RBAC), which must allow it too.
 *
 *   system:node:node01  get secrets/default/db-pass  -> some pod with spec.nodeName node01 in default mounts or
 *                                                         references db-pass?  no: 403 "no relationship found ..."
 */
import type { Store } from "../storage/store.ts";
import { isObject, type KubeObject } from "../types.ts";
import type { Attributes, Authorizer, AuthUser, Decision, PolicyRule } from "./rbac.ts";

const NODE_PREFIX = "system:node:";
const NODES_GROUP = "system:nodes";
const SCOPED = new Set(["secrets", "configmaps", "persistentvolumeclaims", "persistentvolumes", "serviceaccounts"]);

/** The node a kubelet's user is for, or undefined for anyone else. */
export function nodeOf(user: AuthUser): string | undefined {
  if (!user.groups.includes(NODES_GROUP) || !user.username.startsWith(NODE_PREFIX)) return undefined;
  const name = user.username.slice(NODE_PREFIX.length);
  return name === "" ? undefined : name;
}

type Refs = Record<"secrets" | "configmaps" | "persistentvolumeclaims" | "serviceaccounts", Set<string>>;

function objects(v: unknown): Record<string, unknown>[] {
  return Array.isArray(v) ? v.filter(isObject) : [];
}

function str(o: unknown, key: string): string | undefined {
  const v = isObject(o) ? o[key] : undefined;
  return typeof v === "string" && v !== "" ? v : undefined;
}

function addContainerRefs(refs: Refs, containers: unknown): void {
  for (const c of objects(containers)) {
    for (const e of objects(c.env)) {
      const from = e.valueFrom;
      const s = isObject(from) ? str(from.secretKeyRef, "name") : undefined;
      const m = isObject(from) ? str(from.configMapKeyRef, "name") : undefined;
      if (s) refs.secrets.add(s);
      if (m) refs.configmaps.add(m);
    }
    for (const e of objects(c.envFrom)) {
      const s = str(e.secretRef, "name");
      const m = str(e.configMapRef, "name");
      if (s) refs.secrets.add(s);
      if (m) refs.configmaps.add(m);
    }
  }
}

function addVolumeRefs(refs: Refs, podName: string, volumes: unknown): void {
  for (const v of objects(volumes)) {
    const s = str(v.secret, "secretName");
    const m = str(v.configMap, "name");
    const c = str(v.persistentVolumeClaim, "claimName");
    if (s) refs.secrets.add(s);
    if (m) refs.configmaps.add(m);
    if (c) refs.persistentvolumeclaims.add(c);
    if (isObject(v.ephemeral) && typeof v.name === "string") refs.persistentvolumeclaims.add(`${podName}-${v.name}`);
    const sources = isObject(v.projected) ? objects(v.projected.sources) : [];
    for (const src of sources) {
      const ps = str(src.secret, "name");
      const pm = str(src.configMap, "name");
      if (ps) refs.secrets.add(ps);
      if (pm) refs.configmaps.add(pm);
    }
  }
}

/** What the pod references by name, in its namespace. */
export function podReferences(pod: KubeObject): Refs {
  const refs: Refs = {
    secrets: new Set(),
    configmaps: new Set(),
    persistentvolumeclaims: new Set(),
    serviceaccounts: new Set(),
  };
  const spec = isObject(pod.spec) ? pod.spec : {};
  refs.serviceaccounts.add(str(spec, "serviceAccountName") ?? "default");
  for (const s of objects(spec.imagePullSecrets)) if (typeof s.name === "string") refs.secrets.add(s.name);
  for (const key of ["containers", "initContainers", "ephemeralContainers"]) addContainerRefs(refs, spec[key]);
  addVolumeRefs(refs, pod.metadata.name ?? "", spec.volumes);
  return refs;
}

/** The Node authorizer in front of `next`. */
export class NodeAuthorizer implements Authorizer {
  readonly #store: Store;
  readonly #next: Authorizer;

  constructor(store: Store, next: Authorizer) {
    this.#store = store;
    this.#next = next;
  }

  authorize(attrs: Attributes): Decision {
    const node = nodeOf(attrs.user);
    const resource = attrs.resource ?? "";
    if (node === undefined || !attrs.resourceRequest || attrs.apiGroup !== "" || !SCOPED.has(resource))
      return this.#next.authorize(attrs);
    const tokenRequest = resource === "serviceaccounts" && attrs.subresource === "token" && attrs.verb === "create";
    if (!tokenRequest && (attrs.verb !== "get" || attrs.subresource))
      return { allowed: false, reason: "can only get individual resources of this type" };
    if (!this.#related(node, resource, attrs.namespace ?? "", attrs.name ?? ""))
      return { allowed: false, reason: `no relationship found between node '${node}' and this object` };
    return this.#next.authorize(attrs);
  }

  rulesFor(user: AuthUser, namespace: string): PolicyRule[] {
    return this.#next.rulesFor(user, namespace);
  }

  #related(node: string, resource: string, namespace: string, name: string): boolean {
    if (name === "") return false;
    const pods = this.#store
      .list("core/pods", namespace === "" ? "" : `${namespace}/`)
      .filter((e) => isObject(e.obj.spec) && e.obj.spec.nodeName === node);
    if (resource !== "persistentvolumes")
      return pods.some((e) => podReferences(e.obj)[resource as keyof Refs].has(name));
    // A PersistentVolume: bound to a claim that a pod on the node uses.
    return pods.some((e) => {
      const ns = e.obj.metadata.namespace ?? "";
      for (const claim of podReferences(e.obj).persistentvolumeclaims) {
        const pvc = this.#store.get("core/persistentvolumeclaims", `${ns}/${claim}`)?.obj;
        if (isObject(pvc?.spec) && pvc.spec.volumeName === name) return true;
      }
      return false;
    });
  }
}
