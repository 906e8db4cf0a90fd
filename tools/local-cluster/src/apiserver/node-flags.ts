/**
 * Node flags the API server process runs with. A 32 MiB young generation: every write allocates short-lived JSON
 * (request body, stored copy, watch lines), and with V8's default semi-space the scavenger runs so often that its
 * pauses set the watch-delivery p99 (quiet bench: p99 35-70 ms by default, 30-48 ms with this; writes/s unchanged).
 * One V8 worker thread (default 4: GC helper threads, on a machine whose 2 cores the whole cluster shares).
 */
export const APISERVER_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=32", "--v8-pool-size=1"];
