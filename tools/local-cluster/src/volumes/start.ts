/**
 * Starts the storage side of the local cluster's control plane inside the API server process: the
 * PersistentVolume controller (binding, reclaim, pvc/pv protection) always, and with a storage directory the
 * provisioners and their StorageClasses: local-path (the default; directories) and, for raw block volumes,
 * local-block (loop devices under `<storage>/local-block`, attached again at start and detached at stop).
 */
import { join } from "node:path";
import type { Logger } from "pino";
import type { ResourceService } from "../apiserver/rest/service.ts";
import { localBlockStorageClass } from "./local-block.ts";
import { LocalBlockProvisioner } from "./local-block-provisioner.ts";
import { ensureLocalPathStorageClass, LocalPathProvisioner } from "./local-path-provisioner.ts";
import { ensureStorageClass } from "./provisioner-writes.ts";
import { PersistentVolumeController } from "./pv-controller.ts";

/** The running storage controllers. */
export interface VolumeControllers {
  stop(): void;
}

/** Starts them (after the classes exist, so the first claims already get the default). */
export async function startVolumeControllers(
  svc: ResourceService,
  storageDir: string | undefined,
  logger: Logger,
): Promise<VolumeControllers> {
  let block: LocalBlockProvisioner | undefined;
  if (storageDir) {
    await ensureLocalPathStorageClass(svc);
    await ensureStorageClass(svc, localBlockStorageClass());
    block = new LocalBlockProvisioner(svc, join(storageDir, "local-block"), logger);
    block.resume();
  }
  const provisioners = storageDir && block ? [new LocalPathProvisioner(svc, storageDir), block] : [];
  const controller = new PersistentVolumeController(svc, provisioners, logger);
  const unsubscribe = svc.store.subscribe((ev) => controller.onEvent(ev));
  return {
    stop: () => {
      unsubscribe();
      controller.stop();
      block?.stop();
    },
  };
}
