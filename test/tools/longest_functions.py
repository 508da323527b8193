#!/usr/bin/env python3
"""Lists the longest C++ function bodies in the tree.

Usage (from the repository root):
    python3 test/tools/longest_functions.py [-n 15] [DIR|FILE ...]  # default: src backends include

A brace-counting scan, no compiler needed: comments, string and character literals and
preprocessor lines are blanked, then every `{` whose header (the text since the previous
`;`, `{` or `}`) looks like a function signature opens a function when no function is open
already (lambdas and local classes count towards the function around them). Namespaces,
classes, structs, enums and `extern "C"` blocks are scopes that may hold functions. The
length is the number of lines from the first line of the signature to the closing brace,
both included. Generated files under bazel-* are not scanned.
"""

import argparse
import os
import re
import sys

EXTS = ('.cpp', '.cc', '.h', '.hpp', '.inc', '.def')
SCOPE_WORDS = re.compile(r'^(template\s*<[^{]*>\s*)?(namespace|class|struct|union|enum)\b|^extern\s*"C"')
CONTROL_WORDS = re.compile(r'^(if|for|while|switch|catch|do|else|try)\b')
SIGNATURE_END = re.compile(r'(\)|\bconst|\boverride|\bnoexcept|\bfinal|\bmutable|->\s*[\w:<>,\s*&]+)$')


def blank_text(text):
    """Returns text with comments, literals and preprocessor lines replaced by spaces
    (newlines kept, so line numbers stay right)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == '#':
            # A preprocessor line, with its backslash continuations.
            while i < n and text[i] != '\n':
                if text[i] == '\\' and i + 1 < n and text[i + 1] == '\n':
                    out.append(' \n')
                    i += 2
                    continue
                out.append(' ')
                i += 1
            continue
        if c == '\n':
            line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith('//', i):
            while i < n and text[i] != '\n':
                out.append(' ')
                i += 1
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(')' + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + re.sub(r'[^\n]', ' ', text[i + 2:j]))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r'[^\n]', ' ', text[i + 1:j - 1]) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def function_name(header):
    """The qualified name before the parameter list of a signature."""
    h = re.sub(r'^template\s*<.*?>\s*', '', header, flags=re.S)
    depth = 0
    for k, ch in enumerate(h):
        if ch == '<':
            depth += 1
        elif ch == '>':
            depth = max(0, depth - 1)
        elif ch == '(' and depth == 0:
            m = re.search(r'([\w:~]+(?:operator\s*\S+?)?)\s*$', h[:k])
            return m.group(1) if m else h[:k].split()[-1:] or '?'
    return '?'


def scan(path):
    """Yields (start line, length, name) for each function body in the file at path."""
    with open(path, encoding='utf-8', errors='replace') as f:
        text = blank_text(f.read())
    stack = []  # 'scope', 'func' or 'block'
    header_start = 0
    func_start = None
    func_name = None
    line = 1
    header_line = None
    for k, ch in enumerate(text):
        if ch == '\n':
            line += 1
            continue
        if ch in ';{}':
            header = text[header_start:k].strip()
            if ch == '{':
                in_func = 'func' in stack
                if in_func:
                    stack.append('block')
                elif SCOPE_WORDS.search(header):
                    stack.append('scope')
                elif (header and '(' in header and not CONTROL_WORDS.search(header)
                      and SIGNATURE_END.search(re.sub(r'\s+', ' ', header))
                      and not header.endswith('=')):
                    stack.append('func')
                    func_start = header_line or line
                    func_name = function_name(header)
                else:
                    stack.append('block')
            elif ch == '}':
                if stack:
                    kind = stack.pop()
                    if kind == 'func':
                        yield func_start, line - func_start + 1, func_name
            header_start = k + 1
            header_line = None
        elif not ch.isspace() and header_line is None:
            header_line = line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('-n', type=int, default=15, help='how many functions to list')
    ap.add_argument('dirs', nargs='*', default=['src', 'backends', 'include'],
                    help='folders or files to scan')
    args = ap.parse_args()
    found = []
    for d in args.dirs:
        if os.path.isfile(d):
            found += [(length, d, start, fname) for start, length, fname in scan(d)]
            continue
        for root, dirs, files in os.walk(d):
            dirs[:] = sorted(x for x in dirs if not x.startswith('bazel-'))
            for name in sorted(files):
                if name.endswith(EXTS):
                    p = os.path.join(root, name)
                    for start, length, fname in scan(p):
                        found.append((length, p, start, fname))
    found.sort(key=lambda t: (-t[0], t[1], t[2]))
    for length, p, start, fname in found[:args.n]:
        print('%5d  %s:%d  %s' % (length, p, start, fname))
    return 0


if __name__ == '__main__':
    sys.exit(main())
