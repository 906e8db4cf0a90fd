/**
 * Test fixture: one virt-launcher process serving launcher-rpc over a native-VMM test guest, as the launcher Pod's
 * container does, but with the spec fixed (no image store): argv = socket path, console log path, guest cmdline.
 * Exits with the launcher's code (0 shut down or migrated away, 1 crashed or killed) once the domain ends.
 */
import { tmpdir } from "node:os";
import { createLogger } from "@kvt/observability";
import { testGuestPath } from "@kvt/vmm";
import { startLauncherApp } from "../../launcher-app.ts";
import { machineFactory } from "../create-machine.ts";

const [socketPath = "", consoleLogPath = "", cmdline = ""] = process.argv.slice(2);
// Structured log lines on stdout: the tests keep them in a file and show its tail when a case fails.
const logger = createLogger({ component: "virt-launcher", level: "debug" });
const app = await startLauncherApp({
  identity: { namespace: "default", name: "guest", uid: "vmi-m" },
  vmi: { metadata: { name: "guest", namespace: "default", uid: "vmi-m" } } as never,
  socketPath,
  consoleLogPath,
  toSpec: () => ({
    vmiKey: "default/guest",
    memoryBytes: 64 * 2 ** 20,
    vcpus: 1,
    boot: { kernelPath: testGuestPath(), cmdline, pvmSafe: true },
    workDir: tmpdir(),
  }),
  createMachine: machineFactory({
    logger,
    useEmulation: "never",
    host: { kvmDevice: true, hardwareVirt: false, pvm: true },
  }),
  logger,
});
process.on("SIGTERM", () => void app.manager.kill());
const outcome = await app.finished;
await new Promise((r) => setTimeout(r, 200)); // let the handler-side clients read the final events
await app.close();
process.exit(outcome.state === "Crashed" ? 1 : 0);
