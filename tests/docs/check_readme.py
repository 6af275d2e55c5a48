"""Fails unless README.md shows examples/train.c verbatim inside a ```c block, and the README's
two opening commands are the ones .ci/run and the quick start use."""
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
readme = (root / "README.md").read_text()
example = (root / "examples" / "train.c").read_text()
if "```c\n" + example + "```" not in readme:
    sys.exit("README.md does not contain examples/train.c verbatim in a ```c block")
ci = (root / ".ci" / "run").read_text()
test_cmd = "./scripts/install-deps.sh && ./scripts/test.sh"
if test_cmd not in readme.split("\n## ")[0]:
    sys.exit(f"README.md does not open with the test command: {test_cmd}")
if test_cmd not in ci:
    sys.exit(f".ci/run does not run the README's test command: {test_cmd}")
print("README shows examples/train.c and the test command")
