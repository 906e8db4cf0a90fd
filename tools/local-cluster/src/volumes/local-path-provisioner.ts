/**
 * The local-path provisioner (Rancher's rancher.io/local-path, re-implemented in-process: every node of the local
 * cluster is this one machine, so it makes and removes the directories itself instead of running helper pods).
 *
 *   provision(claim, class, node)  -> mkdir -m 0777 <baseDir>/pvc-<uid>_<ns>_<name>, create the PV (local-path.ts)
 *   delete(Released PV)            -> rm -rf its directory (only inside baseDir), delete the PV
 *
 * Also ensures the default StorageClass `local-path` exists when the cluster starts.
 */
import { chmodSync, mkdirSync, rmSync } from "node:fs";
import { resolve } from "node:path";
import { type ResourceService, systemContext } from "../apiserver/rest/service.ts";
import type { V1Node, V1PersistentVolume, V1PersistentVolumeClaim, V1StorageClass } from "../cluster/kube-models.ts";
import { LOCAL_PATH_PROVISIONER, localPathStorageClass, localPathVolume } from "./local-path.ts";
import { createVolume, deleteVolume, ensureStorageClass, isInside, requireNode } from "./provisioner-writes.ts";
import type { Provisioner } from "./pv-controller.ts";

const ctx = systemContext("system:serviceaccount:local-path-storage:local-path-provisioner-service-account");

/** Creates the default `local-path` StorageClass unless it exists (an admin's edits to it are kept). */
export async function ensureLocalPathStorageClass(svc: ResourceService): Promise<void> {
  await ensureStorageClass(svc, localPathStorageClass());
}

/** The provisioner. */
export class LocalPathProvisioner implements Provisioner {
  readonly name = LOCAL_PATH_PROVISIONER;
  readonly #svc: ResourceService;
  readonly #baseDir: string;

  /** `baseDir`: where volume directories go (`<cluster data dir>/storage`). */
  constructor(svc: ResourceService, baseDir: string) {
    this.#svc = svc;
    this.#baseDir = resolve(baseDir);
  }

  /** Makes the directory, then the PV pre-bound to the claim. */
  async provision(claim: V1PersistentVolumeClaim, sc: V1StorageClass, node: V1Node | undefined): Promise<void> {
    requireNode(claim, node);
    // The PV controller refuses Block claims first (supportsBlock is unset), with the library's message.
    if ((claim.spec?.volumeMode ?? "Filesystem") === "Block")
      throw new Error(`${LOCAL_PATH_PROVISIONER} does not support block volume provisioning`);
    const pv = localPathVolume(claim, sc, this.#baseDir, node);
    const dir = pv.spec!.hostPath!.path;
    mkdirSync(dir, { recursive: true, mode: 0o777 });
    chmodSync(dir, 0o777); // as the helper pod's `mkdir -m 0777`: whoever runs in the pod may write
    await createVolume(this.#svc, pv, ctx);
  }

  /** Removes the directory and the PV. */
  async delete(volume: V1PersistentVolume): Promise<void> {
    const dir = volume.spec?.hostPath?.path ?? volume.spec?.local?.path;
    if (dir && isInside(this.#baseDir, dir)) rmSync(dir, { recursive: true, force: true });
    else if (dir) throw new Error(`volume path ${dir} is not inside ${this.#baseDir}: not deleting it`);
    await deleteVolume(this.#svc, volume, ctx);
  }
}
