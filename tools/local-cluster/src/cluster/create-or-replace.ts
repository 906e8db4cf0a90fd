/**
 * What `kubectl apply` amounts to for the objects the local cluster installs and owns whole (CRDs, RBAC, webhook
 * registrations): create the object, or, when one of that name exists, replace it at its current resourceVersion.
 */
import {
  isAlreadyExists,
  type KubeObject,
  type ResourceClient,
  ResourceDiscovery,
  type RestTransport,
  resourceClient,
} from "@kvt/kube";

/** Options for {@link createOrReplace}. */
export interface CreateOrReplaceOptions {
  /** Replace an existing object; false leaves it as it is (an admin's edits, a ServiceAccount's token secrets). */
  readonly replace?: boolean;
}

/** Creates `obj` through `client`, or replaces the existing object of its name (unless `replace` is false). */
export async function createOrReplace<T extends KubeObject>(
  client: ResourceClient<T>,
  obj: T,
  options: CreateOrReplaceOptions = {},
): Promise<void> {
  try {
    await client.create(obj);
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
    if (options.replace === false) return;
    const meta = obj.metadata ?? {};
    const current = await client.get(meta.namespace ?? "", meta.name ?? "");
    await client.update({ ...obj, metadata: { ...meta, resourceVersion: current.metadata?.resourceVersion } });
  }
}

/**
 * {@link createOrReplace} for objects of any kind: each one's resource is looked up by its apiVersion and kind in
 * the API server's discovery documents (kubectl's mapping), in order.
 */
export async function createOrReplaceAll(
  transport: RestTransport,
  objects: readonly KubeObject[],
  options: (obj: KubeObject) => CreateOrReplaceOptions = () => ({}),
): Promise<void> {
  const discovery = new ResourceDiscovery(transport);
  for (const obj of objects) {
    const type = await discovery.resourceType(obj.apiVersion ?? "", obj.kind ?? "");
    await createOrReplace(resourceClient(transport, type), obj, options(obj));
  }
}
