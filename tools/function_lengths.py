#!/usr/bin/env python3
"""Reports C++/CUDA functions longer than a limit (docs/design.md §13: functions under 80 lines).

Usage: function_lengths.py [--max-lines N] FILE...

A function's length counts its lines from the first line of its declaration (template
line and return type included) to its closing brace, both included. Lambdas and local
classes count in the function that holds them. Comments, string and character literals
(raw strings too) and preprocessor lines are blanked before the braces are matched, so a
brace inside one of them does not count.

Prints `path:line: Name is N lines (limit M)` for each function over the limit and exits
1 if there is any; exits 2 if a file's braces do not balance (the file is then not
understood, and silence would be a false pass).
"""

import argparse
import re
import sys

DEFAULT_MAX_LINES = 80


class UnbalancedError(Exception):
    pass


def _blank(text, begin, end, out):
    """Replaces text[begin:end] in `out` by spaces, keeping its newlines."""
    for i in range(begin, end):
        if text[i] != "\n":
            out[i] = " "


def _is_identifier_char(c):
    return c.isalnum() or c == "_"


def strip_code(text):
    """`text` with comments, literals' contents and preprocessor lines blanked.

    Newlines are kept, so offsets and line numbers stay those of `text`. A string keeps
    its quotes (`extern "C"` stays recognisable as `extern ""`).
    """
    out = list(text)
    n = len(text)
    i = 0
    at_line_start = True  # only whitespace since the last newline
    while i < n:
        c = text[i]
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if at_line_start and c == "#":  # a directive, with its continuation lines
            j = i
            while j < n and text[j] != "\n":
                if text.startswith("/*", j):  # a block comment may span lines
                    end = text.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                    continue
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                j += 1
            _blank(text, i, j, out)
            i = j
            continue
        at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            _blank(text, i, j, out)
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            _blank(text, i, j, out)
            i = j
            continue
        if c == '"':
            raw = re.match(r'R"([^()\\\s]{0,16})\(', text[i - 1 : i + 20]) if i > 0 else None
            if raw and (i < 2 or not _is_identifier_char(text[i - 2]) or text[i - 2] in "uUL8"):
                close = ")" + raw.group(1) + '"'
                j = text.find(close, i + 1)
                j = n if j < 0 else j + len(close)
                _blank(text, i + 1, j - 1, out)
                i = j
                continue
            i = _skip_quoted(text, i, '"', out)
            continue
        if c == "'":
            # A digit separator (1'000'000) follows a digit or hex digit inside a number.
            if i > 0 and _is_identifier_char(text[i - 1]) and not _is_char_prefix(text, i):
                i += 1
                continue
            i = _skip_quoted(text, i, "'", out)
            continue
        i += 1
    return "".join(out)


def _is_char_prefix(text, i):
    """Whether the identifier characters before text[i] are a literal prefix (L, u, U, u8)."""
    j = i
    while j > 0 and _is_identifier_char(text[j - 1]):
        j -= 1
    return text[j:i] in ("L", "u", "U", "u8")


def _skip_quoted(text, i, quote, out):
    """Blanks the literal opening at text[i]; returns the offset past its closing quote."""
    n = len(text)
    j = i + 1
    while j < n and text[j] != quote and text[j] != "\n":
        j += 2 if text[j] == "\\" else 1
    end = min(j, n)
    _blank(text, i + 1, end, out)
    return end + 1


_CONTAINER = "container"  # namespace, class, struct, union, extern "C": may hold functions
_OTHER = "other"  # enum, initializer, a brace inside parentheses: holds no functions
_MEMBER_INIT = "member_init"  # a brace of a constructor's member initializer list

_ACCESS = re.compile(r"^\s*(public|private|protected)\s*:(?!:)")
# Attributes with arguments that may precede a function's name.
_ATTRIBUTE = re.compile(r"\b(__launch_bounds__|__attribute__|alignas|__declspec)\s*\(\)")
_TEMPLATE_PREFIX = re.compile(r"^\s*template\s*<")


def _drop_balanced(header, open_c, close_c):
    """`header` without the contents of its (open_c ... close_c) groups, outermost kept."""
    depth = 0
    out = []
    for c in header:
        if c == open_c:
            if depth == 0:
                out.append(c)
            depth += 1
        elif c == close_c and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(c)
        elif depth == 0:
            out.append(c)
    return "".join(out)


def _without_template_prefix(header):
    """`header` less a leading `template <...>`."""
    m = _TEMPLATE_PREFIX.match(header)
    if not m:
        return header
    depth = 0
    for k in range(m.end() - 1, len(header)):
        if header[k] == "<":
            depth += 1
        elif header[k] == ">":
            depth -= 1
            if depth == 0:
                return header[k + 1 :]
    return header


