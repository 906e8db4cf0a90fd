import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { parseFieldSelector, pathGetter } from "../selectors/fields.ts";
import { parseLabelSelector } from "../selectors/labels.ts";
import { Store } from "../storage/store.ts";
import type { KubeObject } from "../types.ts";
import { type WatchEvent, type WatchFilter, WatchHub } from "./hub.ts";

const logger = pino({ level: "silent" });
const getters = new Map([
  ["metadata.name", pathGetter("metadata.name")],
  ["metadata.namespace", pathGetter("metadata.namespace")],
]);
const filter = (idPrefix: string, fieldSelector?: string): WatchFilter => ({
  coll: "core/configmaps",
  idPrefix,
  labels: parseLabelSelector(undefined),
  fields: parseFieldSelector(fieldSelector, new Set(getters.keys())),
  getters,
});
const cm = (ns: string, name: string, v: string): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: ns },
  data: { v },
});

describe("WatchHub", () => {
  it.each(["", "a/"])(
    "sends the same events to a watcher without selectors (prefix %j) as through the selector rules",
    async (idPrefix) => {
      const store = Store.open({ logger });
      const hub = new WatchHub(store);
      const plain: string[] = [];
      const selected: string[] = [];
      const line = (e: WatchEvent): string => `${e.type} ${e.obj.metadata.namespace}/${e.obj.metadata.name} ${e.rev}`;
      hub.watch(filter(idPrefix), undefined, (e) => plain.push(line(e)));
      // A field selector every object passes takes the general path of the transition table.
      hub.watch(filter(idPrefix, "metadata.name!=none"), undefined, (e) => selected.push(line(e)));
      await store.put("core/configmaps", "a/x", cm("a", "x", "1")).committed;
      await store.put("core/configmaps", "b/y", cm("b", "y", "1")).committed;
      await store.put("core/configmaps", "a/x", cm("a", "x", "2")).committed;
      await store.remove("core/configmaps", "a/x", cm("a", "x", "2")).committed;
      await store.remove("core/configmaps", "b/y", cm("b", "y", "1")).committed;
      const all = ["ADDED a/x 1", "ADDED b/y 2", "MODIFIED a/x 3", "DELETED a/x 4", "DELETED b/y 5"];
      expect(plain).toEqual(idPrefix === "" ? all : all.filter((l) => l.includes(" a/")));
      expect(selected).toEqual(plain);
      await store.close();
    },
  );
});
