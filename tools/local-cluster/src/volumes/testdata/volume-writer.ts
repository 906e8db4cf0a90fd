/**
 * A stand-in container program for the storage integration test: the kubelet runs it (Node strips the types) in
 * place of virt-launcher. It writes the KVT_VOLUME_MOUNTS it was given into the volume mounted at /data (proof that
 * the process reaches the claim's directory through the contract), then runs until the kubelet stops it.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";

interface Mount {
  mountPath: string;
  hostPath: string;
  readOnly: boolean;
}

const mounts = JSON.parse(process.env.KVT_VOLUME_MOUNTS ?? "[]") as Mount[];
const data = mounts.find((m) => m.mountPath === "/data");
if (data) writeFileSync(join(data.hostPath, "mounts.json"), JSON.stringify(mounts));
process.on("SIGTERM", () => process.exit(0));
setInterval(() => undefined, 60_000);
