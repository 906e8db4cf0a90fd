import { projectConfig } from "./src/index.ts";

export default projectConfig();
