import { projectConfig } from "../../tools/vitest-config/src/index.ts";

export default projectConfig({
  // The integration tests run real guests (KVM, QEMU TCG) and launcher processes: one file at a time keeps them
  // from starving each other on a 2-core machine.
  fileParallelism: false,
});
