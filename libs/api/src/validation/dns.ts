/** DNS-1123 label and subdomain checks with apimachinery's messages (`util/validation`). */

const LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const SUBDOMAIN_FMT = `${LABEL_FMT}(\\.${LABEL_FMT})*`;
const LABEL_RE = new RegExp(`^${LABEL_FMT}$`);
const SUBDOMAIN_RE = new RegExp(`^${SUBDOMAIN_FMT}$`);

/**
 * The errors `validation.IsDNS1123Label` returns (empty when valid). A missing or non-string value is checked as
 * Go's zero value "" (webhooks may see an object before schema validation; the fuzz lane sent a disk without name).
 */
export function dns1123LabelErrors(raw: unknown): string[] {
  const value = typeof raw === "string" ? raw : "";
  const errs: string[] = [];
  if (value.length > 63) errs.push("must be no more than 63 characters");
  if (!LABEL_RE.test(value)) {
    errs.push(
      `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '${LABEL_FMT}')`,
    );
  }
  return errs;
}

/** The errors `validation.IsDNS1123Subdomain` returns (empty when valid); a non-string is checked as "". */
export function dns1123SubdomainErrors(raw: unknown): string[] {
  const value = typeof raw === "string" ? raw : "";
  const errs: string[] = [];
  if (value.length > 253) errs.push("must be no more than 253 characters");
  if (!SUBDOMAIN_RE.test(value)) {
    errs.push(
      `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '${SUBDOMAIN_FMT}')`,
    );
  }
  return errs;
}
