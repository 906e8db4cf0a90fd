// Type-aware ESLint for the promise and `any` rules, plus the workspace's module-boundary rule (Nx tags).
// Formatting and the fast lint live in Biome (biome.json).
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import { plugin as kvt } from "./tools/lint/src/index.ts";

const workspaceRoot = import.meta.dirname;

export default tseslint.config(
  {
    ignores: [
      "**/node_modules/**",
      "**/build/**",
      "**/out-tsc/**",
      "**/.nx/**",
      "**/.reports/**",
      "**/.data/**",
      "native/**/*.js",
      "**/*.config.ts",
      "eslint.config.js",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: workspaceRoot },
    },
    plugins: { kvt },
    rules: {
      "kvt/module-boundaries": ["error", { workspaceRoot }],
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/require-await": "off",
    },
  },
  {
    files: ["**/*.test.ts"],
    rules: {
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/unbound-method": "off",
    },
  },
);
