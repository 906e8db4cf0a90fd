/** Every virtctl subcommand, in `--help` order. */
import type { Command } from "../cli/command.ts";
import { completionCommand } from "./completion.ts";
import { consoleCommand } from "./console.ts";
import { createCommand } from "./create.ts";
import { expandCommand } from "./expand.ts";
import { exposeCommand } from "./expose.ts";
import { migrateCommand } from "./migrate.ts";
import { migrateCancelCommand } from "./migrate-cancel.ts";
import { pauseCommand } from "./pause.ts";
import { portForwardCommand } from "./port-forward.ts";
import { restartCommand } from "./restart.ts";
import { scpCommand } from "./scp.ts";
import { softRebootCommand } from "./soft-reboot.ts";
import { sshCommand } from "./ssh.ts";
import { startCommand } from "./start.ts";
import { stopCommand } from "./stop.ts";
import { unpauseCommand } from "./unpause.ts";
import { versionCommand } from "./version.ts";

/** All commands. */
export const COMMANDS: readonly Command[] = [
  completionCommand(() => COMMANDS),
  consoleCommand,
  createCommand,
  expandCommand,
  exposeCommand,
  migrateCommand,
  migrateCancelCommand,
  pauseCommand,
  portForwardCommand,
  restartCommand,
  scpCommand,
  softRebootCommand,
  sshCommand,
  startCommand,
  stopCommand,
  unpauseCommand,
  versionCommand,
];
