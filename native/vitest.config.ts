import { projectConfig } from "../tools/vitest-config/src/index.ts";

export default projectConfig({
  include: ["test/**/*.test.ts"],
});
