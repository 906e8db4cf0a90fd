/** `virtctl unpause vm|vmi NAME [--dry-run]`. */
import type { Command } from "../cli/command.ts";
import { pauseLikeCommand } from "./pause-common.ts";

/** The `unpause` command. */
export const unpauseCommand: Command = pauseLikeCommand("unpause");
