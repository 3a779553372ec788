"""The second held-out set of the real-task benchmark, frozen on 2026-11-28.

FROZEN 2026-11-28, before any fix made for issue 44. Do not change a task, a prompt, a starting file or a check
after that date (a changed task is a new set with a new date and name), and never cite these tasks in a fix, a
commit message, a docstring or anything under ``src/``: a set that fixes are made from is no longer held out.
Run it with ``python -m bench.real_tasks --set heldout2`` (results: bench/results/real_tasks_heldout2.json).

The set is unlike the suite's 17 tasks and the first held-out ten (`bench.real_tasks.TASKS`, `HELDOUT`): other
phrasings (requests, bug reports, "I want to run ..."), edits of code the workspace starts with, command-line
arguments, packages, data files read as input (CSV, JSON), refactors (move or rename a function and keep its
callers working), and checks that are not Python (a shell script's output, a Makefile target that must pass).

Each task's checks are its oracle: commands run in the workspace after the run, deterministic, independent of
what the system says. Some checks prepare the workspace first (remove an output the run may have left, add a
file the script must also count), so a file written by hand or a hard-coded answer does not pass. The oracle's
self-test (tests/ecosystem/test_heldout_set.py) holds a reference solution per task: every task's checks fail on
its starting workspace and pass on that solution. The solutions are never shown to a model.
"""

from __future__ import annotations

from bench.task_spec import Task, cmd, has_file, py

__all__ = ["FROZEN_ON", "HELDOUT2"]

FROZEN_ON = "2026-11-28"

_TEMPERATURE_TEST = (
    "from temperature import f_to_c\n\n\ndef test_freezing():\n    assert f_to_c(32) == 0\n\n\n"
    "def test_boiling():\n    assert f_to_c(212) == 100\n"
)
_TEMPERATURE_MAKEFILE = "test:\n\tpython -m pytest -q -p no:cacheprovider test_temperature.py\n"
_SHOP = (
    "def format_price(cents):\n"
    '    return f"${cents // 100}.{cents % 100:02d}"\n\n\n'
    "def receipt(items):\n"
    "    total = sum(price for _, price in items)\n"
    '    lines = [f"{name} {format_price(price)}" for name, price in items]\n'
    '    lines.append(f"total {format_price(total)}")\n'
    '    return "\\n".join(lines)\n\n\n'
    'if __name__ == "__main__":\n'
    '    print(receipt([("tea", 250), ("cake", 1205)]))\n'
)
_WC = (
    "import sys\n\n\ndef main(argv):\n    path = argv[0]\n    with open(path) as f:\n"
    "        print(len(f.read().splitlines()))\n\n\n"
    'if __name__ == "__main__":\n    main(sys.argv[1:])\n'
)
_MATHLIB_MAIN = "from mathlib import clamp\n\nprint(clamp(15, 0, 10))\n"

#: A stand-in slugify that is wrong: the tests written for slug.py must fail on it (tests/test_slug.py's check).
_SLUG_TESTS_CATCH_A_BUG = """
import pathlib, shutil, subprocess, sys, tempfile, ast
tests = pathlib.Path('tests/test_slug.py')
tree = ast.parse(tests.read_text())
found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith('test')]
assert len(found) >= 2, f'{len(found)} tests'
with tempfile.TemporaryDirectory() as tmp:
    shutil.copytree('.', tmp, dirs_exist_ok=True)
    pathlib.Path(tmp, 'slug.py').write_text('def slugify(title):\\n    return title\\n')
    run = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'tests/test_slug.py'],
                         cwd=tmp, capture_output=True, text=True)
    assert run.returncode != 0, 'the tests pass on a slugify that returns its input unchanged'
"""

