/**
 * A stand-in container program for the kubelet restart test: the kubelet runs it in place of virt-launcher. It
 * listens on `launcher-sock` in the volume mounted at /var/run/kubevirt/sockets (as a launcher does, found through
 * KVT_VOLUME_MOUNTS), starts a long-lived child of its own (the stand-in for the guest: QEMU is the launcher's
 * child), and runs until SIGTERM, or exits with the code in the file `exit-now` of its pod directory (its working
 * directory) as soon as that file appears.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";

const mounts = JSON.parse(process.env.KVT_VOLUME_MOUNTS ?? "[]") as { mountPath: string; hostPath: string }[];
const socketDir = mounts.find((m) => m.mountPath === "/var/run/kubevirt/sockets")?.hostPath;
if (!socketDir) throw new Error("no volume mounted at /var/run/kubevirt/sockets");
const podDir = process.cwd();
const server = createServer(() => undefined).listen(join(socketDir, "launcher-sock"));
const guest = spawn("sleep", ["600"], { stdio: "ignore" });
const end = (code: number): void => {
  guest.kill("SIGKILL");
  server.close();
  process.exit(code);
};
process.on("SIGTERM", () => end(0));
setInterval(() => {
  const file = join(podDir, "exit-now");
  if (existsSync(file)) end(Number(readFileSync(file, "utf8")));
}, 100);
