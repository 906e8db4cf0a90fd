# Prints the values of the "public-keys" object of a NoCloud meta-data file in JSON (KubeVirt writes one line:
# {"instance-id":"...","local-hostname":"...","public-keys":{"0":"ssh-ed25519 AAAA... user"}}), one per line, in the
# file's order. String escapes \" \\ \/ \n \t and \uXXXX of ASCII are decoded; nothing is printed without the key.
function hexval(h,   i, v, c) {
  v = 0
  for (i = 1; i <= length(h); i++) { c = index("0123456789abcdef", tolower(substr(h, i, 1))); if (!c) return -1; v = v * 16 + c - 1 }
  return v
}
# Reads the JSON string starting at the quote at s[pos]; sets STR and returns the index after the closing quote.
function jstring(s, pos,   out, c, e, code) {
  out = ""
  pos++
  while (pos <= length(s)) {
    c = substr(s, pos, 1)
    if (c == "\"") { STR = out; return pos + 1 }
    if (c == "\\") {
      e = substr(s, pos + 1, 1)
      if (e == "n") out = out "\n"
      else if (e == "t") out = out "\t"
      else if (e == "u") { code = hexval(substr(s, pos + 2, 4)); if (code >= 32 && code < 127) out = out sprintf("%c", code); pos += 4 }
      else out = out e
      pos += 2
      continue
    }
    out = out c
    pos++
  }
  STR = out
  return pos
}
{ text = text $0 "\n" }
END {
  at = index(text, "\"public-keys\"")
  if (!at) exit 0
  s = substr(text, at + 13)
  if (!match(s, /^[ \t\r\n]*:[ \t\r\n]*\{/)) exit 0
  pos = RLENGTH + 1
  n = length(s)
  while (pos <= n) {
    c = substr(s, pos, 1)
    if (c == "}") break
    if (c != "\"") { pos++; continue }
    pos = jstring(s, pos)             # the key ("0", "1", ...)
    while (pos <= n && substr(s, pos, 1) != "\"") { if (substr(s, pos, 1) == "}") exit 0; pos++ }
    pos = jstring(s, pos)             # its value: one authorized key (or several lines of them)
    print STR
  }
}
