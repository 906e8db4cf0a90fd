/**
 * The VM controller's instancetype step (KubeVirt `pkg/instancetype/controller/vm`, reference policy "reference"):
 *
 *   sync(vm)       the referenced instancetype/preference must exist (else a SyncError with reason
 *                  FailedFindInstancetype / FailedFindPreference and the API server's not-found message); on first
 *                  sight each is copied into a ControllerRevision owned by the VM and the VM status records it in
 *                  status.instancetypeRef / preferenceRef.controllerRevisionRef; later syncs read that revision.
 *   expand(...)    applies the pinned specs to the VMI the VM creates, with the kubevirt.io/(cluster-)instancetype-name
 *                  and (cluster-)preference-name annotations.
 */
import { isDeepStrictEqual } from "node:util";
import {
  applyInstancetypeToVmi,
  type ControllerRevision,
  controllerRevisionFor,
  INSTANCETYPE_ANNOTATION,
  INSTANCETYPE_SYNC_REASON,
  type InstancetypeObject,
  type InstancetypeSpec,
  type InstancetypeStatusRef,
  instancetypeResourceType,
  keyOf,
  type PreferenceSpec,
  type ResolvedMatcher,
  resolveMatcher,
  splitKey,
  type VirtualMachine,
  type VirtualMachineInstance,
} from "@kvt/api";
import {
  diffMembers,
  isAlreadyExists,
  type KubeObject,
  type ResourceClient,
  type ResourceType,
  SyncError,
} from "@kvt/kube";

/** apps/v1 ControllerRevision. */
export const CONTROLLER_REVISIONS: ResourceType = {
  group: "apps",
  version: "v1",
  plural: "controllerrevisions",
  kind: "ControllerRevision",
  namespaced: true,
};

/** The ResourceType of the kind a matcher resolved to. */
export function instancetypeResource(m: ResolvedMatcher): ResourceType {
  return instancetypeResourceType(m.kind);
}

/** What the step needs: a client per resource type (get, create) and the VM status patch. */
export interface InstancetypeSyncDeps {
  readonly clientFor: (type: ResourceType) => Pick<ResourceClient<KubeObject>, "get" | "create">;
  readonly vmClient: Pick<ResourceClient<VirtualMachine>, "patch">;
}

/** The specs a VM is pinned to, after {@link InstancetypeSync.sync}. */
export interface PinnedSpecs {
  /** The VM as stored after the status refs were recorded (the cache's VM when nothing changed). */
  readonly vm: VirtualMachine;
  readonly instancetype?: InstancetypeSpec;
  readonly preference?: PreferenceSpec;
}

type Role = "instancetype" | "preference";
const REF_KEY = { instancetype: "instancetypeRef", preference: "preferenceRef" } as const;
const FIND_REASON = {
  instancetype: INSTANCETYPE_SYNC_REASON.failedFindInstancetype,
  preference: INSTANCETYPE_SYNC_REASON.failedFindPreference,
} as const;
const STORE_ERROR = "error encountered while storing instancetype.kubevirt.io controllerRevisions";

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Finds, pins and applies a VM's instancetype and preference. */
export class InstancetypeSync {
  readonly #d: InstancetypeSyncDeps;
  /**
   * Specs of ControllerRevisions read or written, by `namespace/name`. A revision's name carries its object's uid and
   * generation and a same-named revision with other data is refused, so a name always means the same spec: every
   * reconcile of a pinned VM after the first is served from here instead of a GET.
   */
  readonly #revisionSpecs = new Map<string, unknown>();
  constructor(deps: InstancetypeSyncDeps) {
    this.#d = deps;
  }

  /** Pins the VM's instancetype and preference (see the module comment). Throws SyncError with KubeVirt's reasons. */
  async sync(vm: VirtualMachine): Promise<PinnedSpecs> {
    const it = await this.#syncRole(vm, "instancetype");
    const pref = await this.#syncRole(vm, "preference");
    const status = { ...vm.status };
    if (it) status.instancetypeRef = it.ref;
    if (pref) status.preferenceRef = pref.ref;
    let stored = vm;
    const ops = diffMembers("/status", vm.status, status);
    if (ops.length > 0) {
      const { namespace, name } = splitKey(keyOf(vm));
      stored = await this.#d.vmClient.patch(namespace, name, ops, "status");
    }
    return {
      vm: stored,
      instancetype: it?.spec as InstancetypeSpec | undefined,
      preference: pref?.spec as PreferenceSpec | undefined,
    };
  }

