/**
 * A stand-in container program for the storage integration tests: the kubelet runs it (Node strips the types) in
 * place of virt-launcher. It writes the KVT_VOLUME_MOUNTS it was given into the volume mounted at /data, or, for a
 * Block claim, at the start of the device at /dev/data (flushed), as `kvt-block:<json>\n` (proof that the process
 * reaches the claim's directory or device through the contract), then runs until the kubelet stops it.
 */
import { closeSync, fsyncSync, openSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";

interface Mount {
  mountPath: string;
  hostPath: string;
  readOnly: boolean;
}

const mounts = JSON.parse(process.env.KVT_VOLUME_MOUNTS ?? "[]") as Mount[];
const data = mounts.find((m) => m.mountPath === "/data");
if (data) writeFileSync(join(data.hostPath, "mounts.json"), JSON.stringify(mounts));
const device = mounts.find((m) => m.mountPath === "/dev/data");
if (device) {
  const fd = openSync(device.hostPath, "r+");
  writeSync(fd, Buffer.from(`kvt-block:${JSON.stringify(mounts)}\n`), 0, undefined, 0);
  fsyncSync(fd);
  closeSync(fd);
}
process.on("SIGTERM", () => process.exit(0));
setInterval(() => undefined, 60_000);