def classify(header):
    """What a `{` opened after `header` at namespace or class scope starts."""
    h = _without_template_prefix(_ACCESS.sub("", header)).strip()
    if re.match(r"(inline\s+)?namespace\b", h) or re.match(r'extern\s*"\s*"\s*$', h):
        return _CONTAINER
    if re.match(r"enum\b", h):
        return _OTHER
    flat = _drop_balanced(h, "(", ")")
    if re.match(r"((typedef|\[\[[^\]]*\]\])\s+)*(class|struct|union)\b", h) and "(" not in flat:
        return _CONTAINER
    if "(" not in flat:
        return _OTHER  # a member's or variable's brace initializer
    # `=` outside parentheses: an initializer (a lambda or a table); `operator=` aside.
    if "=" in re.sub(r"operator\s*[^\s(]*", "operator", flat):
        return _OTHER
    # A constructor's member initializer list: `Foo() : a_{1}` or `Foo() : a_(1), b_{2}`;
    # the brace that opens the body follows a `)` or a `}` (of the last initializer).
    if re.search(r"\)[^()]*:(?!:)", flat) and re.search(r"[\w>]\s*$", flat):
        return _MEMBER_INIT
    return "function"


def function_name(header):
    """The (qualified) name before the first parenthesis of a function's header."""
    h = _without_template_prefix(_ACCESS.sub("", header))
    h = _ATTRIBUTE.sub(lambda m: " " * len(m.group(0)), _drop_balanced(h, "(", ")"))
    angle = 0
    for k, c in enumerate(h):
        if c == "<" and not h[:k].rstrip().endswith("operator"):
            angle += 1
        elif c == ">" and angle > 0 and not h[:k].rstrip().endswith("operator"):
            angle -= 1
        elif c == "(" and angle == 0:
            m = re.search(r"((?:[\w~]+\s*::\s*)*(?:operator\s*\S+?|~?\w+))\s*$", h[:k])
            if m:
                return re.sub(r"\s+", "", m.group(1))
            break
    return "?"


def find_functions(text):
    """(first line, last line, name) of each function defined in C++ source `text`."""
    code = strip_code(text)
    functions = []
    stack = []  # the kind of each brace open outside functions
    header_start = 0
    paren_depth = 0
    function_depth = 0  # braces open inside the current function
    function_open = None
    line_of = _line_index(code)
    i = 0
    for i, c in enumerate(code):
        if function_depth:
            if c == "{":
                function_depth += 1
            elif c == "}":
                function_depth -= 1
                if function_depth == 0:
                    start, name = function_open
                    functions.append((line_of(start), line_of(i), name))
                    header_start = i + 1
            continue
        if c == "(":
            paren_depth += 1
        elif c == ")":
            paren_depth = max(0, paren_depth - 1)
        elif c == "{":
            header = code[header_start:i]
            inside_initializer = stack and stack[-1] in (_OTHER, _MEMBER_INIT)
            kind = _OTHER if paren_depth or inside_initializer else classify(header)
            if kind == "function":
                offset = header_start + len(header) - len(header.lstrip())
                offset += _access_prefix_length(code[offset:i])
                function_open = (offset, function_name(header))
                function_depth = 1
                continue
            # Inside a container a new header starts; an initializer's braces are part of
            # the declaration around them (a constructor's header goes on after them).
            stack.append(kind)
            if kind == _CONTAINER:
                header_start = i + 1
        elif c == "}":
            if not stack:
                raise UnbalancedError("a '}' closes nothing at line %d" % line_of(i))
            if stack.pop() == _CONTAINER:
                header_start = i + 1
        elif c == ";" and not paren_depth and not (stack and stack[-1] != _CONTAINER):
            header_start = i + 1
    if function_depth or stack:
        raise UnbalancedError("%d brace(s) left open at the end" % (function_depth + len(stack)))
    return functions


def _access_prefix_length(text):
    m = re.match(r"\s*(public|private|protected)\s*:(?!:)\s*", text)
    return m.end() if m else 0


def _line_index(text):
    newlines = [k for k, c in enumerate(text) if c == "\n"]

    def line_of(offset):
        lo, hi = 0, len(newlines)
        while lo < hi:
            mid = (lo + hi) // 2
            if newlines[mid] < offset:
                lo = mid + 1
            else:
                hi = mid
        return lo + 1

    return line_of


def long_functions(path, text, max_lines):
    """Messages for the functions of `text` (read from `path`) over `max_lines`."""
    messages = []
    for first, last, name in find_functions(text):
        length = last - first + 1
        if length > max_lines:
            messages.append(
                "%s:%d: %s is %d lines (limit %d)" % (path, first, name, length, max_lines)
            )
    return messages


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-lines", type=int, default=DEFAULT_MAX_LINES)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    messages = []
    for path in sorted(args.files):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            messages += long_functions(path, text, args.max_lines)
        except UnbalancedError as e:
            print("%s: cannot match its braces: %s" % (path, e), file=sys.stderr)
            return 2
    for m in messages:
        print(m)
    sys.stdout.flush()  # the list before the summary when both go to one log
    if messages:
        print(
            "\n%d function(s) over %d lines: split them into named helpers" % (len(messages), args.max_lines),
            file=sys.stderr,
        )
        return 1
    print("%d files, every function within %d lines" % (len(args.files), args.max_lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