HELDOUT2: tuple[Task, ...] = (
    Task(
        "cli_sum",
        "I want to run `python sum_args.py 3 4 5` and see 12: make sum_args.py add up the whole numbers given on "
        "the command line and print the total.",
        1,
        (
            py("sum_args.py", "3", "4", "5", expect="12"),
            py("sum_args.py", "10", expect="10"),
            py("sum_args.py", "1", "2", expect="3"),
        ),
    ),
    Task(
        "sh_hi",
        "Add a shell script called hi.sh. `sh hi.sh Bob` has to print exactly `Hi, Bob` (for whatever name is passed "
        "as the first argument).",
        1,
        (cmd("sh", "hi.sh", "Bob", expect="Hi, Bob"), cmd("sh", "hi.sh", "Eve", expect="Hi, Eve")),
    ),
    Task(
        "make_version",
        "This project has a VERSION file. Write a Makefile with a target named build that creates the folder out and "
        "writes the contents of VERSION into out/version.txt. `make build` must succeed.",
        1,
        (
            py("-c", "import shutil; shutil.rmtree('out', ignore_errors=True)"),  # what the run left is not counted
            cmd("make", "build"),
            py("-c", "import pathlib; assert pathlib.Path('out/version.txt').read_text().strip() == '2.4.1'"),
        ),
        files={"VERSION": "2.4.1\n"},
    ),
    Task(
        "make_test_fix",
        "`make test` fails in this project. Find the bug in temperature.py and correct it so that `make test` "
        "passes. Leave the tests and the Makefile as they are.",
        1,
        (
            cmd("make", "test"),
            py("-c", "from temperature import f_to_c; assert f_to_c(50) == 10 and f_to_c(-40) == -40"),
            py("-c", f"assert open('test_temperature.py').read() == {_TEMPERATURE_TEST!r}"),
            py("-c", f"assert open('Makefile').read() == {_TEMPERATURE_MAKEFILE!r}"),
        ),
        files={
            "temperature.py": "def f_to_c(f):\n    return (f - 32) * 9 / 5\n",
            "test_temperature.py": _TEMPERATURE_TEST,
            "Makefile": _TEMPERATURE_MAKEFILE,
        },
    ),
    Task(
        "region_totals",
        "sales.csv holds one sale per row (a region and a whole-number amount). Write region_totals.py to print each "
        "region's total amount as `region: total`, one region per line, sorted by region name.",
        1,
        (py("region_totals.py", expect="east: 55\nnorth: 150\nsouth: 100"),),
        files={"sales.csv": "region,amount\nnorth,120\nsouth,80\nnorth,30\neast,55\nsouth,20\n"},
    ),
    Task(
        "active_users",
        "Given users.json, I need list_active.py: it prints the name of every user whose active flag is true, in "
        "alphabetical order, one per line.",
        1,
        (py("list_active.py", expect="mia\nzoe"),),
        files={
            "users.json": '[{"name": "zoe", "active": true}, {"name": "adam", "active": false}, '
            '{"name": "mia", "active": true}]\n'
        },
    ),
    Task(
        "inventory_pkg",
        "Set up a small package named inventory. inventory/stock.py must define a class Stock with add(item, n) and "
        "count(item) methods (count returns 0 for an item never added). Running `python -m inventory` should print "
        "ready.",
        3,
        (
            has_file("inventory/__init__.py"),
            py(
                "-c",
                "from inventory.stock import Stock\ns = Stock()\ns.add('pen', 2)\ns.add('pen', 3)\n"
                "assert s.count('pen') == 5 and s.count('ink') == 0",
            ),
            py("-m", "inventory", expect="ready"),
        ),
    ),
    Task(
        "move_format_price",
        "Refactor: format_price should live in a new module money.py instead of shop.py. Move it there; shop.py must "
        "no longer define it, and both shop.py and report.py must still run and print what they print now.",
        2,
        (
            py("-c", "import money; assert money.format_price(1234) == '$12.34'"),
            py(
                "-c",
                "import ast; tree = ast.parse(open('shop.py').read()); "
                "assert 'format_price' not in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}",
            ),
            py("shop.py", expect="tea $2.50\ncake $12.05\ntotal $14.55"),
            py("report.py", expect="$0.99"),
        ),
        files={"shop.py": _SHOP, "report.py": "from shop import format_price\n\nprint(format_price(99))\n"},
    ),
    Task(
        "wc_words",
        "wc.py counts the lines of the file named on its command line. Give it a --words option: `python wc.py "
        "--words sample.txt` prints the number of words instead. Without the option it must keep printing the line "
        "count.",
        1,
        (
            py("wc.py", "sample.txt", expect="3"),
            py("wc.py", "--words", "sample.txt", expect="7"),
            py("-c", "open('other.txt', 'w').write('a b\\nc\\n')"),  # a second file: hard-coded counts do not pass
            py("wc.py", "other.txt", expect="2"),
            py("wc.py", "--words", "other.txt", expect="3"),
        ),
        files={"wc.py": _WC, "sample.txt": "one two three\nfour five\nsix seven\n"},
    ),
    Task(
        "page_count",
        "Bug report: page_count(10, 3) in pages.py returns 3, but ten entries at three per page need 4 pages. Please "
        "correct page_count.",
        1,
        (py("-c", "from pages import page_count as p; assert (p(10, 3), p(9, 3), p(1, 5), p(0, 5)) == (4, 3, 1, 0)"),),
        files={
            "pages.py": 'def page_count(items, per_page):\n    """How many pages `items` entries fill, `per_page` on '
            'each page."""\n    return items // per_page\n'
        },
    ),
    Task(
        "slug_tests",
        "slug.py has no tests yet. Add a pytest file tests/test_slug.py with at least two tests of slugify.",
        1,
        (
            py("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_slug.py", contains="passed"),
            py("-c", _SLUG_TESTS_CATCH_A_BUG),
        ),
        files={
            "slug.py": 'def slugify(title):\n    words = "".join(c if c.isalnum() else " " for c in title.lower())'
            '.split()\n    return "-".join(words)\n'
        },
    ),
    Task(
        "merge_config",
        "Write merge_config.py. It reads defaults.json, lets every key in local.json override it, and saves the merged "
        "settings to config.json. It should not print anything.",
        1,
        (
            py("-c", "import os\nif os.path.exists('config.json'): os.remove('config.json')"),
            py("merge_config.py", expect=""),
            py(
                "-c",
                "import json; assert json.load(open('config.json')) == "
                "{'host': 'localhost', 'port': 8000, 'debug': True}",
            ),
        ),
        files={
            "defaults.json": '{"host": "localhost", "port": 80, "debug": false}\n',
            "local.json": '{"port": 8000, "debug": true}\n',
        },
    ),
    Task(
        "count_logs",
        "Write count_logs.sh, a plain sh script that prints how many files in the logs directory have the .log "
        "extension.",
        1,
        (
            py("-c", "import os\nif os.path.exists('logs/extra.log'): os.remove('logs/extra.log')"),
            cmd("sh", "count_logs.sh", expect="2"),
            py("-c", "open('logs/extra.log', 'w').write('x\\n')"),  # one more: a hard-coded 2 does not pass
            cmd("sh", "count_logs.sh", expect="3"),
        ),
        files={"logs/app.log": "a\n", "logs/db.log": "b\n", "logs/notes.txt": "c\n"},
    ),
    Task(
        "greet_times",
        "Make greet_cli.py a command-line tool: it takes a name and an optional --times N (default 1) and prints "
        "`Hello <name>` N times, one per line.",
        1,
        (
            py("greet_cli.py", "Ana", expect="Hello Ana"),
            py("greet_cli.py", "--times", "3", "Bo", expect="Hello Bo\nHello Bo\nHello Bo"),
        ),
    ),
    Task(
        "mathlib_pkg",
        "`python main.py` stops with an ImportError. Turn mathlib into a regular package that offers clamp directly, "
        "so main.py runs as it is (do not edit main.py).",
        1,
        (
            has_file("mathlib/__init__.py"),
            py("main.py", expect="10"),
            py("-c", f"assert open('main.py').read() == {_MATHLIB_MAIN!r}"),
        ),
        files={
            "mathlib/core.py": "def clamp(x, low, high):\n    return max(low, min(x, high))\n",
            "main.py": _MATHLIB_MAIN,
        },
    ),
    Task(
        "csv2json",
        "Write csv2json.py, which turns people.csv into people.json: a JSON list with one object per row, keys name "
        "and age, the age as a number.",
        1,
        (
            py("-c", "import os\nif os.path.exists('people.json'): os.remove('people.json')"),
            py("csv2json.py"),
            py(
                "-c",
                "import json; assert json.load(open('people.json')) == "
                "[{'name': 'Ada', 'age': 36}, {'name': 'Alan', 'age': 41}]",
            ),
        ),
        files={"people.csv": "name,age\nAda,36\nAlan,41\n"},
    ),
    Task(
        "rename_mean",
        "Rename the function calc_avg to mean across the project (util.py, a.py and b.py), and keep both scripts "
        "working.",
        3,
        (
            py("a.py", expect="2.0"),
            py("b.py", expect="15.0"),
            py("-c", "import util; assert util.mean([2, 4]) == 3 and not hasattr(util, 'calc_avg')"),
            py(
                "-c",
                "import pathlib; assert not any('calc_avg' in p.read_text() for p in pathlib.Path('.').glob('*.py'))",
            ),
        ),
        files={
            "util.py": "def calc_avg(xs):\n    return sum(xs) / len(xs)\n",
            "a.py": "from util import calc_avg\n\nprint(calc_avg([1, 2, 3]))\n",
            "b.py": "import util\n\nprint(util.calc_avg([10, 20]))\n",
        },
    ),
)
