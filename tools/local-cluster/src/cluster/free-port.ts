/** Picks free TCP ports on 127.0.0.1 (bind to 0, read the port, close). */
import { createServer } from "node:net";

/** One free port. There is a small window before the caller binds it; callers start their servers promptly. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
