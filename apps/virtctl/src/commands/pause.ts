/** `virtctl pause vm|vmi NAME [--dry-run]`. */
import type { Command } from "../cli/command.ts";
import { pauseLikeCommand } from "./pause-common.ts";

/** The `pause` command. */
export const pauseCommand: Command = pauseLikeCommand("pause");
