/** The Debian host programs and their installer live in @kvt/images (the local cluster needs them too). */
export {
  BUILD_TOOLS,
  ensureHostTools,
  type HostTool,
  HostToolError,
  PUSH_TOOLS,
  type RunOptions,
  run,
  TEST_TOOLS,
} from "@kvt/images";
