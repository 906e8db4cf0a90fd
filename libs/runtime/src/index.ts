/** Process lifecycle for the apps. */

/** Closing a server for good: every accepted socket tracked, and ended by the stop. */
export { closeServer, type TrackedSockets, trackSockets } from "./close-server.ts";
/** Copies what another process appends to a file into a descriptor, across the file's rotation (virt-tail). */
export { followFile } from "./follow-file.ts";
/** A TCP port on 127.0.0.1 for a server started a little later, outside the kernel's ephemeral range. */
export { ephemeralPortRange, freePort } from "./free-port.ts";
/** The Debian programs a process runs on its host: looked up on PATH in process, installed with apt-get when root. */
export {
  type AptRunner,
  type EnsureHostTools,
  ensureHostTools,
  type HostTool,
  type HostToolDeps,
  HostToolError,
  hostToolInstaller,
  onPath,
} from "./host-tools.ts";
/** The declaration an app's main.ts makes, and how it is run. */
export {
  type FlagSpec,
  helpText,
  type MainCommand,
  main,
  type ParsedInput,
  runMainCommand,
  runtimeName,
} from "./main-command.ts";
