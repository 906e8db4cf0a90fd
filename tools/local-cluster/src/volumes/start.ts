/**
 * Starts the storage side of the local cluster's control plane inside the API server process: the
 * PersistentVolume controller (binding, reclaim, pvc/pv protection) always, and with a storage directory the
 * local-path provisioner and its default StorageClass.
 */
import type { Logger } from "pino";
import type { ResourceService } from "../apiserver/rest/service.ts";
import { ensureLocalPathStorageClass, LocalPathProvisioner } from "./local-path-provisioner.ts";
import { PersistentVolumeController } from "./pv-controller.ts";

/** The running storage controllers. */
export interface VolumeControllers {
  stop(): void;
}

/** Starts them (after the default class exists, so the first claims already get it). */
export async function startVolumeControllers(
  svc: ResourceService,
  storageDir: string | undefined,
  logger: Logger,
): Promise<VolumeControllers> {
  if (storageDir) await ensureLocalPathStorageClass(svc);
  const provisioners = storageDir ? [new LocalPathProvisioner(svc, storageDir)] : [];
  const controller = new PersistentVolumeController(svc, provisioners, logger);
  const unsubscribe = svc.store.subscribe((ev) => controller.onEvent(ev));
  return {
    stop: () => {
      unsubscribe();
      controller.stop();
    },
  };
}
