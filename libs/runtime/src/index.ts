/** Process lifecycle for the apps. */

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
