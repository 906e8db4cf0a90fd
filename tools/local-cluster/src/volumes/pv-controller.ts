/**
 * The PersistentVolume controller of the local cluster's control plane (kube-controller-manager's
 * persistentvolume-binder plus the pvc-protection and pv-protection controllers), fed by the API server's committed
 * events and writing through its registry. Dynamic provisioning is delegated to a {@link Provisioner} by the
 * class's `provisioner` name (local-path-provisioner.ts).
 *
 *   claim with no class field, a default exists   -> gets the default class (RetroactiveDefaultStorageClass)
 *   claim unbound, class Immediate (or no class)  -> bind to a matching volume, else provision, else wait (event)
 *   claim unbound, class WaitForFirstConsumer     -> wait for the scheduler's volume.kubernetes.io/selected-node,
 *                                                    then the same with that node
 *   bind: PV claimRef -> PV phase Bound -> PVC spec.volumeName + bind-completed -> PVC status Bound/capacity/modes
 *   volume Pending/unbound                        -> Available
 *   claim of a bound volume gone                  -> Released -> Retain: kept | Delete: provisioner deletes it
 *   claim bound to another volume                 -> bound by us: Available again | else: reclaimed as above
 *   claim bound, volume gone                      -> Lost
 *   claim deleting, no scheduled running pod uses it -> drop kubernetes.io/pvc-protection
 *   volume deleting, not Bound                    -> drop kubernetes.io/pv-protection
 */

import type { Logger } from "pino";
import {
  defaultStorageClass,
  PV_PROTECTION_FINALIZER,
  PVC_PROTECTION_FINALIZER,
} from "../apiserver/admission/storage-admission.ts";
import { WorkLoop } from "../apiserver/controllers/queue.ts";
import type { ResourceDef } from "../apiserver/resources/types.ts";
import { type ResourceService, systemContext } from "../apiserver/rest/service.ts";
import type { StoreEvent } from "../apiserver/storage/store.ts";
import { jsonEqual, type KubeObject, nowTime } from "../apiserver/types.ts";
import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1StorageClass,
} from "../cluster/kube-models.ts";
import { EventRecorder } from "./events.ts";
import {
  ANN,
  classOf,
  findMatchingVolume,
  podClaimNames,
  preBoundTo,
  requestedVolumeMismatch,
} from "./volume-match.ts";

/** A dynamic provisioner the controller calls for classes naming it. */
export interface Provisioner {
  /** The StorageClass `provisioner` value it serves. */
  readonly name: string;
  /**
   * It provisions volumeMode Block (external-provisioner's BlockProvisioner.SupportsBlock); absent: false, and a
   * Block claim is refused before provisioning, with the library's message.
   */
  readonly supportsBlock?: boolean;
  /** Creates the volume for `claim` (a PV pre-bound to it); `node` is the selected node for delayed binding. */
  provision(claim: V1PersistentVolumeClaim, sc: V1StorageClass, node: V1Node | undefined): Promise<void>;
  /** Deletes a Released volume it provisioned (its storage, then the PV object). */
  delete(volume: V1PersistentVolume): Promise<void>;
}

const PVC = "core/persistentvolumeclaims";
const PV = "core/persistentvolumes";
const SC = "storage.k8s.io/storageclasses";
const ctx = systemContext("system:serviceaccount:kube-system:persistent-volume-binder");

type Obj = KubeObject & V1PersistentVolume & V1PersistentVolumeClaim;

/** The controller. */
export class PersistentVolumeController {
  readonly #svc: ResourceService;
  readonly #loop: WorkLoop;
  readonly #events: EventRecorder;
  /** Events a provisioner writes carry its own name, as an external provisioner's (`<name>_<identity>`). */
  readonly #provisionerEvents = new Map<string, EventRecorder>();
  readonly #provisioners: ReadonlyMap<string, Provisioner>;
  readonly #pvDef: ResourceDef;
  readonly #pvcDef: ResourceDef;

