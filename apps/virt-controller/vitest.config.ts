import { defineConfig } from "vitest/config";

const report = `.reports/vitest${"Deno" in globalThis ? "-deno" : ""}.json`;
export default defineConfig({
  test: {
    passWithNoTests: true,
    // Generous default: the 2-core CI machine runs several suites at once.
    testTimeout: 30_000,
    // bench/: the pure figures of the controller and scale benches (the benches themselves run with npm run bench).
    include: ["src/**/*.test.ts", "bench/**/*.test.ts"],
    reporters: ["default", ["json", { outputFile: report }]],
  },
});
