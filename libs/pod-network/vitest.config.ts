import { defineConfig } from "vitest/config";

const report = `.reports/vitest${"Deno" in globalThis ? "-deno" : ""}.json`;
export default defineConfig({
  test: {
    passWithNoTests: true,
    // Generous default: the 2-core CI machine runs several suites at once.
    testTimeout: 30_000,
    include: ["src/**/*.test.ts"],
    reporters: ["default", ["json", { outputFile: report }]],
  },
});
