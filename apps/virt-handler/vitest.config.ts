import { defineConfig } from "vitest/config";

const report = `.reports/vitest${"Deno" in globalThis ? "-deno" : ""}.json`;
export default defineConfig({
  test: {
    passWithNoTests: true,
    // Generous default: the 2-core CI machine runs several suites at once.
    testTimeout: 30_000,
    include: ["src/**/*.test.ts"],
    // The integration tests run real guests (KVM, QEMU TCG) and launcher processes: one file at a time keeps them
    // from starving each other on a 2-core machine.
    fileParallelism: false,
    reporters: ["default", ["json", { outputFile: report }]],
  },
});
