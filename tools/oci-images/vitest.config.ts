import { projectConfig } from "../../tools/vitest-config/src/index.ts";

export default projectConfig({
  // The image build (cold: a Debian download) and the registry round trip run in beforeAll with their own timeouts.
  testTimeout: 120_000,
});
