/**
 * The launcher, assembled (the builder main.ts calls): console hub + domain manager + launcher-rpc server on the
 * VMI's socket (commands, events, the console, and port-forwards to the guest). Tests build it with a fake machine;
 * main() with the real backends.
 */
import type { VirtualMachineInstance } from "@kvt/api";
import { LauncherServer } from "@kvt/launcher-rpc";
import type { Logger } from "@kvt/observability";
import { ConsoleHub } from "./domain/console-hub.ts";
import { type BuiltMachine, DomainManager, type DomainOutcome } from "./domain/domain-manager.ts";
import type { MachineSpec } from "./machine/machine.ts";
import { guestDialer } from "./network/port-forward.ts";
import type { SpecRole } from "./vmi/machine-spec.ts";

/** Everything a launcher is made from. */
export interface LauncherAppOptions {
  readonly identity: { namespace: string; name: string; uid: string; podName?: string; podUid?: string };
  readonly vmi?: VirtualMachineInstance;
  readonly socketPath: string;
  /** The console log file the pod's guest-console-log container tails; undefined for none. */
  readonly consoleLogPath?: string;
  readonly toSpec: (vmi: VirtualMachineInstance, role: SpecRole) => MachineSpec | Promise<MachineSpec>;
  readonly createMachine: (spec: MachineSpec) => Promise<BuiltMachine>;
  readonly logger: Logger;
}

/** A running launcher. */
export interface LauncherApp {
  readonly manager: DomainManager;
  readonly server: LauncherServer;
  /** Settles when the guest is gone for good. */
  readonly finished: Promise<DomainOutcome>;
  /** Stops serving (ends the event streams, so the handler sees the launcher go) and removes the socket. */
  close(): Promise<void>;
}

/** Builds the launcher and starts serving launcher-rpc on `socketPath`. */
export async function startLauncherApp(options: LauncherAppOptions): Promise<LauncherApp> {
  const hub = new ConsoleHub(options.consoleLogPath, options.logger);
  const sink: { server?: LauncherServer } = {};
  const manager = new DomainManager({
    identity: options.identity,
    ...(options.vmi ? { vmi: options.vmi } : {}),
    toSpec: options.toSpec,
    createMachine: options.createMachine,
    console: hub,
    publish: (event) => sink.server?.publish(event),
    logger: options.logger,
  });
  const server = new LauncherServer({
    socketPath: options.socketPath,
    service: manager,
    console: hub,
    portForward: guestDialer(() => manager.guestNetwork),
    logger: options.logger,
  });
  sink.server = server;
  await server.listen();
  options.logger.info({ socket: options.socketPath }, "serving launcher-rpc");
  return { manager, server, finished: manager.finished, close: () => server.close() };
}
