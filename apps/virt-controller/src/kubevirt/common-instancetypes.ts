/**
 * The common-instancetypes deployment: virt-operator's duty (KubeVirt 1.4+, `spec.configuration.
 * commonInstancetypesDeployment.enabled`, on unless set to false) of keeping KubeVirt's common-instancetypes bundle
 * (libs/api common-instancetypes.ts: 65 VirtualMachineClusterInstancetypes, 54 VirtualMachineClusterPreferences) in
 * the cluster, done here by the virt-controller leader as deploy/ installs no operator. So a cluster gets the bundle
 * from the release itself, the local cluster and a real one alike.
 *
 * ```
 *   KubeVirt CR ─┐  cluster instancetypes/preferences (informers: an edit or a delete wakes it)
 *                v  v
 *   planCommonInstancetypes (pure): enabled  -> create the missing, restore the edited (managed ones)
 *                                   disabled -> delete the managed ones
 *                v
 *   create / update / delete, eight at a time; a failure (virt-api's webhooks not serving yet) retries
 * ```
 * Objects carry virt-operator's `app.kubernetes.io/managed-by: virt-operator`. An object of a bundled name is adopted
 * when it carries the bundle's own common-instancetypes-version label (a release of the bundle put it there, e.g.
 * `kubectl apply` of common-instancetypes, or an older local cluster); any other object of that name is the admin's
 * and is left alone. Deleting on disable touches only managed objects.
 */
import { isDeepStrictEqual } from "node:util";
import type { BundledObject, KubeVirt } from "@kvt/api";
import {
  type KubeObject,
  type ReconcileContext,
  type Reconciler,
  type ResourceClient,
  type Result,
  requeueAfter,
} from "@kvt/kube";

/** virt-operator's label on what it deploys. */
export const MANAGED_BY = { key: "app.kubernetes.io/managed-by", value: "virt-operator" } as const;
/** The bundle's own label: an object with it came from a common-instancetypes release. */
const BUNDLE_VERSION_LABEL = "instancetype.kubevirt.io/common-instancetypes-version";

type BundledKind = BundledObject["kind"];

/** The two kinds the bundle holds, each read from its own informer. */
export const BUNDLED_KINDS: readonly BundledKind[] = [
  "VirtualMachineClusterInstancetype",
  "VirtualMachineClusterPreference",
];

/** A cluster instancetype or preference as stored (the fields compared here). */
export interface ClusterObjectView extends KubeObject {
  readonly kind?: string;
  readonly spec?: unknown;
}

/** What to write: objects to create or replace (with the stored resourceVersion), and managed ones to delete. */
export interface CommonInstancetypesPlan {
  readonly create: readonly BundledObject[];
  readonly update: readonly BundledObject[];
  readonly delete: readonly { readonly kind: BundledKind; readonly name: string }[];
}

/** Whether `kv` asks for the bundle: on unless `commonInstancetypesDeployment.enabled` is false (KubeVirt's default). */
export function deploymentEnabled(kv: KubeVirt | undefined): boolean {
  const cfg = kv?.spec.configuration;
  return cfg?.commonInstancetypesDeployment?.enabled !== false;
}

/** The bundled object as deployed: the bundle's labels plus virt-operator's. */
export function deployed(obj: BundledObject): BundledObject {
  const copy = structuredClone(obj);
  copy.metadata.labels = { ...copy.metadata.labels, [MANAGED_BY.key]: MANAGED_BY.value };
  return copy;
}

function isManaged(o: KubeObject): boolean {
  return o.metadata?.labels?.[MANAGED_BY.key] === MANAGED_BY.value;
}

/** Whether stored object `have` already is bundled object `want` (its spec, labels and annotations; extras allowed). */
function matches(have: ClusterObjectView, want: BundledObject): boolean {
  const subset = (w: Record<string, string> | undefined, h: Record<string, string> | undefined): boolean =>
    Object.entries(w ?? {}).every(([k, v]) => h?.[k] === v);
  return (
    isDeepStrictEqual(have.spec, want.spec) &&
    subset(want.metadata.labels, have.metadata?.labels) &&
    subset(want.metadata.annotations, have.metadata?.annotations)
  );
}

/**
 * The writes that bring `existing` (both kinds, as stored) in line with `bundle`. `inSync(kind, o)` says an
 * object is as this controller last wrote it (its generation unchanged since), so a server that stores a spec a
 * little differently from the one sent is not rewritten forever.
 */
