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
import { restartCommand } from "./restart.ts";
import { softRebootCommand } from "./soft-reboot.ts";
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
  restartCommand,
  softRebootCommand,
  startCommand,
  stopCommand,
  unpauseCommand,
  versionCommand,
];
