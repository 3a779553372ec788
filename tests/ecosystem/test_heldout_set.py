"""The oracle's self-test for the second held-out set (bench/heldout_2026_11.py, frozen on 2026-11-28).

Every task's checks must fail on the workspace the task starts from and pass on a reference solution written
here, or the set would count a wrong answer done or a right one not. Some tasks also get a wrong answer that
looks right (a hard-coded count, a file written by hand instead of by the script asked for): their checks must
fail on it too.

THE REFERENCE SOLUTIONS BELOW ARE THE ORACLE'S SELF-TEST ONLY. They are never shown to a model, never put in a
prompt, a transcript or a fix, and no code under src/ may name these tasks.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

from bench.heldout_2026_11 import _SHOP, FROZEN_ON, HELDOUT2  # noqa: E402
from bench.real_tasks import HELDOUT, SETS, TASKS, check_task  # noqa: E402

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")

#: The oracle's self-test: a right answer to each task (the files written or changed). Never shown to a model.
REFERENCE: dict[str, dict[str, str]] = {
    "cli_sum": {"sum_args.py": "import sys\n\nprint(sum(int(a) for a in sys.argv[1:]))\n"},
    "sh_hi": {"hi.sh": 'echo "Hi, $1"\n'},
    "make_version": {"Makefile": "build:\n\tmkdir -p out\n\tcp VERSION out/version.txt\n"},
    "make_test_fix": {"temperature.py": "def f_to_c(f):\n    return (f - 32) * 5 / 9\n"},
    "region_totals": {
        "region_totals.py": "import csv\n\ntotals = {}\nfor row in csv.DictReader(open('sales.csv')):\n"
        "    totals[row['region']] = totals.get(row['region'], 0) + int(row['amount'])\n"
        "for region in sorted(totals):\n    print(f'{region}: {totals[region]}')\n"
    },
    "active_users": {
        "list_active.py": "import json\n\nfor name in sorted(u['name'] for u in json.load(open('users.json')) "
        "if u['active']):\n    print(name)\n"
    },
    "inventory_pkg": {
        "inventory/__init__.py": "",
        "inventory/stock.py": "class Stock:\n    def __init__(self):\n        self.items = {}\n\n"
        "    def add(self, item, n):\n        self.items[item] = self.items.get(item, 0) + n\n\n"
        "    def count(self, item):\n        return self.items.get(item, 0)\n",
        "inventory/__main__.py": "print('ready')\n",
    },
    "move_format_price": {
        "money.py": 'def format_price(cents):\n    return f"${cents // 100}.{cents % 100:02d}"\n',
        "shop.py": "from money import format_price\n\n\ndef receipt(items):\n"
        "    total = sum(price for _, price in items)\n"
        '    lines = [f"{name} {format_price(price)}" for name, price in items]\n'
        '    lines.append(f"total {format_price(total)}")\n    return "\\n".join(lines)\n\n\n'
        'if __name__ == "__main__":\n    print(receipt([("tea", 250), ("cake", 1205)]))\n',
    },
    "wc_words": {
        "wc.py": "import sys\n\n\ndef main(argv):\n    words = argv[0] == '--words'\n    path = argv[-1]\n"
        "    text = open(path).read()\n    print(len(text.split()) if words else len(text.splitlines()))\n\n\n"
        "if __name__ == '__main__':\n    main(sys.argv[1:])\n"
    },
    "page_count": {"pages.py": "def page_count(items, per_page):\n    return -(-items // per_page)\n"},
    "slug_tests": {
        "tests/test_slug.py": "from slug import slugify\n\n\ndef test_spaces():\n"
        "    assert slugify('Hello World') == 'hello-world'\n\n\ndef test_punctuation():\n"
        "    assert slugify('A, b!') == 'a-b'\n"
    },
    "merge_config": {
        "merge_config.py": "import json\n\nconfig = json.load(open('defaults.json'))\n"
        "config.update(json.load(open('local.json')))\njson.dump(config, open('config.json', 'w'))\n"
    },
    "count_logs": {"count_logs.sh": "ls logs/*.log | wc -l\n"},
    "greet_times": {
        "greet_cli.py": "import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument('name')\n"
        "parser.add_argument('--times', type=int, default=1)\nargs = parser.parse_args()\n"
        "for _ in range(args.times):\n    print(f'Hello {args.name}')\n"
    },
    "mathlib_pkg": {"mathlib/__init__.py": "from mathlib.core import clamp\n"},
    "csv2json": {
        "csv2json.py": "import csv, json\n\nrows = [{'name': r['name'], 'age': int(r['age'])} "
        "for r in csv.DictReader(open('people.csv'))]\njson.dump(rows, open('people.json', 'w'))\n"
    },
    "rename_mean": {
        "util.py": "def mean(xs):\n    return sum(xs) / len(xs)\n",
        "a.py": "from util import mean\n\nprint(mean([1, 2, 3]))\n",
        "b.py": "import util\n\nprint(util.mean([10, 20]))\n",
    },
}

#: Wrong answers that look right: the checks must fail on each (the oracle's self-test too; never shown to a model).
WRONG: dict[str, list[dict[str, str]]] = {
    "count_logs": [{"count_logs.sh": "echo 2\n"}],  # hard-coded
    "csv2json": [  # the output written by hand, no working script
        {"people.json": '[{"name": "Ada", "age": 36}, {"name": "Alan", "age": 41}]', "csv2json.py": "pass\n"},
        {
            "csv2json.py": "import csv, json\n\njson.dump(list(csv.DictReader(open('people.csv'))), "
            "open('people.json', 'w'))\n"
        },  # ages left as text
    ],
    "make_version": [{"Makefile": "build:\n\ttrue\n", "out/version.txt": "2.4.1\n"}],  # the file by hand
    "make_test_fix": [  # the failing test edited away instead of the bug fixed
        {"test_temperature.py": "def test_nothing():\n    assert True\n"},
    ],
    "slug_tests": [{"tests/test_slug.py": "def test_a():\n    assert True\n\n\ndef test_b():\n    assert 1\n"}],
    "move_format_price": [{"shop.py": _SHOP}],  # copied into money.py, not moved: shop.py still defines it
    "rename_mean": [{"util.py": "def mean(xs):\n    return sum(xs) / len(xs)\n\n\ncalc_avg = mean\n"}],
    "wc_words": [{"wc.py": "import sys\nprint(7 if '--words' in sys.argv else 3)\n"}, {"sample.txt": "a b\n"}],
    "page_count": [{"pages.py": "def page_count(items, per_page):\n    return items // per_page + 1\n"}],
}

_MAKE_TASKS = {"make_version", "make_test_fix"}


def _workspace(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _marks(task_id: str) -> list[pytest.MarkDecorator]:
    return [needs_make] if task_id in _MAKE_TASKS else []


@pytest.mark.parametrize("task_id", [pytest.param(t.id, marks=_marks(t.id)) for t in HELDOUT2])
def test_a_task_fails_on_its_start_and_passes_on_its_reference_solution(task_id: str, tmp_path: Path) -> None:
    task = next(t for t in HELDOUT2 if t.id == task_id)
    start = _workspace(tmp_path / "start", task.files)
    answered = _workspace(tmp_path / "answered", {**task.files, **REFERENCE[task_id]})
    assert not all(c["passed"] for c in check_task(task, start)), "the oracle passes the untouched workspace"
    results = check_task(task, answered)
    assert all(c["passed"] for c in results), results
    assert all(c["passed"] for c in check_task(task, answered)), "the oracle is not repeatable on the same workspace"


@pytest.mark.parametrize(
    ("task_id", "index"),
    [pytest.param(t, i, marks=_marks(t)) for t, wrongs in WRONG.items() for i in range(len(wrongs))],
)
def test_a_wrong_answer_that_looks_right_fails(task_id: str, index: int, tmp_path: Path) -> None:
    task = next(t for t in HELDOUT2 if t.id == task_id)
    files = {**task.files, **REFERENCE[task_id], **WRONG[task_id][index]}
    if task_id == "make_version":  # the Makefile itself is the wrong answer
        files = {**task.files, **WRONG[task_id][index]}
    results = check_task(task, _workspace(tmp_path / "ws", files))
    assert not all(c["passed"] for c in results), results


def test_the_set_is_frozen_dated_new_and_large_enough() -> None:
    assert FROZEN_ON == "2026-11-28"
    assert len(HELDOUT2) >= 15 and SETS["heldout2"] is HELDOUT2
    assert sorted(REFERENCE) == sorted(t.id for t in HELDOUT2)
    ids = [t.id for t in (*TASKS, *HELDOUT, *HELDOUT2)]
    assert len(ids) == len(set(ids)), "a task id is used twice"
    earlier = {t.prompt for t in (*TASKS, *HELDOUT)}
    assert not earlier & {t.prompt for t in HELDOUT2}
    # the kinds the set must cover: edits of given files, command-line arguments, packages, data files as input,
    # refactors, and checks that are not Python
    assert sum(bool(t.files) for t in HELDOUT2) >= 8
    assert any(
        len(c.argv) > 2 and c.argv[0] == "python" and not c.argv[1].startswith("-") for t in HELDOUT2 for c in t.checks
    )
    assert {c.argv[0] for t in HELDOUT2 for c in t.checks} >= {"python", "sh", "make"}
    assert any(p.endswith("__init__.py") for files in REFERENCE.values() for p in files)
    assert any(p.endswith((".csv", ".json")) for t in HELDOUT2 for p in t.files)


def test_no_source_file_names_a_task_of_the_set() -> None:
    """A set that fixes are made from is no longer held out: no file under src/ names one of its tasks."""
    ids = {t.id for t in HELDOUT2}
    cited = [
        (str(path.relative_to(ROOT)), tid)
        for path in (ROOT / "src").rglob("*.py")
        for tid in ids
        if tid in path.read_text(errors="replace")
    ]
    assert not cited, cited
