import { projectConfig } from "../../tools/vitest-config/src/index.ts";

export default projectConfig({
  // bench/: the pure figures of the controller and scale benches (the benches themselves run with npm run bench).
  include: ["src/**/*.test.ts", "bench/**/*.test.ts"],
});
