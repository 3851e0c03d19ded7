"""Every Python example of docs/sdk.md and of the README runs as written: each in a fresh interpreter (as a
user's program would), against the in-process broker, with the documented address 127.0.0.1:9876 pointed
at it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "docs" / "sdk.md", ROOT / "README.md")
DOC_ADDR = "127.0.0.1:9876"


def examples(doc: Path) -> list[tuple[str, str]]:
    """(where: the file, its heading and a one-word label such as ``asyncio:`` above the block; the code)
    of each fenced python block, in document order."""
    found, heading, label = [], "", ""
    for part in re.split(r"(^```python\n.*?^```$)", doc.read_text(), flags=re.MULTILINE | re.DOTALL):
        if part.startswith("```python"):
            where = f"{doc.name} {heading} {label}".strip()
            found.append((where, part.removeprefix("```python\n").removesuffix("```")))
            continue
        for line in part.splitlines():
            if line.startswith("#"):
                heading, label = line.lstrip("# "), ""
            elif re.fullmatch(r"\w+:", line.strip()):
                label = line.strip(" :")
    return found


EXAMPLES = [example for doc in DOCS for example in examples(doc)]


def test_the_doc_has_an_example_of_each_style():
    found = examples(DOCS[0])
    code = "\n".join(text for _, text in found)
    assert len(found) >= 6 and all(DOC_ADDR in text for _, text in found)
    for style in ("ferrymq.sdk.aio import", "BlockingProducer", "task.react"):
        assert style in code


def test_the_readme_shows_send_push_pull_and_transactions():
    code = "\n".join(text for _, text in examples(DOCS[1]))
    for call in (".send(", "register_listener(", ".pull(", "send_message_in_transaction("):
        assert call in code


@pytest.mark.parametrize("code", [code for _, code in EXAMPLES],
                         ids=[re.sub(r"\W+", "-", where) for where, _ in EXAMPLES])
def test_example_runs(code, cluster, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(code.replace(DOC_ADDR, cluster.namesrv_addr))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=90,
                          cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip(), "the example printed nothing"
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
