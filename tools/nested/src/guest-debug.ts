/**
 * Diagnostic job for the L1 host: boots the demo image on our VMM once with the full kernel log on the console
 * (no `quiet`) and prints everything, for when a check fails. `node src/cli-debug.ts` runs it through the lane.
 */
import { join } from "node:path";
import { DEMO_LINUX_IMAGE, defaultStoreRoot, imageDir } from "@kvt/images";
import { noCloudSeedInitrd, Vm } from "@kvt/vmm";

const extra = process.argv.slice(2).join(" ");
const dir = imageDir(defaultStoreRoot(), DEMO_LINUX_IMAGE);
const t0 = performance.now();
const vm = Vm.create({
  memoryBytes: 256 * 2 ** 20,
  boot: {
    kind: "linux",
    kernelPath: join(dir, "vmlinuz"),
    initrdPath: join(dir, "initrd.img"),
    extraInitrd: [noCloudSeedInitrd({ metaData: "instance-id: debug\n", userData: "#!/bin/sh\necho from-userdata\n" })],
    cmdline: `console=ttyS0 panic=-1 loglevel=7 ${extra}`,
  },
});
let pending = "";
vm.on("serial-output", (chunk) => {
  pending += Buffer.from(chunk).toString("latin1");
  const lines = pending.split("\n");
  pending = lines.pop() ?? "";
  for (const l of lines) process.stdout.write(`L2 +${((performance.now() - t0) / 1000).toFixed(2)}s ${l}\n`);
});
vm.on("vcpu-exit", (e) => process.stdout.write(`L2 vcpu-exit ${JSON.stringify(e)}\n`));
vm.on("shutdown", (e) => process.stdout.write(`L2 shutdown ${JSON.stringify(e)}\n`));
vm.start();
const stats = setInterval(() => {
  const s = vm.stats();
  process.stdout.write(
    `L2 stats +${((performance.now() - t0) / 1000).toFixed(0)}s exits ${s.exits} io ${s.ioExits} out ${s.serialBytesOut} cpu ${JSON.stringify(s.vcpuSeconds)} partial ${JSON.stringify(pending.slice(-80))}\n`,
  );
  vm.writeSerial("echo hi\n");
}, 15_000);
stats.unref();
setTimeout(
  () => {
    process.stdout.write(`L2 partial: ${JSON.stringify(pending)}\nL2 stats ${JSON.stringify(vm.stats())}\n`);
    vm.stop();
    process.exit(0);
  },
  Number(process.env.KVT_DEBUG_MS ?? 200_000),
);
