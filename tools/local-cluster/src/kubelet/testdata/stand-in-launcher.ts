/**
 * A stand-in container program for the kubelet restart test: the kubelet runs it in place of virt-launcher. It
 * listens on its launcher socket (as a launcher does), starts a long-lived child of its own (the stand-in for the
 * guest: QEMU is the launcher's child), and runs until SIGTERM, or exits with the code in the file `exit-now` of
 * its pod directory as soon as that file appears.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";

const socketDir = process.env.KUBEVIRT_SOCKET_DIR ?? "";
const podDir = process.env.KUBEVIRT_POD_DIR ?? "";
const key = (process.env.POD_UID ?? "").replaceAll("-", "").slice(0, 16);
mkdirSync(socketDir, { recursive: true });
const server = createServer(() => undefined).listen(join(socketDir, `launcher-${key}.sock`));
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