export function planCommonInstancetypes(
  bundle: readonly BundledObject[],
  existing: ReadonlyMap<BundledKind, readonly ClusterObjectView[]>,
  enabled: boolean,
  inSync: (kind: BundledKind, o: ClusterObjectView) => boolean = () => false,
): CommonInstancetypesPlan {
  const byKey = new Map(
    [...existing].flatMap(([kind, objects]) => objects.map((o) => [`${kind}/${o.metadata?.name}`, o] as const)),
  );
  const stored = (kind: BundledKind, name: string): ClusterObjectView | undefined => byKey.get(`${kind}/${name}`);
  const create: BundledObject[] = [];
  const update: BundledObject[] = [];
  const remove: { kind: BundledKind; name: string }[] = [];
  for (const obj of bundle) {
    const have = stored(obj.kind, obj.metadata.name);
    if (!enabled) {
      if (have && isManaged(have)) remove.push({ kind: obj.kind, name: obj.metadata.name });
      continue;
    }
    const want = deployed(obj);
    if (!have) {
      create.push(want);
      continue;
    }
    const ours = isManaged(have) || have.metadata?.labels?.[BUNDLE_VERSION_LABEL] !== undefined;
    if (!ours || inSync(obj.kind, have) || matches(have, want)) continue;
    // Replace: the bundle's object (a fresh copy), keeping what the server and others added to its metadata.
    const replacement = want as BundledObject & { metadata: KubeObject["metadata"] };
    replacement.metadata = {
      ...have.metadata,
      name: obj.metadata.name,
      labels: { ...have.metadata?.labels, ...want.metadata.labels },
      annotations: { ...have.metadata?.annotations, ...want.metadata.annotations },
    };
    update.push(replacement);
  }
  return { create, update, delete: remove };
}

/** What the controller reads and writes. */
export interface CommonInstancetypesDeps {
  /** The KubeVirt CR in force (informer cache). */
  readonly kubevirt: () => KubeVirt | undefined;
  /** The bundle to deploy. */
  readonly bundle: () => readonly BundledObject[];
  /** Stored objects of a kind (informer cache) and its client. */
  readonly stored: (kind: BundledKind) => readonly ClusterObjectView[];
  readonly client: (kind: BundledKind) => ResourceClient<KubeObject>;
}

/** Retry a failed round this soon (virt-api's webhooks validate every create: they may not serve yet). */
const RETRY_MS = 2_000;
/** Writes in flight at once (each create is a webhook round trip). */
const PARALLEL = 8;

/** Keeps the common-instancetypes bundle deployed (one key: the KubeVirt CR). */
export class CommonInstancetypesController implements Reconciler {
  readonly #d: CommonInstancetypesDeps;
  /** kind/name -> the generation this controller last wrote. */
  readonly #written = new Map<string, number>();

  constructor(deps: CommonInstancetypesDeps) {
    this.#d = deps;
  }

  async reconcile(_key: unknown, ctx: ReconcileContext): Promise<Result> {
    const kv = this.#d.kubevirt();
    if (!kv) return {}; // woken again when the CR appears
    const existing = new Map(BUNDLED_KINDS.map((k) => [k, this.#d.stored(k)] as const));
    const inSync = (kind: BundledKind, o: ClusterObjectView): boolean =>
      o.metadata?.generation !== undefined && this.#written.get(`${kind}/${o.metadata.name}`) === o.metadata.generation;
    const plan = planCommonInstancetypes(this.#d.bundle(), existing, deploymentEnabled(kv), inSync);
    const writes: (() => Promise<void>)[] = [
      ...plan.create.map((o) => async () => this.#remember(o.kind, await this.#d.client(o.kind).create(o))),
      ...plan.update.map((o) => async () => this.#remember(o.kind, await this.#d.client(o.kind).update(o))),
      ...plan.delete.map((d) => async () => {
        await this.#d.client(d.kind).delete("", d.name);
        this.#written.delete(`${d.kind}/${d.name}`);
      }),
    ];
    if (writes.length === 0) return {};
    let failed: unknown;
    for (let i = 0; i < writes.length; i += PARALLEL) {
      const results = await Promise.allSettled(writes.slice(i, i + PARALLEL).map((w) => w()));
      failed ??= results.find((r) => r.status === "rejected")?.reason;
    }
    const counts = { created: plan.create.length, updated: plan.update.length, deleted: plan.delete.length };
    if (failed !== undefined) {
      ctx.logger.warn(
        { ...counts, err: failed },
        `common-instancetypes: some writes failed (${(failed as Error).message}); retrying in ${RETRY_MS / 1000} s`,
      );
      return requeueAfter(RETRY_MS);
    }
    ctx.logger.info(counts, "common-instancetypes deployment reconciled");
    return {};
  }

  #remember(kind: BundledKind, o: KubeObject): void {
    if (o.metadata?.name && o.metadata.generation !== undefined)
      this.#written.set(`${kind}/${o.metadata.name}`, o.metadata.generation);
  }
}
