import { projectConfig } from "../../tools/vitest-config/src/index.ts";

export default projectConfig({
  // The benches' pure parts (figures, parsing) are unit-tested beside them; the benches themselves are not tests.
  include: ["src/**/*.test.ts", "bench/**/*.test.ts"],
});
