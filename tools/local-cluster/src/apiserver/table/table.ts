/**
 * Server-side Table output (meta.k8s.io/v1 Table): the Name column, then the resource's printer columns (CRD
 * additionalPrinterColumns evaluated by JSONPath, `date` columns as human durations, built-in renderers), and
 * each row's object as PartialObjectMetadata (kubectl's default includeObject=Metadata) or the full object.
 */
import type { PrinterColumn, ResourceDef } from "../resources/types.ts";
import type { Json, KubeObject } from "../types.ts";
import { ageOf } from "./duration.ts";
import { cell } from "./jsonpath.ts";

/** includeObject values. */
export type IncludeObject = "None" | "Metadata" | "Object";

/** A Table column definition. */
export interface ColumnDefinition {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

/** A Table. */
export interface Table {
  kind: "Table";
  apiVersion: "meta.k8s.io/v1";
  metadata: { resourceVersion?: string; continue?: string; remainingItemCount?: number };
  columnDefinitions: ColumnDefinition[];
  rows: { cells: Json[]; object?: Json }[];
}

const NAME_COLUMN: ColumnDefinition = {
  name: "Name",
  type: "string",
  format: "name",
  description:
    "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
  priority: 0,
};

/** The column definitions of a resource. */
export function columnDefinitions(def: ResourceDef): ColumnDefinition[] {
  return [
    ...(def.omitNameColumn ? [] : [NAME_COLUMN]),
    ...def.columns.map((c) => ({
      name: c.name,
      type: c.type,
      format: c.format ?? "",
      description: c.description,
      priority: c.priority,
    })),
  ];
}

function renderCell(c: PrinterColumn, obj: KubeObject, now: number): Json {
  if (c.render) return c.render(obj, now);
  if (!c.jsonPath) return null;
  const v = cell(c.jsonPath, obj as unknown as Json, c.type);
  if (c.type === "date") return v === null ? null : ageOf(v, now);
  return v;
}

/** One row. */
export function tableRow(
  def: ResourceDef,
  obj: KubeObject,
  include: IncludeObject,
  now: number,
): { cells: Json[]; object?: Json } {
  const cells: Json[] = [
    ...(def.omitNameColumn ? [] : [def.nameCell?.(obj) ?? obj.metadata.name ?? ""]),
    ...def.columns.map((c) => renderCell(c, obj, now)),
  ];
  if (include === "None") return { cells };
  if (include === "Object") return { cells, object: obj as unknown as Json };
  return {
    cells,
    object: { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: obj.metadata as unknown as Json },
  };
}

/** A Table of `objs`. */
export function toTable(
  def: ResourceDef,
  objs: readonly KubeObject[],
  include: IncludeObject,
  meta: Table["metadata"],
  withColumns = true,
  now = Date.now(),
): Table {
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: meta,
    columnDefinitions: withColumns ? columnDefinitions(def) : [],
    rows: objs.map((o) => tableRow(def, o, include, now)),
  };
}
