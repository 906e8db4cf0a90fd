/** A small CRD with a status subresource, printer columns and a short name, for tests. */
export const WIDGET_CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color, priority: 1}
    schema:
      openAPIV3Schema:
        type: object
        description: A Widget for tests.
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 0, description: How big the widget is.}
              color: {type: string, default: blue}
              tags: {type: array, items: {type: string}}
          status:
            type: object
            properties:
              phase: {type: string}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
`;

/** A Widget manifest. */
export function widget(name: string, size = 1, extra = ""): string {
  return `apiVersion: example.com/v1
kind: Widget
metadata:
  name: ${name}
spec:
  size: ${size}
${extra}`;
}
