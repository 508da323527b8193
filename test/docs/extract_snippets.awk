# Writes each ```cpp block of the Markdown files given as arguments to OUT/snippet-N.cpp and
# one line per block to OUT/manifest: "N FILE LINE KIND RUN", where KIND is `tu` (a whole
# translation unit) or `fragment` (statements: the body of a main), and RUN is 1 when the
# program is to be run. See snippets_test.sh for the conventions. Variables: OUT.
# Fences may be indented (inside list items); that indentation is taken off the block.
function flush(   i, isinc) {
  # A fragment: its #include lines first, then kiln/kiln.h, then the other lines as main's
  # body (the includes' lines left blank, so that #line keeps the Markdown's numbering).
  if (kind == "fragment") {
    for (i = 1; i <= nbody; i++)
      if (body[i] ~ /^[ \t]*#[ \t]*include/)
        print body[i] > file
    print "#include \"kiln/kiln.h\"" > file
    print "int main() {" > file
  }
  printf "#line %d \"%s\"\n", startline + 1, blockfile > file
  for (i = 1; i <= nbody; i++) {
    isinc = body[i] ~ /^[ \t]*#[ \t]*include/
    print ((kind == "fragment" && isinc) ? "" : body[i]) > file
  }
  if (kind == "fragment") {
    print "  return 0;" > file
    print "}" > file
  }
  close(file)
}
function unclosed() {
  printf "%s:%d: a ```cpp block is not closed\n", blockfile, startline > "/dev/stderr"
  bad = 1
  inblock = 0
}
FNR == 1 && inblock { unclosed() }
!inblock && /^[ \t]*```[ \t]*cpp([ \t].*)?$/ {
  indent = $0
  sub(/```.*/, "", indent)
  info = $0
  sub(/^[ \t]*```[ \t]*cpp/, "", info)
  kind = "tu"; run = 1
  n = split(info, words, /[ \t]+/)
  for (i = 1; i <= n; i++) {
    if (words[i] == "fragment") kind = "fragment"
    else if (words[i] == "norun") run = 0
    else if (words[i] != "") {
      printf "%s:%d: unknown word '%s' after ```cpp (known: fragment, norun)\n", FILENAME, FNR, words[i] > "/dev/stderr"
      bad = 1
    }
  }
  count++
  file = OUT "/snippet-" count ".cpp"
  startline = FNR
  blockfile = FILENAME
  nbody = 0
  inblock = 1
  printf "// %s:%d (%s)\n", FILENAME, FNR, kind > file
  next
}
inblock && /^[ \t]*```[ \t]*$/ {
  flush()
  printf "%d %s %d %s %d\n", count, FILENAME, startline, kind, run > (OUT "/manifest")
  inblock = 0
  next
}
inblock {
  line = $0
  if (indent != "" && substr(line, 1, length(indent)) == indent)
    line = substr(line, length(indent) + 1)
  body[++nbody] = line
}
END {
  if (inblock)
    unclosed()
  close(OUT "/manifest")
  exit bad
}
