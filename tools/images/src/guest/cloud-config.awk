# Translates the #cloud-config subset the demo image supports into a shell script (stdout):
#   hostname: NAME            -> hostname NAME
#   write_files: [ {path, content (plain, quoted, | or |- block), encoding (b64), permissions, append} ]
#   bootcmd: / runcmd: [ "string" | [argv, ...] ]   -> string items verbatim, list items quoted and joined
#   ssh_authorized_keys: [ "key", ... ] (block or flow list) -> appended to root's ~/.ssh/authorized_keys (root is the
#                                                                demo image's default user)
# Order as cloud-init: bootcmd, hostname, write_files, ssh keys, runcmd. Unknown keys are ignored.
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t\r]+$/, "", s); return s }
function sq(s) { gsub(/'/, "'\\''", s); return "'" s "'" }
function unquote(s) {
  s = trim(s)
  if (s ~ /^".*"$/) { s = substr(s, 2, length(s) - 2); gsub(/\\n/, "\n", s); gsub(/\\"/, "\"", s); gsub(/\\\\/, "\\", s); return s }
  if (s ~ /^'.*'$/) { s = substr(s, 2, length(s) - 2); gsub(/''/, "'", s); return s }
  return s
}
function indent(s) { match(s, /^ */); return RLENGTH }
function flowlist(s,   n, parts, i, out) {
  s = trim(s); s = substr(s, 2, length(s) - 2)
  n = split(s, parts, ",")
  out = ""
  for (i = 1; i <= n; i++) out = out (i > 1 ? " " : "") sq(unquote(parts[i]))
  return out
}
function cmditem(v) { v = trim(v); return (v ~ /^\[/) ? flowlist(v) : unquote(v) }
function flushfile() {
  if (fpath == "") return
  nfiles++
  fp[nfiles] = fpath; fc[nfiles] = fcontent; fe[nfiles] = fenc; fm[nfiles] = fperm; fa[nfiles] = fappend; fh[nfiles] = fchomp
  fpath = ""; fcontent = ""; fenc = ""; fperm = ""; fappend = ""; fchomp = 0
}
function setkey(k, v) {
  k = trim(k)
  if (k == "path") fpath = unquote(v)
  else if (k == "encoding") fenc = unquote(v)
  else if (k == "permissions") fperm = unquote(v)
  else if (k == "append") fappend = unquote(v)
  else if (k == "content") {
    v = trim(v)
    if (v ~ /^[|>][-+]?$/) { inblock = 1; fchomp = (v ~ /-$/); blockind = -1; fcontent = ""; blockfold = (v ~ /^>/) }
    else fcontent = unquote(v)
  }
}
BEGIN { section = ""; nfiles = 0; nrun = 0; nboot = 0; nkeys = 0; host = ""; inblock = 0 }
{
  line = $0; sub(/\r$/, "", line)
  if (inblock) {
    if (trim(line) == "") { fcontent = fcontent "\n"; next }
    if (blockind < 0) { blockind = indent(line); if (blockind <= itemind) { inblock = 0 } }
    if (inblock && indent(line) >= blockind) {
      fcontent = fcontent substr(line, blockind + 1) (blockfold ? " " : "\n"); next
    }
    inblock = 0
  }
  if (line ~ /^[ \t]*#/ || trim(line) == "") next
  if (line ~ /^[A-Za-z_][A-Za-z0-9_-]*:/) {
    flushfile()
    key = line; sub(/:.*/, "", key); val = line; sub(/^[^:]*:/, "", val)
    section = key
    if (key == "hostname") host = unquote(val)
    if (key == "ssh_authorized_keys" && trim(val) ~ /^\[/) {
      nk = split(substr(trim(val), 2, length(trim(val)) - 2), flow, ",")
      for (i = 1; i <= nk; i++) if (trim(flow[i]) != "") keys[++nkeys] = unquote(flow[i])
    }
    next
  }
  if (section == "ssh_authorized_keys") {
    if (line ~ /^[ \t]*- /) { item = line; sub(/^[ \t]*- /, "", item); keys[++nkeys] = unquote(item) }
    next
  }
  if (section == "runcmd" || section == "bootcmd") {
    if (line ~ /^[ \t]*- /) { item = line; sub(/^[ \t]*- /, "", item); if (section == "runcmd") run[++nrun] = cmditem(item); else boot[++nboot] = cmditem(item) }
    next
  }
  if (section == "write_files") {
    if (line ~ /^[ \t]*- /) { flushfile(); itemind = indent(line); rest = line; sub(/^[ \t]*- /, "", rest); line = rest }
    rest = trim(line)
    if (rest ~ /^[A-Za-z_]+:/) { k = rest; sub(/:.*/, "", k); v = rest; sub(/^[^:]*:/, "", v); setkey(k, v) }
    next
  }
}
END {
  flushfile()
  print "#!/bin/sh"
  for (i = 1; i <= nboot; i++) print boot[i]
  if (host != "") { print "hostname " sq(host); print "echo " sq(host) " >/etc/hostname" }
  for (i = 1; i <= nfiles; i++) {
    c = fc[i]
    if (fh[i]) sub(/\n+$/, "", c); else if (c ~ /\n$/) sub(/\n+$/, "\n", c)
    print "mkdir -p \"$(dirname " sq(fp[i]) ")\""
    redir = (fa[i] == "true") ? ">>" : ">"
    if (fe[i] == "b64" || fe[i] == "base64") print "printf '%s' " sq(c) " | base64 -d " redir " " sq(fp[i])
    else print "printf '%s' " sq(c) " " redir " " sq(fp[i])
    if (fm[i] != "") print "chmod " sq(fm[i]) " " sq(fp[i])
  }
  if (nkeys > 0) {
    print "mkdir -p /root/.ssh && chmod 700 /root/.ssh"
    for (i = 1; i <= nkeys; i++) print "printf '%s\\n' " sq(keys[i]) " >>/root/.ssh/authorized_keys"
    print "chmod 600 /root/.ssh/authorized_keys"
  }
  for (i = 1; i <= nrun; i++) print run[i]
}