  constructor(svc: ResourceService, provisioners: readonly Provisioner[], logger: Logger) {
    this.#svc = svc;
    this.#provisioners = new Map(provisioners.map((p) => [p.name, p]));
    const log = logger.child({ controller: "persistentvolume" });
    this.#events = new EventRecorder(svc, "persistentvolume-controller", log);
    for (const p of provisioners)
      this.#provisionerEvents.set(
        p.name,
        new EventRecorder(svc, `${p.name}_${p.name.replace(/.*\//, "")}-provisioner`, log),
      );
    this.#pvDef = svc.registry.lookup("", "v1", "persistentvolumes")!;
    this.#pvcDef = svc.registry.lookup("", "v1", "persistentvolumeclaims")!;
    this.#loop = new WorkLoop((key) => this.#process(key), log, 500);
    for (const e of svc.store.list(PVC)) this.#loop.add(`pvc/${e.id}`);
    for (const e of svc.store.list(PV)) this.#loop.add(`pv/${e.id}`);
  }

  /** Feeds one committed event. */
  onEvent(ev: StoreEvent): void {
    if (ev.coll === PVC) {
      this.#loop.add(`pvc/${ev.id}`);
      const volumeName = (ev.obj as Obj).spec?.volumeName;
      if (volumeName) this.#loop.add(`pv/${volumeName}`);
      if (ev.type === "DELETED") for (const e of this.#svc.store.list(PV)) this.#loop.add(`pv/${e.id}`);
    } else if (ev.coll === PV) {
      this.#loop.add(`pv/${ev.id}`);
      const ref = (ev.obj as Obj).spec?.claimRef;
      if (ref?.name) this.#loop.add(`pvc/${ref.namespace ?? ""}/${ref.name}`);
      else if (ev.type !== "DELETED") for (const e of this.#svc.store.list(PVC)) this.#loop.add(`pvc/${e.id}`);
    } else if (ev.coll === SC) {
      for (const e of this.#svc.store.list(PVC)) if (!(e.obj as Obj).spec?.volumeName) this.#loop.add(`pvc/${e.id}`);
    } else if (ev.coll === "core/pods") {
      // Pods matter only to claims being deleted (pvc-protection waits for their pods to go).
      const ns = ev.obj.metadata.namespace ?? "";
      for (const claim of podClaimNames(ev.obj as V1Pod))
        if (this.#svc.store.get(PVC, `${ns}/${claim}`)?.obj.metadata.deletionTimestamp)
          this.#loop.add(`pvc/${ns}/${claim}`);
    }
  }

  /** Stops the loop. */
  stop(): void {
    this.#loop.stop();
  }

  async #process(key: string): Promise<boolean> {
    const slash = key.indexOf("/");
    const kind = key.slice(0, slash);
    const id = key.slice(slash + 1);
    if (kind === "pvc") {
      const e = this.#svc.store.get(PVC, id);
      return e ? this.#syncClaim(e.obj as Obj) : false;
    }
    const e = this.#svc.store.get(PV, id);
    return e ? this.#syncVolume(e.obj as Obj) : false;
  }

  // --- claims ----------------------------------------------------------------------------------------------------

  async #syncClaim(claim: Obj): Promise<boolean> {
    if (claim.metadata.deletionTimestamp) return this.#releaseClaimProtection(claim);
    if (!claim.spec?.volumeName) return this.#syncUnboundClaim(claim);
    const volume = this.#svc.store.get(PV, claim.spec.volumeName)?.obj as Obj | undefined;
    if (!volume) {
      if (claim.status?.phase === "Bound") {
        await this.#writeStatus(this.#pvcDef, claim, { ...claim.status, phase: "Lost" });
        await this.#events.record(
          claim,
          "Warning",
          "ClaimLost",
          "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
        );
      }
      return false;
    }
    const ref = volume.spec?.claimRef;
    if (!ref?.name || preBoundTo(volume, claim)) {
      const why = ref?.uid ? undefined : requestedVolumeMismatch(volume, claim);
      if (why) {
        await this.#events.record(
          claim,
          "Warning",
          "VolumeMismatch",
          `Cannot bind to requested volume "${volume.metadata.name}": ${why}`,
        );
        return false;
      }
      await this.#bind(volume, claim);
    }
    return false;
  }

  async #syncUnboundClaim(claim: Obj): Promise<boolean> {
    if (await this.#assignDefaultClass(claim)) return false; // its update event brings the claim back
    const className = classOf(claim);
    const sc = className
      ? (this.#svc.store.get(SC, className)?.obj as (KubeObject & V1StorageClass) | undefined)
      : undefined;
    const delayed = sc?.volumeBindingMode === "WaitForFirstConsumer";
    const selected = claim.metadata.annotations?.[ANN.selectedNode];
    if (delayed && !selected) {
      await this.#events.record(
        claim,
        "Normal",
        "WaitForFirstConsumer",
        "waiting for first consumer to be created before binding",
      );
      return false;
    }
    const node = selected ? this.#node(selected) : undefined;
    const volumes = this.#svc.store.list(PV).map((e) => e.obj as Obj);
    const match = findMatchingVolume(claim, volumes, delayed ? node : undefined) as Obj | undefined;
    if (match) {
      await this.#bind(match, claim);
      return false;
    }
    if (!className) {
      await this.#events.record(
        claim,
        "Normal",
        "FailedBinding",
        "no persistent volumes available for this claim and no storage class is set",
      );
      return false;
    }
    if (!sc) {
      await this.#events.record(
        claim,
        "Warning",
        "ProvisioningFailed",
        `storageclass.storage.k8s.io "${className}" not found`,
      );
      return false;
    }
    return this.#provision(claim, sc, node);
  }

  /**
   * RetroactiveDefaultStorageClass (GA in 1.28): a claim created with no class at all while there was no default
   * class gets the default class once one exists. An explicit `""` stays classless. Returns true when it wrote.
   */
  async #assignDefaultClass(claim: Obj): Promise<boolean> {
    const spec = claim.spec as { storageClassName?: string | null } | undefined;
    if (spec?.storageClassName !== undefined && spec.storageClassName !== null) return false;
    if (claim.metadata.annotations?.[ANN.betaStorageClass] !== undefined) return false;
    const def = defaultStorageClass(this.#svc.store.list(SC).map((e) => e.obj));
    if (!def) return false;
    await this.#mutate(this.#pvcDef, claim, (c) => {
      c.spec = { ...c.spec, storageClassName: def.metadata.name };
    });
    return true;
  }

  async #provision(claim: Obj, sc: KubeObject & V1StorageClass, node: V1Node | undefined): Promise<boolean> {
    const annotations = claim.metadata.annotations ?? {};
    if (annotations[ANN.storageProvisioner] !== sc.provisioner) {
      // The claim names who provisions it (and external provisioners pick claims by this annotation).
      await this.#mutate(this.#pvcDef, claim, (c) => {
        c.metadata.annotations = {
          ...c.metadata.annotations,
          [ANN.storageProvisioner]: sc.provisioner,
          [ANN.betaStorageProvisioner]: sc.provisioner,
        };
      });
      return false;
    }
    const provisioner = this.#provisioners.get(sc.provisioner);
    if (!provisioner) {
      await this.#events.record(
        claim,
        "Normal",
        "ExternalProvisioning",
        `Waiting for a volume to be created either by the external provisioner '${sc.provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.`,
      );
      return false;
    }
    if (this.#svc.store.get(PV, `pvc-${claim.metadata.uid ?? ""}`)) return false; // made; its event binds it
    const events = this.#provisionerEvents.get(provisioner.name) ?? this.#events;
    if (claim.spec?.volumeMode === "Block" && provisioner.supportsBlock !== true) {
      // sig-storage-lib-external-provisioner's canProvision: refused before provisioning starts, not retried.
      await events.record(
        claim,
        "Warning",
        "ProvisioningFailed",
        `${provisioner.name} does not support block volume provisioning`,
      );
      return false;
    }
    await events.record(
      claim,
      "Normal",
      "Provisioning",
      `External provisioner is provisioning volume for claim "${claim.metadata.namespace}/${claim.metadata.name}"`,
    );
    try {
      await provisioner.provision(claim, sc, node);
    } catch (err) {
      await events.record(claim, "Warning", "ProvisioningFailed", (err as Error).message);
      return true;
    }
    await events.record(
      claim,
      "Normal",
      "ProvisioningSucceeded",
      `Successfully provisioned volume pvc-${claim.metadata.uid ?? ""}`,
    );
    return false;
  }

  /** Binds both ways, each step idempotent, in the controller's order (a crash between steps resumes here). */
  async #bind(volumeIn: Obj, claimIn: Obj): Promise<void> {
    let volume = volumeIn;
    if (!preBoundTo(volume, claimIn) || !volume.spec?.claimRef?.uid) {
      volume = await this.#mutate(this.#pvDef, volume, (v) => {
        v.spec = {
          ...v.spec,
          claimRef: {
            kind: "PersistentVolumeClaim",
            apiVersion: "v1",
            namespace: claimIn.metadata.namespace,
            name: claimIn.metadata.name,
            uid: claimIn.metadata.uid,
            resourceVersion: claimIn.metadata.resourceVersion,
          },
        };
        v.metadata.annotations = { ...v.metadata.annotations, [ANN.boundByController]: "yes" };
      });
    }
    if (volume.status?.phase !== "Bound") volume = await this.#setPhase(volume, "Bound");
    let claim = claimIn;
    const ann = claim.metadata.annotations ?? {};
    if (claim.spec?.volumeName !== volume.metadata.name || ann[ANN.bindCompleted] !== "yes") {
      claim = await this.#mutate(this.#pvcDef, claim, (c) => {
        const setByUs = c.spec?.volumeName !== volume.metadata.name;
        c.spec = { ...c.spec, volumeName: volume.metadata.name };
        c.metadata.annotations = {
          ...c.metadata.annotations,
          [ANN.bindCompleted]: "yes",
          ...(setByUs ? { [ANN.boundByController]: "yes" } : {}),
        };
      });
    }
    const status = {
      ...claim.status,
      phase: "Bound",
      accessModes: volume.spec?.accessModes,
      capacity: { ...claim.status?.capacity, storage: volume.spec?.capacity?.storage },
    };
    if (!jsonEqual(status, claim.status)) await this.#writeStatus(this.#pvcDef, claim, status);
  }

  async #releaseClaimProtection(claim: Obj): Promise<boolean> {
    if (!claim.metadata.finalizers?.includes(PVC_PROTECTION_FINALIZER)) return false;
    const ns = claim.metadata.namespace ?? "";
    const inUse = this.#svc.store.list("core/pods", `${ns}/`).some((e) => {
      const pod = e.obj as V1Pod;
      const finished = pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed";
      return !!pod.spec?.nodeName && !finished && podClaimNames(pod).includes(claim.metadata.name ?? "");
    });
    if (inUse) return false; // the pod's events requeue the claim
    await this.#mutate(this.#pvcDef, claim, (c) => {
      c.metadata.finalizers = (c.metadata.finalizers ?? []).filter((f) => f !== PVC_PROTECTION_FINALIZER);
    });
    return false;
  }

  // --- volumes ---------------------------------------------------------------------------------------------------

  async #syncVolume(volume: Obj): Promise<boolean> {
    if (volume.metadata.deletionTimestamp && volume.status?.phase !== "Bound") {
      if (volume.metadata.finalizers?.includes(PV_PROTECTION_FINALIZER))
        await this.#mutate(this.#pvDef, volume, (v) => {
          v.metadata.finalizers = (v.metadata.finalizers ?? []).filter((f) => f !== PV_PROTECTION_FINALIZER);
        });
      return false;
    }
    const ref = volume.spec?.claimRef;
    if (!ref?.name) {
      if (volume.status?.phase !== "Available" && volume.status?.phase !== "Failed")
        await this.#setPhase(volume, "Available");
      return false;
    }
    const claim = this.#svc.store.get(PVC, `${ref.namespace ?? ""}/${ref.name}`)?.obj as Obj | undefined;
    if (claim && (!ref.uid || claim.metadata.uid === ref.uid)) {
      const elsewhere = !!claim.spec?.volumeName && claim.spec.volumeName !== volume.metadata.name;
      if (elsewhere && ref.uid) return this.#boundElsewhere(volume);
      if (claim.spec?.volumeName === volume.metadata.name && volume.status?.phase !== "Bound")
        await this.#setPhase(volume, "Bound");
      if (!ref.uid && volume.status?.phase === "Pending") await this.#setPhase(volume, "Available");
      return false;
    }
    if (!ref.uid) {
      // Pre-bound by the administrator to a claim that does not exist (yet): available to that claim only.
      if (volume.status?.phase !== "Available") await this.#setPhase(volume, "Available");
      return false;
    }
    return this.#reclaim(volume);
  }

  /**
   * The volume's claim is bound to another volume: a volume the controller bound is unbound (Available again); one
   * the user or a provisioner bound to that claim is reclaimed, as the PV controller does.
   */
  async #boundElsewhere(volume: Obj): Promise<boolean> {
    if (volume.metadata.annotations?.[ANN.boundByController] !== "yes") return this.#reclaim(volume);
    const unbound = await this.#mutate(this.#pvDef, volume, (v) => {
      if (v.spec) delete v.spec.claimRef;
      if (v.metadata.annotations) delete v.metadata.annotations[ANN.boundByController];
    });
    await this.#setPhase(unbound, "Available");
    return false;
  }

  /** The claim of a bound volume is gone: Released, then what the reclaim policy says. */
  async #reclaim(volumeIn: Obj): Promise<boolean> {
    let volume = volumeIn;
    const phase = volume.status?.phase;
    if (phase === "Failed") return false;
    if (phase !== "Released") volume = await this.#setPhase(volume, "Released");
    const policy = volume.spec?.persistentVolumeReclaimPolicy ?? "Retain";
    if (policy === "Retain") return false;
    if (policy === "Recycle") {
      await this.#setPhase(volume, "Failed", "no volume plugin matched name: kubernetes.io/host-path (Recycle)");
      return false;
    }
    const provisioner = this.#provisioners.get(volume.metadata.annotations?.[ANN.provisionedBy] ?? "");
    if (!provisioner) {
      const message = `error getting deleter volume plugin for volume "${volume.metadata.name}": no deletable volume plugin matched`;
      await this.#setPhase(volume, "Failed", message);
      await this.#events.record(volume, "Warning", "VolumeFailedDelete", message);
      return false;
    }
    if (volume.metadata.deletionTimestamp) return false;
    try {
      await provisioner.delete(volume);
    } catch (err) {
      const events = this.#provisionerEvents.get(provisioner.name) ?? this.#events;
      await events.record(volume, "Warning", "VolumeFailedDelete", (err as Error).message);
      return true;
    }
    return false;
  }

  // --- writes ----------------------------------------------------------------------------------------------------

  #node(name: string): V1Node {
    const stored = this.#svc.store.get("core/nodes", name)?.obj as V1Node | undefined;
    return stored ?? { metadata: { name, labels: { "kubernetes.io/hostname": name } } };
  }

  async #setPhase(volume: Obj, phase: string, message?: string): Promise<Obj> {
    const status = { phase, lastPhaseTransitionTime: nowTime(), ...(message ? { message } : {}) };
    return this.#writeStatus(this.#pvDef, volume, status);
  }

  async #writeStatus(def: ResourceDef, o: Obj, status: unknown): Promise<Obj> {
    return this.#mutate(
      def,
      o,
      (c) => {
        c.status = status as Obj["status"];
      },
      "status",
    );
  }

  /** Re-reads `o`, applies `edit` to a copy and writes it (a conflict throws and the loop retries the key). */
  async #mutate(def: ResourceDef, o: Obj, edit: (copy: Obj) => void, sub = ""): Promise<Obj> {
    const current = this.#svc.get(def, o.metadata.namespace, o.metadata.name ?? "").obj;
    const copy = structuredClone(current) as Obj;
    edit(copy);
    const entry = await this.#svc.update(def, "v1", o.metadata.namespace, o.metadata.name ?? "", copy, ctx, sub);
    return entry.obj as Obj;
  }
}