  async #syncRole(vm: VirtualMachine, role: Role): Promise<{ ref: InstancetypeStatusRef; spec: unknown } | undefined> {
    const matcher = vm.spec[role];
    if (!matcher) return undefined;
    const namespace = vm.metadata?.namespace ?? "";
    const ref: InstancetypeStatusRef = structuredClone(vm.status?.[REF_KEY[role]] ?? {});
    let clear = false;
    for (const key of ["name", "kind", "inferFromVolume"] as const) {
      if (matcher[key] && matcher[key] !== ref[key]) {
        ref[key] = matcher[key];
        clear = true;
      }
    }
    if (clear) delete ref.controllerRevisionRef;
    if (matcher.revisionName) ref.controllerRevisionRef = { name: matcher.revisionName };
    const pinned = ref.controllerRevisionRef?.name;
    if (pinned) {
      const key = `${namespace}/${pinned}`;
      if (!this.#revisionSpecs.has(key)) {
        const cr = await this.#find(role, () => this.#d.clientFor(CONTROLLER_REVISIONS).get(namespace, pinned));
        this.#remember(key, (cr as unknown as ControllerRevision).data?.spec);
      }
      return { ref, spec: this.#revisionSpecs.get(key) };
    }
    const resolved = this.#resolve(role, vm);
    const obj = (await this.#find(role, () =>
      this.#d.clientFor(instancetypeResource(resolved)).get(resolved.namespaced ? namespace : "", resolved.name),
    )) as InstancetypeObject;
    if (role === "instancetype") this.#checkConflicts(vm, obj.spec as InstancetypeSpec);
    const revision = await this.#store(controllerRevisionFor(vm, resolved.kind, obj));
    ref.controllerRevisionRef = { name: revision.metadata.name };
    this.#remember(`${namespace}/${revision.metadata.name}`, revision.data?.spec ?? obj.spec);
    return { ref, spec: obj.spec };
  }

  /** Caches a revision's spec; the cache is bounded (dropped whole past 10000 revisions, then refilled by GETs). */
  #remember(key: string, spec: unknown): void {
    if (this.#revisionSpecs.size >= 10_000) this.#revisionSpecs.clear();
    this.#revisionSpecs.set(key, spec);
  }

  #resolve(role: Role, vm: VirtualMachine): ResolvedMatcher {
    try {
      return resolveMatcher(role, vm.spec[role] ?? {});
    } catch (error) {
      throw new SyncError(FIND_REASON[role], message(error), { cause: error });
    }
  }

  async #find(role: Role, get: () => Promise<KubeObject>): Promise<KubeObject> {
    try {
      return await get();
    } catch (error) {
      throw new SyncError(FIND_REASON[role], message(error), { cause: error });
    }
  }

  /** KubeVirt refuses to pin an instancetype the VM's template conflicts with (`checkForInstancetypeConflicts`). */
  #checkConflicts(vm: VirtualMachine, spec: InstancetypeSpec): void {
    const template = structuredClone(vm.spec.template);
    const conflicts = applyInstancetypeToVmi(
      "spec.template.spec",
      spec,
      undefined,
      template.spec ?? { domain: { devices: {} } },
      template.metadata ?? {},
    );
    if (conflicts.length > 0) {
      const fields = conflicts.map((c) => c.field).join(", ");
      throw new SyncError(
        "FailedCreate",
        `${STORE_ERROR}: VM field(s) ${fields} conflicts with selected instance type`,
      );
    }
  }

  /** Creates the revision; one that exists already must hold the same data (KubeVirt `storeControllerRevision`). */
  async #store(revision: ControllerRevision): Promise<ControllerRevision> {
    const client = this.#d.clientFor(CONTROLLER_REVISIONS);
    try {
      return (await client.create(revision)) as unknown as ControllerRevision;
    } catch (error) {
      if (!isAlreadyExists(error)) {
        throw new SyncError("FailedCreate", `${STORE_ERROR}: failed to create ControllerRevision: ${message(error)}`, {
          cause: error,
        });
      }
    }
    const existing = (await client.get(
      revision.metadata.namespace ?? "",
      revision.metadata.name,
    )) as unknown as ControllerRevision;
    if (!isDeepStrictEqual(existing.data?.spec, revision.data?.spec)) {
      throw new SyncError(
        "FailedCreate",
        `${STORE_ERROR}: found existing ControllerRevision with unexpected data: ${revision.metadata.name}`,
      );
    }
    return existing;
  }

  /**
   * Applies the pinned specs to `vmi` (the VMI the VM is about to create) in place, with KubeVirt's annotations.
   * Throws SyncError "FailedCreate" when the VM's template conflicts (admission normally refuses such a VM first).
   */
  expand(vm: VirtualMachine, vmi: VirtualMachineInstance, pinned: PinnedSpecs): void {
    if (!pinned.instancetype && !pinned.preference) return;
    vmi.metadata ??= {};
    vmi.metadata.annotations ??= {};
    const annotations = vmi.metadata.annotations;
    const it = vm.spec.instancetype;
    if (it?.name) {
      const cluster = resolveMatcher("instancetype", it).kind === "VirtualMachineClusterInstancetype";
      annotations[cluster ? INSTANCETYPE_ANNOTATION.clusterInstancetype : INSTANCETYPE_ANNOTATION.instancetype] =
        it.name;
    }
    const pref = vm.spec.preference;
    if (pref?.name) {
      const cluster = resolveMatcher("preference", pref).kind === "VirtualMachineClusterPreference";
      annotations[cluster ? INSTANCETYPE_ANNOTATION.clusterPreference : INSTANCETYPE_ANNOTATION.preference] = pref.name;
    }
    vmi.spec ??= { domain: { devices: {} } };
    const conflicts = applyInstancetypeToVmi("spec", pinned.instancetype, pinned.preference, vmi.spec, vmi.metadata);
    if (conflicts.length > 0) {
      const fields = conflicts.map((c) => c.field).join(", ");
      throw new SyncError("FailedCreate", `VMI conflicts with instancetype spec in fields: [${fields}]`);
    }
  }
}
