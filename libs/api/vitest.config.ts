import { projectConfig } from "../../tools/vitest-config/src/index.ts";

export default projectConfig();
