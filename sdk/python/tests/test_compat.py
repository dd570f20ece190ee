import ast
import pathlib
import unittest

ROOT = pathlib.Path(__file__).resolve().parent.parent


class CompatTest(unittest.TestCase):
    def test_python_3_9_syntax(self):
        """The package parses as Python 3.9 (it supports 3.9 and later)."""
        for path in sorted((ROOT / "gantry_client").glob("*.py")):
            with self.subTest(path.name):
                ast.parse(path.read_text(), filename=str(path), feature_version=(3, 9))


if __name__ == "__main__":
    unittest.main()
