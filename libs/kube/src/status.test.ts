import { describe, expect, it } from "vitest";
import { ApiError, errorMessage } from "./errors.ts";
import { answerMessage, answerStatus, conflict, internalError, invalid, notFound, statusError } from "./status.ts";

const VM = { group: "kubevirt.io", resource: "virtualmachine" };

describe("Status answers, as apimachinery builds them", () => {
  it("a conflict names the object and why, and carries the whole Status kube-apiserver sends", () => {
    const error = conflict(VM, "vm-cirros", "VM is already running");
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: 409, reason: "Conflict" });
    expect(error.status).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: 'Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm-cirros": VM is already running',
      reason: "Conflict",
      details: { name: "vm-cirros", group: "kubevirt.io", kind: "virtualmachine" },
      code: 409,
    });
    expect(conflict({ group: "", resource: "pods" }, "p").message).toBe(
      'Operation cannot be fulfilled on pods "p": the object has been modified; please apply your changes to the latest version and try again',
    );
  });

  it("an invalid object lists its causes, bracketed only when there are several", () => {
    const one = [{ reason: "FieldValueRequired", message: "Required value", field: "spec.running" }];
    expect(invalid("VirtualMachine", "kubevirt.io", "vm", one).message).toBe(
      'VirtualMachine.kubevirt.io "vm" is invalid: spec.running: Required value',
    );
    const two = [...one, { reason: "FieldValueInvalid", message: "bad" }];
    expect(invalid("Pod", "", "p", two).status).toMatchObject({
      code: 422,
      reason: "Invalid",
      message: 'Pod "p" is invalid: [spec.running: Required value, bad]',
      details: { name: "p", group: "", kind: "Pod", causes: two },
    });
  });

  it("an internal error keeps its cause; not-found names the resource; an empty reason is left out", () => {
    expect(internalError("boom").status).toMatchObject({
      message: "Internal error occurred: boom",
      details: { causes: [{ message: "boom" }] },
    });
    expect(notFound({ group: "", resource: "pods" }, "p").message).toBe('pods "p" not found');
    expect(statusError(500, "", "space exceeded").status).not.toHaveProperty("reason");
  });
});

describe("answerStatus and errorMessage", () => {
  it("keeps a Status body (filling in a missing code) and words other bodies as client-go", () => {
    expect(answerStatus(409, JSON.stringify({ kind: "Status", message: "m", reason: "Conflict" }))).toEqual({
      kind: "Status",
      message: "m",
      reason: "Conflict",
      code: 409,
    });
    expect(answerStatus(401, "")).toMatchObject({
      reason: "Unauthorized",
      message: "the server has asked for the client to provide credentials",
      details: { causes: [{ reason: "UnexpectedServerResponse", message: "unknown" }] },
    });
    expect(answerStatus(418, "teapot").message).toBe(
      "the server responded with the status code 418 but did not return more information",
    );
  });

  it("prints a client's ApiError as client-go would: the server's message without the request", () => {
    const status = answerStatus(404, JSON.stringify({ kind: "Status", message: 'pods "p" not found' }));
    expect(errorMessage(new ApiError(`GET /api/v1/pods/p: ${status.message}`, 404, status))).toBe('pods "p" not found');
    expect(errorMessage(new Error("plain"))).toBe("plain");
    expect(errorMessage("text")).toBe("text");
  });
});

describe("answerMessage", () => {
  it("is a Status answer's message, else the text (cut to max when given)", () => {
    expect(answerMessage('{"kind":"Status","message":"not prepared yet"}')).toBe("not prepared yet");
    expect(answerMessage("<html>bad gateway</html>")).toBe("<html>bad gateway</html>");
    expect(answerMessage('{"message":42}')).toBe('{"message":42}');
    expect(answerMessage("null")).toBe("null");
    expect(answerMessage("x".repeat(300), 200)).toBe("x".repeat(200));
  });
});
