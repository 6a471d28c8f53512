"""tools/function_lengths.py on small sources whose functions' lengths are counted by hand."""

import contextlib
import io
import os
import tempfile
import unittest

from tools import function_lengths


def function_of(lines, name="Long"):
    """A function of `lines` lines: its header, lines - 2 statements, its closing brace."""
    body = ["  x += %d;" % k for k in range(lines - 2)]
    return "\n".join(["int %s(int x) {" % name] + body + ["}"]) + "\n"


def lengths(text):
    return [(name, last - first + 1) for first, last, name in function_lengths.find_functions(text)]


class FunctionLengthsTest(unittest.TestCase):
    def test_eighty_lines_pass_and_eighty_one_fail(self):
        self.assertEqual(lengths(function_of(80)), [("Long", 80)])
        self.assertEqual(function_lengths.long_functions("a.cc", function_of(80), 80), [])
        self.assertEqual(
            function_lengths.long_functions("a.cc", "\n\n" + function_of(81), 80),
            ["a.cc:3: Long is 81 lines (limit 80)"],
        )

    def test_a_multi_line_header_counts_from_its_first_line(self):
        text = "template <typename T>\nT Add(T a,\n      T b) {\n  return a + b;\n}\n"
        self.assertEqual(lengths(text), [("Add", 5)])

    def test_braces_in_literals_and_comments_do_not_count(self):
        text = (
            "// A comment's brace: {\n"
            "/* and a block's: } {\n"
            "   over lines { */\n"
            "const char* F() {\n"
            '  const char* s = "}{\\"}";  // }\n'
            "  char c = '}';\n"
            "  char d = '\\'';\n"
            "  int n = 1'000'000;\n"
            '  const char* r = R"json({"a": "}"})json";\n'
            '  const char* q = R"(\n'
            "  }}}\n"
            '  )";\n'
            "  /* { */ return s;\n"
            "}\n"
            "#define BRACE {\n"
            "#define BLOCK(x) \\\n"
            "  }\n"
            "int G() { return 0; }\n"
        )
        self.assertEqual(lengths(text), [("F", 11), ("G", 1)])

    def test_namespaces_classes_and_initializers(self):
        text = (
            "namespace a {\n"
            "namespace {\n"
            "enum class E { kA, kB };\n"
            "const int kTable[] = {1, 2, {3}};\n"
            "struct P { int x{0}; };\n"
            "}  // namespace\n"
            "class C : public B {\n"
            " public:\n"
            "  C(int x) : x_{x}, y_(F({1, 2})), z_{{1}, {2}} {\n"
            "    Run([&] { return x_; });\n"
            "  }\n"
            "  int x() const { return x_; }\n"
            "  bool operator==(const C& o) const { return x_ == o.x_; }\n"
            " private:\n"
            "  int x_ = 0;\n"
            "};\n"
            'extern "C" {\n'
            "void Hook() {}\n"
            "}\n"
            "auto kLambda = [](int v) {\n"
            "  return v;\n"
            "};\n"
            "int C::Get(int v = 3) const { return v; }\n"
            "}  // namespace a\n"
        )
        self.assertEqual(
            lengths(text),
            [("C", 3), ("x", 1), ("operator==", 1), ("Hook", 1), ("C::Get", 1)],
        )

    def test_cuda_launch_bounds_is_not_the_name(self):
        text = "__global__ void __launch_bounds__(256) Kernel(float* y) {\n  y[0] = 1;\n}\n"
        self.assertEqual(lengths(text), [("Kernel", 3)])

    def test_unbalanced_braces_are_an_error(self):
        with self.assertRaises(function_lengths.UnbalancedError):
            function_lengths.find_functions("void F() {\n")
        with self.assertRaises(function_lengths.UnbalancedError):
            function_lengths.find_functions("}\n")

    def test_main_names_file_line_function_and_length(self):
        directory = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        short = os.path.join(directory, "short.cc")
        long = os.path.join(directory, "long.cc")
        broken = os.path.join(directory, "broken.cc")
        with open(short, "w") as f:
            f.write(function_of(80, "Short"))
        with open(long, "w") as f:
            f.write("#include <x>\n" + function_of(81))
        with open(broken, "w") as f:
            f.write("void F() {\n")
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(function_lengths.main([short]), 0)
            self.assertEqual(function_lengths.main([short, long]), 1)
            self.assertEqual(function_lengths.main(["--max-lines", "81", long]), 0)
            self.assertEqual(function_lengths.main([short, broken]), 2)
        self.assertIn("%s:2: Long is 81 lines (limit 80)\n" % long, out.getvalue())


if __name__ == "__main__":
    unittest.main()
