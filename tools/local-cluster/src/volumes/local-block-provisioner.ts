/**
 * The local-block provisioner: raw block volumes for Block claims, each a loop device over a sparse file under the
 * storage directory (local-block.ts has the layout). It runs in the API server process beside local-path and, like
 * it, does the node's part itself (every node is this one machine). Needs root (losetup).
 *
 *   provision(Block claim)  -> sparse file, loop device, link -> device, PV (local.path = link, volumeMode Block)
 *   delete(Released PV)     -> detach its loop devices, remove link and file (only inside baseDir), delete the PV
 *   resume()  (at start)    -> every Block PV it made gets its device again (the same one if still attached) and
 *                              the link follows it; devices over our files that no PV names are detached (a crash)
 *   stop()    (at stop)     -> every device over our files is detached: none outlives the cluster
 */
import { resolve } from "node:path";
import type { Logger } from "pino";
import { type ResourceService, systemContext } from "../apiserver/rest/service.ts";
import type { V1Node, V1PersistentVolume, V1PersistentVolumeClaim, V1StorageClass } from "../cluster/kube-models.ts";
import { linkDevice, makeBlockDevice, removeBlockDevice } from "./block-devices.ts";
import {
  backingFileOf,
  deviceBytes,
  LOCAL_BLOCK_PROVISIONER,
  localBlockRefusal,
  localBlockVolume,
} from "./local-block.ts";
import { attach, attachedUnder, canonicalFile, detachDevice } from "./loop-devices.ts";
import { createVolume, deleteVolume, isInside, requireNode } from "./provisioner-writes.ts";
import type { Provisioner } from "./pv-controller.ts";
import { ANN } from "./volume-match.ts";

const ctx = systemContext("system:serviceaccount:kube-system:local-block-provisioner");
const PV = "core/persistentvolumes";

/** The provisioner. */
export class LocalBlockProvisioner implements Provisioner {
  readonly name = LOCAL_BLOCK_PROVISIONER;
  readonly supportsBlock = true;
  readonly #svc: ResourceService;
  readonly #baseDir: string;
  readonly #logger: Logger;

  /** `baseDir`: where backing files and device links go (`<cluster storage dir>/local-block`). */
  constructor(svc: ResourceService, baseDir: string, logger: Logger) {
    this.#svc = svc;
    this.#baseDir = resolve(baseDir);
    this.#logger = logger.child({ provisioner: LOCAL_BLOCK_PROVISIONER });
  }

  /** Makes the file and its device, then the PV pre-bound to the claim. */
  async provision(claim: V1PersistentVolumeClaim, sc: V1StorageClass, node: V1Node | undefined): Promise<void> {
    requireNode(claim, node);
    const refusal = localBlockRefusal(claim);
    if (refusal) throw new Error(refusal);
    const pv = localBlockVolume(claim, sc, this.#baseDir, node);
    const link = pv.spec!.local!.path;
    const device = makeBlockDevice(link, deviceBytes(claim));
    this.#logger.info(
      { pv: pv.metadata?.name, device, file: backingFileOf(link) },
      "attached a loop device for a Block claim",
    );
    await createVolume(this.#svc, pv, ctx);
  }

  /** Detaches the device, removes the link and the file, then the PV. */
  async delete(volume: V1PersistentVolume): Promise<void> {
    const link = volume.spec?.local?.path;
    if (!link || !isInside(this.#baseDir, link))
      throw new Error(`volume path ${link ?? "(none)"} is not inside ${this.#baseDir}: not deleting it`);
    const file = backingFileOf(link);
    const devices = removeBlockDevice(link);
    this.#logger.info({ pv: volume.metadata?.name, devices, file }, "detached and removed a Block volume");
    await deleteVolume(this.#svc, volume, ctx);
  }

  /**
   * At start: attaches the device of every Block PV this provisioner made (reusing the one still attached) and
   * points its link at it; detaches devices over files under baseDir that no PV names (left by a crash).
   */
  resume(): void {
    const wanted = new Set<string>();
    for (const e of this.#svc.store.list(PV)) {
      const pv = e.obj as V1PersistentVolume;
      const link = pv.spec?.local?.path;
      if (pv.metadata?.annotations?.[ANN.provisionedBy] !== LOCAL_BLOCK_PROVISIONER || !link) continue;
      if (!isInside(this.#baseDir, link)) continue;
      const file = backingFileOf(link);
      try {
        wanted.add(canonicalFile(file));
        linkDevice(link, attach(file));
      } catch (err) {
        // The PV stays; the kubelet reports the missing device to pods that use it (FailedMapVolume).
        this.#logger.error({ err, pv: pv.metadata?.name }, "cannot attach the loop device of a Block volume");
      }
    }
    for (const d of safeAttachedUnder(this.#baseDir, this.#logger)) {
      if (wanted.has(d.file) && !d.deleted) continue;
      this.#logger.warn({ device: d.device, file: d.file }, "detaching a loop device no volume names");
      safeDetachDevice(d.device, this.#logger);
    }
  }

  /** Detaches every device over a file under baseDir (the cluster stops; {@link resume} attaches them again). */
  stop(): void {
    for (const d of safeAttachedUnder(this.#baseDir, this.#logger)) safeDetachDevice(d.device, this.#logger);
  }
}

function safeAttachedUnder(dir: string, logger: Logger): ReturnType<typeof attachedUnder> {
  try {
    return attachedUnder(dir);
  } catch (err) {
    // No losetup (or not root): there is nothing of ours attached either.
    logger.debug({ err }, "cannot list loop devices");
    return [];
  }
}

function safeDetachDevice(device: string, logger: Logger): void {
  try {
    detachDevice(device);
  } catch (err) {
    // Logged, not thrown: stopping goes on with the others (a device that stays is reported by `losetup -a`).
    logger.error({ err, device }, "cannot detach a loop device");
  }
}
