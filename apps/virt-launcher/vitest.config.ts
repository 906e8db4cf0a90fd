import { defineConfig } from "vitest/config";

const report = `.reports/vitest${"Deno" in globalThis ? "-deno" : ""}.json`;
export default defineConfig({
  test: {
    passWithNoTests: true,
    // Generous default: the 2-core CI machine runs several suites at once.
    testTimeout: 30_000,
    // The benches' pure parts (figures, parsing) are unit-tested beside them; the benches themselves are not tests.
    include: ["src/**/*.test.ts", "bench/**/*.test.ts"],
    reporters: ["default", ["json", { outputFile: report }]],
  },
});
